"""`/metrics` and `--log-format json` of a real `upgrade-bot run --http` process.

The exposition is parsed with Prometheus' own text parser, as a scraper would read it.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.bot_process import BotProcess, bot_command
from tests.support.scrape import scrape
from tests.support.secrets import APP_TOKEN, SECRETS, SIGNING_SECRET
from tests.support.signing import get, post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub
from tests.support.socket_stub import SocketModeStub
from tests.support.testbed import wait_until


def command(bot: BotProcess, stub: SlackStub, text: str, name: str) -> None:
    body = slash_command_body(text, response_url=stub.response_url(name), trigger_id=f"trigger-{name}")
    assert post(f"{bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200


def test_metrics_of_a_real_process_parse_and_count_commands_acks_and_slack_calls(
    write_config: Callable[..., Path], bot_env: dict[str, str], slack_stub: SlackStub
) -> None:
    # Bolt checks the token with auth.test at start-up: rate limited once, then answered.
    slack_stub.fail_next("auth.test", status=429, retry_after=1)
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()
    try:
        command(bot, slack_stub, "help", "help")
        command(bot, slack_stub, "frobnicate now", "typo")
        slack_stub.wait_for(lambda: len(slack_stub.responses) >= 2, timeout=30)
        # The audit row and the counter are written, and the inbox item marked done, around the
        # reply: wait for the counter and for the workers to be at rest.
        samples = wait_until(
            lambda: _when_idle(_when_counted(scrape(f"{bot.url}/metrics"))),
            timeout=30,
            what="both commands counted, the workers idle",
        )
    finally:
        bot.stop()

    assert samples[("upgrade_bot_commands_total", (("outcome", "ok"), ("subcommand", "help")))] == 1
    # What someone typed is never a label: an unknown subcommand is counted as `unknown`.
    assert samples[("upgrade_bot_commands_total", (("outcome", "usage"), ("subcommand", "unknown")))] == 1
    assert not any("frobnicate" in str(key) for key in samples)
    # Both requests were acked, each well inside Slack's 3 s.
    assert samples[("upgrade_bot_ack_seconds_count", ())] == 2
    assert samples[("upgrade_bot_ack_seconds_bucket", (("le", "3.0"),))] == 2
    assert samples[("upgrade_bot_slack_calls_total", (("method", "auth.test"), ("result", "ok")))] == 1
    assert samples[("upgrade_bot_slack_rate_limited_total", ())] == 1
    assert samples[("upgrade_bot_slack_rate_limit_wait_seconds_total", ())] >= 0.9
    # Present at 0 before anything happens, so an alert on "dropped > 0" has a series to watch.
    assert samples[("upgrade_bot_card_updates_total", (("outcome", "dropped"),))] == 0
    assert samples[("upgrade_bot_announcements_total", (("outcome", "skipped"),))] == 0
    assert samples[("upgrade_bot_worker_queue_depth", ())] == 0
    assert ("upgrade_bot_leader_epoch", ()) in samples
    assert ("process_resident_memory_bytes", ()) in samples


def _when_idle(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    return samples if samples and samples.get(("upgrade_bot_worker_queue_depth", ())) == 0 else None


def _when_counted(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], commands: int = 2
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    counted = sum(v for (name, _), v in samples.items() if name == "upgrade_bot_commands_total")
    return samples if counted >= commands else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_socket_mode_serves_metrics_on_its_port_and_times_its_acks(
    write_config: Callable[..., Path], bot_env: dict[str, str], slack_stub: SlackStub
) -> None:
    socket_stub = SocketModeStub().start()
    slack_stub.socket_url = socket_stub.url
    port = _free_port()
    env = {**bot_env, "SLACK_APP_TOKEN": APP_TOKEN}
    command = [*bot_command(), "run", "--health-port", str(port), "--config", str(write_config())]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert "connected to Slack in Socket Mode" in process.stdout.readline()
        socket_stub.wait_connected(1)
        envelope = socket_stub.send_slash_command(
            {
                "team_id": "T0TEAM",
                "channel_id": "C0OPS",
                "user_id": "U0PRIMARY",
                "command": "/upgrade",
                "text": "help",
                "api_app_id": "A0STUB",
                "response_url": slack_stub.response_url("socket"),
                "trigger_id": "t-socket",
            }
        )
        socket_stub.wait_ack(envelope)
        slack_stub.wait_for_responses(1)
        samples = wait_until(
            lambda: _when_counted(scrape(f"http://127.0.0.1:{port}/metrics"), commands=1),
            timeout=30,
            what="the command counted",
        )
        assert get(f"http://127.0.0.1:{port}/readyz").status == 200
        assert get(f"http://127.0.0.1:{port}/healthz").status == 200
        assert get(f"http://127.0.0.1:{port}/slack/events").status == 404
    finally:
        process.terminate()
        process.communicate(timeout=30)
        socket_stub.stop()
    assert samples[("upgrade_bot_commands_total", (("outcome", "ok"), ("subcommand", "help")))] == 1
    assert samples[("upgrade_bot_ack_seconds_count", ())] == 1
    assert samples[("upgrade_bot_ack_seconds_bucket", (("le", "3.0"),))] == 1
    assert (
        samples[("upgrade_bot_slack_calls_total", (("method", "apps.connections.open"), ("result", "ok")))]
        >= 1
    )


def test_json_logs_are_one_object_per_line_with_ids_and_no_token(
    write_config: Callable[..., Path], bot_env: dict[str, str], slack_stub: SlackStub
) -> None:
    bot = BotProcess(
        config=write_config(),
        env=bot_env,
        stub=slack_stub,
        log_level="DEBUG",
        extra_args=["--log-format", "json"],
    )
    bot.start()
    try:
        command(bot, slack_stub, "help", "help")
        slack_stub.wait_for_responses(1)
    finally:
        stderr = bot.stop()

    assert bot.process is not None
    pid = bot.process.pid
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines
    entries = [json.loads(line) for line in lines]  # every line is JSON, or this raises
    for entry in entries:
        assert {"time", "level", "logger", "message", "correlation_id", "run_id", "replica_id"} <= set(entry)
        assert entry["time"].endswith("+00:00")
        assert str(entry["replica_id"]).endswith(f":{pid}")
    running = [e for e in entries if e["message"].startswith("running /upgrade help")]
    assert len(running) == 1
    assert running[0]["correlation_id"]
    assert running[0]["logger"] == "bot.router"
    # slack_sdk logs request headers at DEBUG: the token is redacted in JSON as in text.
    for secret in SECRETS:
        assert secret not in stderr
