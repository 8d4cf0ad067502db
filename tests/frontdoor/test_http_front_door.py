"""`upgrade-bot run --http`, started as a real process, answering really signed requests."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.settings import load_settings
from commands import build_registry
from tests.conftest import SECRETS, SIGNING_SECRET, bot_command
from tests.support.signing import get, post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub


@dataclass
class RunningBot:
    url: str
    process: subprocess.Popen[str]
    config: Path
    stderr: str = ""


@pytest.fixture
def http_bot(write_config: Callable[..., Path], bot_env: dict[str, str]) -> Iterator[RunningBot]:
    config = write_config()
    process = subprocess.Popen(
        [
            *bot_command(),
            "run",
            "--http",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--config",
            str(config),
            "--log-level",
            "DEBUG",
        ],
        env=bot_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"listening on (http://\S+)", line)
    if not match:
        process.kill()
        _, err = process.communicate(timeout=10)
        pytest.fail(f"the bot did not start: {line!r}\n{err[-3000:]}")
    bot = RunningBot(url=match.group(1), process=process, config=config)
    yield bot
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, bot.stderr = process.communicate(timeout=20)


def audit_rows(config: Path) -> list[str]:
    store = Store.open(load_settings(config, {}).database_url)
    try:
        return [e.subcommand for e in store.audit_entries()]
    finally:
        store.close()


def test_signed_help_is_acked_within_3s_and_lists_every_subcommand(
    http_bot: RunningBot, slack_stub: SlackStub
) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url("help"))
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
    assert result.status == 200
    assert result.seconds < 3
    reply = slack_stub.wait_for_responses(1)[0]
    assert reply["response_type"] == "ephemeral"
    for name in build_registry().names():
        assert f"/upgrade {name}" in reply["text"]
    assert audit_rows(http_bot.config) == ["help"]


def test_a_wrong_signature_gets_401_and_runs_nothing(http_bot: RunningBot, slack_stub: SlackStub) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, "not-the-signing-secret"))
    assert result.status == 401
    assert slack_stub.responses == []
    assert audit_rows(http_bot.config) == []


def test_a_request_signed_six_minutes_ago_gets_401_and_runs_nothing(
    http_bot: RunningBot, slack_stub: SlackStub
) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    stale = int(time.time()) - 6 * 60
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET, timestamp=stale))
    assert result.status == 401
    assert slack_stub.responses == []
    assert audit_rows(http_bot.config) == []


def test_health_and_readiness_probes_answer(http_bot: RunningBot) -> None:
    assert get(f"{http_bot.url}/healthz").status == 200
    ready = get(f"{http_bot.url}/readyz")
    assert (ready.status, ready.body.strip()) == (200, "ready")
    assert get(f"{http_bot.url}/nope").status == 404


def test_sigterm_stops_the_bot_cleanly_and_its_debug_log_holds_no_secret(
    http_bot: RunningBot, slack_stub: SlackStub
) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    assert post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
    slack_stub.wait_for_responses(1)
    http_bot.process.send_signal(signal.SIGTERM)
    _, stderr = http_bot.process.communicate(timeout=20)
    assert http_bot.process.returncode == 0
    assert "auth.test" in stderr or "listening" in stderr or "serving Slack" in stderr
    for secret in SECRETS:
        assert secret not in stderr
