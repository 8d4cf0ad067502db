"""A loopback Grafana that records `POST /api/annotations` (path, headers, JSON body) and answers
each with the next status of its script (200 once the script is spent), like Grafana's
`{"id": N, "message": "Annotation added"}`."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: Any
    status: int


class GrafanaStub:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        #: Statuses to answer, first to last; then 200.
        self.script: list[int] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stub._lock:
                    status = stub.script.pop(0) if stub.script else 200
                    stub.requests.append(
                        Request(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(data),
                            status,
                        )
                    )
                    n = len(stub.requests)
                answer = (
                    {"id": n, "message": "Annotation added"}
                    if status == 200
                    else {"message": "internal error"}
                )
                out = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="grafana-stub",
            daemon=True,
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def delivered(self) -> list[Request]:
        """The requests Grafana accepted, in order."""
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    def all(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def __enter__(self) -> GrafanaStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
