"""`upgrade-bot run --http`, started as a real process, answering really signed requests."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.frontdoor.http import MAX_BODY
from bot.settings import load_settings
from commands import build_registry
from tests.support.bot_process import BotProcess
from tests.support.malformed import MALFORMED
from tests.support.secrets import SECRETS, SIGNING_SECRET
from tests.support.signing import get, post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub


@pytest.fixture
def http_bot(
    write_config: Callable[..., Path], bot_env: dict[str, str], slack_stub: SlackStub
) -> Iterator[BotProcess]:
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub, log_level="DEBUG")
    bot.start()
    yield bot
    bot.stop()


def audit_rows(config: Path) -> list[str]:
    store = Store.open(load_settings(config, {}).database_url)
    try:
        return [e.subcommand for e in store.audit_entries()]
    finally:
        store.close()


def test_signed_help_is_acked_within_3s_and_lists_every_subcommand(
    http_bot: BotProcess, slack_stub: SlackStub
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


def test_a_wrong_signature_gets_401_and_runs_nothing(http_bot: BotProcess, slack_stub: SlackStub) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, "not-the-signing-secret"))
    assert result.status == 401
    assert slack_stub.responses == []
    assert audit_rows(http_bot.config) == []


def test_a_request_signed_six_minutes_ago_gets_401_and_runs_nothing(
    http_bot: BotProcess, slack_stub: SlackStub
) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    stale = int(time.time()) - 6 * 60
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET, timestamp=stale))
    assert result.status == 401
    assert slack_stub.responses == []
    assert audit_rows(http_bot.config) == []


def test_slack_s_certificate_check_is_answered_200_and_runs_nothing(
    http_bot: BotProcess, slack_stub: SlackStub
) -> None:
    # Sent when a slash command's request URL is saved; Bolt's own middleware answers it.
    body = b"ssl_check=1&token=legacy-verification-token"
    for headers in (
        signed_headers(body, SIGNING_SECRET),
        {"Content-Type": "application/x-www-form-urlencoded"},
    ):
        result = post(f"{http_bot.url}/slack/events", body, headers)
        assert result.status == 200
        assert result.body == ""
    assert slack_stub.responses == []
    assert audit_rows(http_bot.config) == []
    # A slash command that says ssl_check=1 is still a command, signed or refused as one.
    command = slash_command_body("help", response_url=slack_stub.response_url()) + b"&ssl_check=1"
    assert (
        post(
            f"{http_bot.url}/slack/events", command, {"Content-Type": "application/x-www-form-urlencoded"}
        ).status
        == 401
    )


def test_health_and_readiness_probes_answer(http_bot: BotProcess) -> None:
    assert get(f"{http_bot.url}/healthz").status == 200
    ready = get(f"{http_bot.url}/readyz")
    assert ready.status == 200
    assert {"database ok", "slack ok", "leader yes epoch 1"} <= set(ready.body.splitlines())
    assert get(f"{http_bot.url}/nope").status == 404


def test_sigterm_stops_the_bot_cleanly_and_its_debug_log_holds_no_secret(
    http_bot: BotProcess, slack_stub: SlackStub
) -> None:
    body = slash_command_body("help", response_url=slack_stub.response_url())
    assert post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
    slack_stub.wait_for_responses(1)
    stderr = http_bot.stop()
    assert http_bot.process is not None
    assert http_bot.process.returncode == 0
    assert "auth.test" in stderr or "listening" in stderr or "serving Slack" in stderr
    for secret in SECRETS:
        assert secret not in stderr


def _raw(url: str, body: bytes, headers: dict[str, str], method: str = "POST") -> int:
    request = urllib.request.Request(
        url, data=body if method == "POST" else None, headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code)


def _signed(body: bytes, content_type: str = "application/x-www-form-urlencoded") -> dict[str, str]:
    # Signed over the raw bytes, as Slack does (slack_sdk's helper only signs UTF-8 bodies).
    ts = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": content_type,
    }


def _payload(document: object) -> bytes:
    return urllib.parse.urlencode({"payload": json.dumps(document)}).encode()


#: Headers are a dict, or a function that signs the body when the request is sent: Slack's window is
#: five minutes, and a long test session can take longer than that between import and this test.
HOSTILE: list[tuple[str, bytes, dict[str, str] | Callable[[], dict[str, str]], int]] = [
    ("timestamp abc", b"x=1", {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=00"}, 401),
    ("timestamp empty", b"x=1", {"X-Slack-Request-Timestamp": "", "X-Slack-Signature": "v0=00"}, 401),
    ("timestamp 1e10", b"x=1", {"X-Slack-Request-Timestamp": "1e10", "X-Slack-Signature": "v0=00"}, 401),
    ("unsigned brace", b"{", {"Content-Type": "application/json"}, 401),
    ("signed JSON that does not parse", b"{", lambda: _signed(b"{", "application/json"), 400),
    ("payload not an object", _payload([1, 2]), lambda: _signed(_payload([1, 2])), 400),
    ("invalid UTF-8", b"payload=\xff\xfe", lambda: _signed(b"payload=\xff\xfe"), 400),
    (
        "actions not a list",
        _payload({"type": "block_actions", "actions": "approve"}),
        lambda: _signed(_payload({"type": "block_actions", "actions": "approve"})),
        400,
    ),
    (
        "view as a string",
        _payload({"type": "view_submission", "view": "x"}),
        lambda: _signed(_payload({"type": "view_submission", "view": "x"})),
        400,
    ),
    (
        "state.values not a mapping",
        _payload({"type": "view_submission", "view": {"state": {"values": [1]}}}),
        lambda: _signed(_payload({"type": "view_submission", "view": {"state": {"values": [1]}}})),
        400,
    ),
    ("a body past the limit", b"x" * (MAX_BODY + 1), lambda: _signed(b"x" * (MAX_BODY + 1)), 413),
]


def test_malformed_or_unsigned_requests_get_4xx_one_log_line_each_and_no_traceback(
    http_bot: BotProcess,
) -> None:
    for name, body, headers, expected in HOSTILE:
        sent = headers() if callable(headers) else headers
        assert _raw(f"{http_bot.url}/slack/events", body, sent) == expected, name
    assert _raw(f"{http_bot.url}/slack/events", b"", {}, method="GET") == 405
    # 200 unsigned "{" requests write 200 short lines, not 538 KB of tracebacks.
    for _ in range(200):
        assert _raw(f"{http_bot.url}/slack/events", b"{", {"Content-Type": "application/json"}) == 401
    stderr = http_bot.stop()
    assert "Traceback" not in stderr
    refusals = [line for line in stderr.splitlines() if "refused a request" in line]
    assert len(refusals) == len(HOSTILE) + 1 + 200
    assert len(stderr) < 200_000


def test_signed_but_malformed_interactions_and_events_get_400_and_no_traceback(
    http_bot: BotProcess, slack_stub: SlackStub
) -> None:
    for name, body, kind in MALFORMED:
        content_type = "application/json" if kind == "json" else "application/x-www-form-urlencoded"
        result = post(f"{http_bot.url}/slack/events", body, _signed(body, content_type))
        assert result.status == 400, (name, result.status, result.body[:200])
        assert "Traceback" not in result.body
    # The bot still answers the next command normally.
    body = slash_command_body("help", response_url=slack_stub.response_url("help"))
    assert post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
    assert "/upgrade help" in slack_stub.wait_for_responses(1)[0]["text"]
    stderr = http_bot.stop()
    assert "Traceback" not in stderr
    assert len([line for line in stderr.splitlines() if "not a shape Slack sends" in line]) == len(MALFORMED)


def test_a_signed_command_that_mentions_payload_is_answered_as_a_command(
    http_bot: BotProcess, slack_stub: SlackStub
) -> None:
    # Bolt reads any form with the word "payload" in it as an interaction; the door hands it the
    # same command in a form it reads as one.
    body = slash_command_body("plan load payload-fix", response_url=slack_stub.response_url("load"))
    assert b"payload-fix" in body
    result = post(f"{http_bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
    assert result.status == 200, result.body[:200]
    reply = slack_stub.wait_for_responses(1)[0]["text"]
    assert "payload-fix" in reply, reply
    assert "internal error" not in reply
    # Tampered with after signing, it is still refused; a form with the word and neither a payload
    # nor a command is still not a shape Slack sends.
    tampered = body.replace(b"payload-fix", b"payload-fiz")
    assert _raw(f"{http_bot.url}/slack/events", tampered, signed_headers(body, SIGNING_SECRET)) == 401
    neither = b"text=payload-fix"
    assert _raw(f"{http_bot.url}/slack/events", neither, _signed(neither)) == 400
    assert audit_rows(http_bot.config) == ["plan"]
    assert "Traceback" not in http_bot.stop()
