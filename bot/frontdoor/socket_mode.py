"""Socket Mode transport: the same Bolt App over Slack's websocket, for workspaces behind firewalls.

Requests are not signed in Socket Mode (the app-level token authenticates the connection). The
builtin client reconnects by itself when the server drops the connection.

Each envelope's payload is checked against Slack's shapes (`bot.frontdoor.payloads`) before Bolt
dispatches it, as the HTTP door does: one that does not fit is acked (so Slack does not send it
again) and dropped, with one log line and no traceback; so is one that fits but that no listener
takes (Bolt itself would leave it unacknowledged).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.socket_mode.internals import run_bolt_app, send_response
from slack_sdk.socket_mode.builtin.client import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.frontdoor import payloads

log = logging.getLogger(__name__)


def make_handler(
    app: App, app_token: str, *, ping_interval: float = 10, on_ack: Callable[[float], None] | None = None
) -> SocketModeHandler:
    """`on_ack(seconds)` hears how long each request took from its arrival to its ack."""
    return GuardedHandler(app, app_token=app_token, ping_interval=ping_interval, on_ack=on_ack)


class GuardedHandler(SocketModeHandler):
    """Bolt's handler behind the payload check, timing each envelope from arrival to its ack."""

    def __init__(
        self,
        app: App,
        *,
        app_token: str,
        ping_interval: float,
        on_ack: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__(app, app_token=app_token, ping_interval=ping_interval)
        self._on_ack = on_ack

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        started = time.monotonic()
        try:
            payloads.check(req.payload, req.type)
        except payloads.MalformedPayload as exc:
            log.warning("ignored a Socket Mode %s envelope: not a shape Slack sends: %s", req.type[:40], exc)
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        else:
            # Bolt returns once the listener has acked; the work itself runs on the bot's workers.
            response = run_bolt_app(self.app, req)
            if response.status == 200:
                send_response(client, req, response, started)
            else:
                # No listener for it (a shortcut the bot does not have): Bolt would leave the
                # envelope unacknowledged and Slack would send it again.
                log.info("acked a Socket Mode %s envelope no listener takes", req.type[:40])
                client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        if self._on_ack is not None:
            self._on_ack(time.monotonic() - started)
