"""A structured fuzzer for the front doors (issue 27): payloads generated from Slack's shapes
(`tests/support/payload_fuzz.py`) — valid, then one field dropped, retyped, truncated, oversized
or made of odd Unicode — signed and sent to the in-process HTTP door, and sent over a websocket to
the Socket Mode handler. Never a 5xx, never a traceback in the log, never "internal error" in chat.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from bot.frontdoor.assemble import assemble
from bot.frontdoor.slack import build_app
from bot.frontdoor.socket_mode import make_handler
from bot.frontdoor.workers import WorkerPool
from bot.settings import Settings
from tests.support.front import Front
from tests.support.payload_fuzz import payloads
from tests.support.secrets import APP_TOKEN, SIGNING_SECRET
from tests.support.signing import post
from tests.support.slack_stub import SlackStub
from tests.support.socket_stub import SocketModeStub

#: The stub's response URL every generated payload answers through.
RESPONSE_URL = "__RESPONSE_URL__"


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or "Traceback" in record.getMessage():
            self.records.append(record)


@pytest.fixture
def tracebacks() -> Iterator[_Tracebacks]:
    handler = _Tracebacks()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


def _with_url(payload: dict[str, Any], url: str) -> dict[str, Any]:
    # The strategies are built once, before the stub has a port: the URL is filled in here.
    text = json.dumps(payload).replace(RESPONSE_URL, url)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _body(kind: str, payload: dict[str, Any]) -> tuple[bytes, str]:
    if kind == "events_api":
        return json.dumps(payload).encode(), "application/json"
    fields = {"payload": json.dumps(payload)} if kind == "interactive" else payload
    # A lone surrogate cannot be UTF-8: sent as Slack never would, it must still get a 4xx.
    return urllib.parse.urlencode(fields, errors="surrogatepass").encode(
        "utf-8", "surrogatepass"
    ), "application/x-www-form-urlencoded"


def _no_internal_error(stub: SlackStub) -> None:
    for answer in list(stub.responses):
        text = json.dumps(answer)
        assert "internal error" not in text
        assert "Traceback" not in text


@pytest.fixture
def front(make_front: Any) -> Front:
    # One front door for all the examples (Hypothesis reuses function-scoped fixtures).
    started: Front = make_front()
    return started


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=payloads(RESPONSE_URL))
def test_generated_payloads_signed_at_the_http_door_never_get_a_5xx_or_a_traceback(
    front: Front, slack_stub: SlackStub, tracebacks: _Tracebacks, sample: tuple[str, dict[str, Any]]
) -> None:
    kind, payload = sample
    body, content_type = _body(kind, _with_url(payload, slack_stub.response_url("fuzz")))
    headers = _signed(body, content_type)
    result = post(front.events_url, body, headers)
    assert result.status < 500, (result.status, result.body[:300])
    assert "Traceback" not in result.body
    assert front.workers.idle(timeout=30)
    assert tracebacks.records == []
    _no_internal_error(slack_stub)


def _signed(body: bytes, content_type: str) -> dict[str, str]:
    import hashlib
    import hmac
    import time

    ts = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": content_type,
    }


@pytest.fixture
def socket_front(
    settings_for_stub: Settings, slack_stub: SlackStub
) -> Iterator[tuple[SocketModeStub, WorkerPool]]:
    stub = SocketModeStub().start()
    slack_stub.socket_url = stub.url
    services = assemble(settings_for_stub)
    workers = WorkerPool(4)
    handler = make_handler(build_app(services, workers, signing_secret=None, socket_mode=True), APP_TOKEN)
    handler.connect()
    stub.wait_connected(1)
    yield stub, workers
    handler.close()
    workers.shutdown(wait=True)
    services.close()
    stub.stop()


@pytest.mark.slow  # slack_sdk's socket-mode client takes about 3 s to close
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sample=payloads(RESPONSE_URL))
def test_generated_payloads_over_socket_mode_are_acked_and_never_leave_a_traceback(
    socket_front: tuple[SocketModeStub, WorkerPool],
    slack_stub: SlackStub,
    tracebacks: _Tracebacks,
    sample: tuple[str, dict[str, Any]],
) -> None:
    stub, workers = socket_front
    kind, payload = sample
    envelope = stub.send(kind, _with_url(payload, slack_stub.response_url("fuzz")))
    stub.wait_ack(envelope)
    assert workers.idle(timeout=30)
    assert tracebacks.records == []
    _no_internal_error(slack_stub)


def test_the_strategies_cover_every_kind_and_mutation() -> None:
    # A fuzzer that only ever made one kind of payload would pass without testing much.
    kinds: set[str] = set()
    types: set[str] = set()

    @settings(max_examples=300, database=None)
    @given(sample=payloads(RESPONSE_URL))
    def collect(sample: tuple[str, dict[str, Any]]) -> None:
        kinds.add(sample[0])
        kind = sample[1].get("type")
        types.add(kind if isinstance(kind, str) else "retyped")

    collect()
    assert kinds == {"interactive", "events_api", "slash_commands"}
    assert {"block_actions", "view_submission", "view_closed", "event_callback"} <= types
