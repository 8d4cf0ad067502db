"""Socket Mode transport: the same Bolt App over Slack's websocket, for workspaces behind firewalls.

Requests are not signed in Socket Mode (the app-level token authenticates the connection). The
builtin client reconnects by itself when the server drops the connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk.socket_mode.builtin.client import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest


def make_handler(
    app: App, app_token: str, *, ping_interval: float = 10, on_ack: Callable[[float], None] | None = None
) -> SocketModeHandler:
    """`on_ack(seconds)` hears how long each request took from its arrival to its ack."""
    if on_ack is not None:
        return _TimedHandler(app, app_token=app_token, ping_interval=ping_interval, on_ack=on_ack)
    return SocketModeHandler(app, app_token=app_token, ping_interval=ping_interval)


class _TimedHandler(SocketModeHandler):
    """Bolt's handler, timing each envelope from arrival to the ack sent back over the socket."""

    def __init__(
        self, app: App, *, app_token: str, ping_interval: float, on_ack: Callable[[float], None]
    ) -> None:
        super().__init__(app, app_token=app_token, ping_interval=ping_interval)
        self._on_ack = on_ack

    def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        started = time.monotonic()
        # Bolt returns once the listener has acked; the work itself runs on the bot's workers.
        super().handle(client, req)
        self._on_ack(time.monotonic() - started)
