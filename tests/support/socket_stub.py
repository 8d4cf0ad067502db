"""A Socket Mode stub: a websocket server on 127.0.0.1 that speaks Slack's Socket Mode protocol.

On each connection it sends `hello`; `send_slash_command` pushes an envelope to the connected
client and records the client's acknowledgement; `disconnect` asks the client to reconnect (as
Slack does when it refreshes connections) so tests can check the bot comes back.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve


class SocketModeStub:
    def __init__(self) -> None:
        self.connections: list[ServerConnection] = []
        self.acks: dict[str, dict[str, Any]] = {}
        self.hellos = 0
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._server: Server = serve(self._handle, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, name="socket-stub", daemon=True)

    def start(self) -> SocketModeStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        for conn in list(self.connections):
            with contextlib.suppress(Exception):
                conn.close()
        self._server.shutdown()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        host, port = self._server.socket.getsockname()[:2]
        return f"ws://{host}:{port}/link"

    def _handle(self, conn: ServerConnection) -> None:
        with self._cond:
            self.connections.append(conn)
        conn.send(
            json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0STUB"}})
        )
        with self._cond:
            self.hellos += 1
            self._cond.notify_all()
        try:
            for message in conn:
                data = json.loads(message)
                if "envelope_id" in data:
                    with self._cond:
                        self.acks[data["envelope_id"]] = data
                        self._cond.notify_all()
        except ConnectionClosed:
            pass
        finally:
            with self._cond:
                if conn in self.connections:
                    self.connections.remove(conn)
                self._cond.notify_all()

    def wait(self, predicate: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"socket stub: timed out after {timeout}s")
                self._cond.wait(remaining)

    def wait_connected(self, hellos: int = 1, timeout: float = 10.0) -> None:
        self.wait(lambda: self.hellos >= hellos and self.connections, timeout)

    def send_slash_command(self, payload: dict[str, Any]) -> str:
        return self.send("slash_commands", payload)

    def send(self, kind: str, payload: Any) -> str:
        """One envelope of `kind` (slash_commands, interactive, events_api); its envelope id."""
        envelope_id = f"env-{next(self._ids)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "payload": payload,
        }
        with self._cond:
            conn = self.connections[-1]
        conn.send(json.dumps(envelope))
        return envelope_id

    def wait_ack(self, envelope_id: str, timeout: float = 10.0) -> dict[str, Any]:
        self.wait(lambda: envelope_id in self.acks, timeout)
        return self.acks[envelope_id]

    def disconnect(self) -> None:
        """Ask the client to reconnect, then drop the connection, as Slack's refresh does."""
        with self._cond:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.send(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))
                conn.close()
            except ConnectionClosed:
                pass
