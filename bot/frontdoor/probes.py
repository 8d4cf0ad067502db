"""Kubernetes' probes, on a small port and thread of their own (`run --health-port N`, in either
mode; the Helm chart always sets it), and on the HTTP front door's port too (`--http`).

- `GET /healthz` — liveness: the process answers and its lease thread is not wedged (it went
  round within `WEDGED_AFTER`). Kubernetes restarts a pod that fails it, so it checks nothing
  outside the process: a database or Slack outage must not restart every replica at once.
- `GET /readyz` — readiness: the database answers a query, Slack answered `auth.test` within
  `SLACK_MAX_AGE` (asked at most every `SLACK_TTL`, so probes do not spend Slack's rate limit),
  and the process is not shutting down. Leading is not required: every replica serves commands.

Each answer is `text/plain`, one `name value` line per check, so a person reading it sees which
check failed. More routes (ops' `/metrics`) are added to `routes`: path → function returning
(status line, body).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from bot.adapters.store import Store
from bot.errors import BotError
from bot.frontdoor.leadership import Elector
from bot.frontdoor.wsgi import plain

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

#: How often readiness asks Slack at most; and how old a success may be before it counts as down.
SLACK_TTL = 30.0
SLACK_MAX_AGE = 120.0
#: The lease thread goes round every renew interval; this many seconds without a round is wedged.
WEDGED_AFTER = 60.0

OK, UNAVAILABLE = "200 OK", "503 Service Unavailable"
#: Connections the probes' own port holds at once (`serve`).
PROBE_CONNECTIONS = 100
Route = Callable[[], tuple[str, bytes]]


class Probes:
    def __init__(
        self,
        *,
        store: Store,
        slack_ping: Callable[[], object] | None,
        elector: Elector | None = None,
        stop: threading.Event | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.slack_ping = slack_ping
        self.elector = elector
        self.stop = stop or threading.Event()
        self.monotonic = monotonic
        self._slack_lock = threading.Lock()
        self._slack_asked = float("-inf")
        self._slack_ok_at = float("-inf")
        self.routes: dict[str, Route] = {"/healthz": self.healthz, "/readyz": self.readyz}

    def healthz(self) -> tuple[str, bytes]:
        lines, ok = ["process ok"], True
        if self.elector is not None:
            idle = self.monotonic() - self.elector.last_beat
            wedged = idle > max(WEDGED_AFTER, 3 * self.elector.renew.total_seconds())
            ok = not wedged
            lines.append(f"lease-thread {'wedged' if wedged else 'ok'} ({idle:.0f}s since its last round)")
        return (OK if ok else UNAVAILABLE), _text(lines)

    def readyz(self) -> tuple[str, bytes]:
        checks = {
            "serving": not self.stop.is_set(),  # failing once SIGTERM arrived
            "database": self.store.ping(),
            "slack": self._slack_ok(),
        }
        lines = [f"{name} {'ok' if good else 'failing'}" for name, good in checks.items()]
        if self.elector is not None:
            state = self.elector.state
            lines.append(f"leader {'yes' if state.is_leader else 'no'} epoch {state.epoch}")
        return (OK if all(checks.values()) else UNAVAILABLE), _text(lines)

    def _slack_ok(self) -> bool:
        if self.slack_ping is None:
            return True  # a front door without Slack (never the case when serving)
        now = self.monotonic()
        # One caller asks Slack when the answer is old; the others use the cached one meanwhile.
        if now - self._slack_asked >= SLACK_TTL and self._slack_lock.acquire(blocking=False):
            try:
                self._slack_asked = now
                self.slack_ping()
                self._slack_ok_at = self.monotonic()
            except BotError as exc:
                # Refused (a revoked token) or no answer: the error says which.
                log.warning("readiness: Slack's auth.test failed: %s", exc.user_message)
            except Exception:
                log.warning("readiness: Slack did not answer auth.test", exc_info=True)
            finally:
                self._slack_lock.release()
        return self.monotonic() - self._slack_ok_at <= SLACK_MAX_AGE

    # -- a port of their own (Socket Mode) -------------------------------------------------------

    def wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        route = self.routes.get(str(environ.get("PATH_INFO", "")))
        status, body = route() if route is not None else ("404 Not Found", b"not found\n")
        return plain(start_response, status, body)

    def serve(self, *, host: str, port: int) -> Any:
        """Serve the routes on `host:port` from a thread; its `ServerThread` (`.close()` stops it
        and joins the thread, without the EBADF a bare waitress loop raises once closed)."""
        from bot.frontdoor.http import ServerThread, make_server  # waitress's one home

        # A probe or a scrape is one short request at a time: a hundred connections is plenty, and
        # past them the idle ones are closed to make room (`bot.frontdoor.http._DoorServer`).
        server: Any = make_server(
            self.wsgi, host=host, port=port, threads=2, connection_limit=PROBE_CONNECTIONS
        )
        log.info("probes on http://%s:%s", host, server.effective_port)
        return ServerThread(server, name="probes").start()


def _text(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()
