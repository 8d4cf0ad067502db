"""The terminal front door answers expected failures in one line, with no traceback (issue 11 item 8).

A cluster that refuses the connection, answers 401 or 403, or an `--out` that cannot be written:
each is a short reason on the terminal and a warning line in the log, never a stack trace.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.bot_process import bot_command
from tests.support.kubeconfigs import closed_port, write_kubeconfig


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", server, context="prod-admin")


class _Status(http.server.BaseHTTPRequestHandler):
    code = 401

    def do_GET(self) -> None:
        body = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "nope", "code": self.code}
        ).encode()
        self.send_response(self.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=[401, 403])
def refusing_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    handler = type("Handler", (_Status,), {"code": request.param})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", int(request.param)
    server.shutdown()
    server.server_close()


def _exec(config: Path, text: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "exec", "--config", str(config), "--as", "U0PRIMARY", text, *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=90,
    )


def test_an_unreachable_cluster_is_one_line_naming_its_context(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}")
    done = _exec(write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}}}\n"), "snapshot pre")
    assert done.returncode == 1
    assert "cluster prod (context prod-admin) refused the connection" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert "Retrying" not in done.stderr  # urllib3's retry chatter stays below the adapter's line


def test_a_cluster_answering_401_or_403_is_one_line(
    write_config: Callable[..., Path], tmp_path: Path, refusing_server: tuple[str, int]
) -> None:
    url, code = refusing_server
    kubeconfig = _kubeconfig(tmp_path, url)
    done = _exec(write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}}}\n"), "snapshot pre")
    assert done.returncode == 1
    assert "cluster prod" in done.stdout
    assert "nope" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert code in (401, 403)


def test_an_out_directory_that_cannot_be_written_is_one_line(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = _exec(write_config(), "audit", "--out", str(blocker / "sub"))
    assert done.returncode == 2
    assert "Traceback" not in done.stdout + done.stderr
    assert f"cannot write {blocker / 'sub'}" in done.stderr
