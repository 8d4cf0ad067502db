"""HTTP transport: Bolt's `/slack/events` endpoint plus `/healthz` and `/readyz`, under waitress.

Bolt's `app.start()` is a development server; waitress is a production WSGI server with its own
thread pool, pure Python, so the image needs no compiler. The sync Bolt App is WSGI-native, so no
ASGI bridge blocks an event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from waitress.server import create_server

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class HttpFrontDoor:
    """A WSGI application routing Slack requests to Bolt and probes to health checks."""

    def __init__(self, app: App, *, ready: Callable[[], bool]) -> None:
        self.slack = SlackRequestHandler(app, path=EVENTS_PATH)
        self.ready = ready

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _plain(start_response, "200 OK", b"ok\n")
        if path == "/readyz":
            if self.ready():
                return _plain(start_response, "200 OK", b"ready\n")
            return _plain(start_response, "503 Service Unavailable", b"not ready\n")
        if path == EVENTS_PATH:
            return self.slack(environ, start_response)
        return _plain(start_response, "404 Not Found", b"not found\n")


def _plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]


def make_server(wsgi_app: Any, *, host: str, port: int, threads: int = 8) -> Any:
    """A waitress server bound now (port 0 picks a free port: see `.effective_port`)."""
    return create_server(wsgi_app, host=host, port=port, threads=threads, ident="upgrade-bot")
