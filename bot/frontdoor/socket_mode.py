"""Socket Mode transport: the same Bolt App over Slack's websocket, for workspaces behind firewalls.

Requests are not signed in Socket Mode (the app-level token authenticates the connection). The
builtin client reconnects by itself when the server drops the connection.
"""

from __future__ import annotations

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler


def make_handler(app: App, app_token: str, *, ping_interval: float = 10) -> SocketModeHandler:
    return SocketModeHandler(app, app_token=app_token, ping_interval=ping_interval)
