"""Fuzzing the front doors (issue 11): whatever text or request arrives, it is answered, never
with a 5xx, an internal error or a traceback in the reply or the log.

Hypothesis generates the inputs; the example counts keep each test to seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.front import Front
from tests.support.secrets import SIGNING_SECRET

SUBCOMMANDS = [
    "help",
    "status",
    "snapshot",
    "snapshots",
    "diff",
    "plan",
    "start",
    "schedule",
    "audit",
    "announce",
    "pause",
    "resume",
    "abort",
    "skip",
    "handoff",
    "whoami",
    "unknown",
]
# Chat typography and Slack markup are what people really paste.
ODD = st.sampled_from(
    ["—", "“", "”", "‘", "’", "<@U0X|a>", "<#C1>", "&amp;", "\ud800", "\x00", "'", '"', "--", "#"]
)
WORDS = st.one_of(
    st.text(max_size=40),
    ODD,
    st.integers().map(str),
    st.sampled_from(["--limit", "--at", "--since", "--reason", "--cluster", "list", "cancel", "move"]),
)
COMMAND = st.tuples(st.sampled_from(SUBCOMMANDS), st.lists(WORDS, max_size=8)).map(
    lambda t: " ".join([t[0], *t[1]])
)


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture
def tracebacks() -> Iterator[_Tracebacks]:
    handler = _Tracebacks()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


@pytest.fixture
def services(write_config: Callable[..., Path]) -> Iterator[Services]:
    built = assemble(load_settings(write_config(), {}), with_slack=False)
    yield built
    built.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(COMMAND, st.text(max_size=200)))
@example(text="handoff shadow -- --")  # argparse's empty list for a word (found by this test)
def test_any_command_text_is_answered_without_an_internal_error(
    services: Services, tracebacks: _Tracebacks, text: str
) -> None:
    out = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", source="terminal"))
    assert out.rendered.text.strip()
    assert "internal error" not in out.rendered.text
    assert "Traceback" not in out.rendered.text
    assert tracebacks.records == []


def _status(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code)


def _sign(body: bytes, timestamp: str) -> str:
    return (
        "v0="
        + hmac.new(SIGNING_SECRET.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    )


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
PAYLOAD = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.sampled_from(["block_actions", "view_submission", "shortcut"]), JSONISH),
        "actions": st.one_of(
            JSONISH,
            st.lists(
                st.fixed_dictionaries(
                    {"action_id": st.sampled_from(["gate_approve", "gate_reject", "x"]), "value": JSONISH}
                ),
                max_size=2,
            ),
        ),
        "view": JSONISH,
        "user": st.one_of(JSONISH, st.fixed_dictionaries({"id": JSONISH})),
        "channel": JSONISH,
        "response_url": JSONISH,
    },
)
BODY = st.one_of(
    st.binary(max_size=300),
    PAYLOAD.map(lambda p: urllib.parse.urlencode({"payload": json.dumps(p)}).encode()),
    JSONISH.map(lambda j: json.dumps(j).encode()),
    st.dictionaries(
        st.sampled_from(["command", "text", "user_id", "channel_id", "response_url", "trigger_id"]),
        st.text(max_size=30),
    ).map(lambda d: urllib.parse.urlencode(d).encode()),
)
TIMESTAMP = st.one_of(
    st.just("now"), st.text(max_size=12), st.integers(min_value=-10, max_value=10**12).map(str)
)


@pytest.fixture
def front(make_front: Callable[..., Front]) -> Front:
    # One front door for all the examples of a test (Hypothesis reuses function-scoped fixtures).
    return make_front()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=BODY,
    timestamp=TIMESTAMP,
    signed=st.booleans(),
    content_type=st.sampled_from(["application/x-www-form-urlencoded", "application/json", "text/plain", ""]),
)
def test_any_http_request_gets_a_non_5xx_answer_and_no_traceback(
    front: Front,
    tracebacks: _Tracebacks,
    body: bytes,
    timestamp: str,
    signed: bool,
    content_type: str,
) -> None:
    ts = str(int(time.time())) if timestamp == "now" else timestamp
    headers = {"Content-Type": content_type} if content_type else {}
    if ts.isascii() and "\n" not in ts and "\r" not in ts:
        headers["X-Slack-Request-Timestamp"] = ts
        headers["X-Slack-Signature"] = _sign(body, ts) if signed else "v0=" + "0" * 64
    assert _status(f"{front.url}/slack/events", body, headers) < 500
    assert front.workers.idle(timeout=30)
    assert tracebacks.records == []
