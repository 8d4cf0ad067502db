"""The HTTP door under idle sockets and a large body: a real `upgrade-bot run --http --health-port 0`.

With N idle TCP connections open on Slack's port (each round: 0, then `--idle` values), measures
the time to the ack of a signed `/upgrade help`, and to the answer of `/healthz` on the health
port and on Slack's port. Then the refusal of a 100 MB unsigned body: its headers alone (the
answer before a byte of the body is sent), the body sent whole (urllib, which sends before it
reads), and chunked without a Content-Length; with the bytes the bot wrote meanwhile (Linux's
/proc/PID/io `wchar`: its files and pipes, not its sockets) and what is left in its TMPDIR.
Prints each figure; the median of `--rounds` for the timings.

Usage: .venv/bin/python benchmarks/bench_door.py [--idle 200 1000 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bot_process import bot_command  # noqa: E402
from tests.support.secrets import BOT_TOKEN, ROSTER_YAML, SIGNING_SECRET  # noqa: E402
from tests.support.signing import get, post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402

HUNDRED_MB = 100 * 1000 * 1000


def median(figures: list[float]) -> str:
    return f"{statistics.median(figures) * 1000:8.1f} ms (max {max(figures) * 1000:.1f})"


def timed(rounds: int, measure: Callable[[], float]) -> list[float]:
    return [measure() for _ in range(rounds)]


def written(pid: int) -> int:
    io = Path(f"/proc/{pid}/io").read_text()
    match = re.search(r"^wchar: (\d+)$", io, re.M)
    assert match
    return int(match.group(1))


def headers_alone(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        started = time.monotonic()
        conn.sendall(
            f"POST /slack/events HTTP/1.1\r\nHost: door\r\nContent-Length: {HUNDRED_MB}\r\n\r\n".encode()
        )
        answer = conn.recv(4096)
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    return took


def whole(url: str, body: bytes) -> float:
    result = post(f"{url}/slack/events", body, {"Content-Type": "text/plain"}, timeout=60)
    assert result.status == 413, result
    return result.seconds


def chunked(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        started = time.monotonic()
        conn.sendall(b"POST /slack/events HTTP/1.1\r\nHost: door\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % 65536 + b"x" * 65536 + b"\r\n"

        def send() -> None:
            try:
                for _ in range(HUNDRED_MB // 65536):
                    conn.sendall(chunk)
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = conn.recv(4096)
        took = time.monotonic() - started
        conn.shutdown(socket.SHUT_RDWR)
        sender.join(timeout=30)
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, nargs="+", default=[200, 1000, 2000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-door-") as tmp, SlackStub() as stub, ExitStack() as stack:
        work = Path(tmp)
        spool = work / "spool"
        spool.mkdir()
        config = work / "upgrade-bot.yaml"
        config.write_text(f"data_dir: {work / 'data'}\n{ROSTER_YAML}", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env.update(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=stub.api_url,
            PYTHONUNBUFFERED="1",
            TMPDIR=str(spool),
        )
        command = [
            *bot_command(),
            "run",
            "--http",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--health-port",
            "0",
        ]
        bot = subprocess.Popen(
            [*command, "--config", str(config)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        stack.callback(bot.wait, timeout=30)
        stack.callback(bot.terminate)
        assert bot.stdout is not None
        url = re.search(r"listening on (http://\S+)", bot.stdout.readline()).group(1)  # type: ignore[union-attr]
        probes = re.search(r"probes on (http://\S+)", bot.stdout.readline()).group(1)  # type: ignore[union-attr]
        port = int(url.rsplit(":", 1)[1])
        sent = 0

        def ack() -> float:
            nonlocal sent
            sent += 1
            body = slash_command_body(
                "help", response_url=stub.response_url(f"h{sent}"), trigger_id=f"t{sent}"
            )
            result = post(f"{url}/slack/events", body, signed_headers(body, SIGNING_SECRET), timeout=60)
            assert result.status == 200, result
            return result.seconds

        def probe(base: str) -> Callable[[], float]:
            def measure() -> float:
                result = get(f"{base}/healthz", timeout=60)
                assert result.status == 200, result
                return result.seconds

            return measure

        print(f"upgrade-bot run --http at {url}, probes at {probes}; median of {args.rounds} rounds")
        opened: list[socket.socket] = []
        for idle in [0, *args.idle]:
            while len(opened) < idle:
                opened.append(stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30)))
            print(f"{idle:5d} idle connections on Slack's port:")
            print(f"  signed /upgrade help acked      {median(timed(args.rounds, ack))}")
            print(f"  /healthz on the health port     {median(timed(args.rounds, probe(probes)))}")
            print(f"  /healthz on Slack's port        {median(timed(args.rounds, probe(url)))}")
        for conn in opened:
            conn.close()
        body = b"x" * HUNDRED_MB
        before = written(bot.pid)
        print("a 100 MB unsigned body:")
        print(f"  refused on its headers alone    {median(timed(args.rounds, lambda: headers_alone(port)))}")
        print(f"  refused, sent whole (urllib)    {median(timed(args.rounds, lambda: whole(url, body)))}")
        print(f"  refused, chunked                {median(timed(args.rounds, lambda: chunked(port)))}")
        print(
            f"  bytes the bot wrote meanwhile   {written(bot.pid) - before:8d} (files and pipes: its log lines)"
        )
        print(f"  files left in its TMPDIR        {len(list(spool.iterdir())):8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
