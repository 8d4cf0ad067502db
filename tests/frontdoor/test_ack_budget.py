"""Slow work never delays an ack: listeners ack and enqueue, the bot's own pool does the work."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from bot.core.command import Args, CommandContext, Registry, Reply
from commands import build_registry
from tests.frontdoor.conftest import Front
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import post, signed_headers, slash_command_body


def registry_with_slow_command(release: threading.Event, started: list[str]) -> Registry:
    registry = build_registry()

    def slow(ctx: CommandContext, args: Args) -> Reply:
        """A command whose work lasts until the test releases it (a minute at most)."""
        started.append(ctx.correlation_id)
        release.wait(60)
        return Reply(template="whoami", context={"user_id": ctx.user_id, "roles": []})

    registry.add("slow", slow)
    return registry


def test_ten_slow_commands_do_not_delay_the_ack_of_an_eleventh(make_front: Callable[..., Front]) -> None:
    release = threading.Event()
    started: list[str] = []
    front = make_front(registry_with_slow_command(release, started), workers=12)
    stub = front.stub

    def send(i: int, text: str) -> float:
        body = slash_command_body(text, response_url=stub.response_url(f"r{i}"), trigger_id=f"trig-{i}")
        result = post(f"{front.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
        assert result.status == 200
        return result.seconds

    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            slow_acks = list(pool.map(lambda i: send(i, "slow"), range(10)))
        # All ten are now working (the pool has room); none has answered yet.
        stub.wait_for(lambda: len(started) == 10)
        assert stub.responses == []
        eleventh = send(10, "help")
        assert max(slow_acks) < 3
        assert eleventh < 3
        # The eleventh's work is not queued behind the slow ones either.
        replies = stub.wait_for_responses(1, timeout=5)
        assert len(replies) == 1 and "/upgrade help" in replies[0]["text"]
    finally:
        release.set()
    stub.wait_for_responses(11, timeout=15)


def test_a_retried_delivery_runs_the_command_once(make_front: Callable[..., Front]) -> None:
    front = make_front()
    stub = front.stub
    body = slash_command_body("help", response_url=stub.response_url(), trigger_id="same-trigger")
    first = post(f"{front.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
    headers = signed_headers(body, SIGNING_SECRET) | {
        "X-Slack-Retry-Num": "1",
        "X-Slack-Retry-Reason": "timeout",
    }
    second = post(f"{front.url}/slack/events", body, headers)
    assert (first.status, second.status) == (200, 200)
    front.workers.shutdown(wait=True)  # every job that was enqueued has now finished
    assert len(stub.responses) == 1
    assert [e.subcommand for e in front.services.store.audit_entries()] == ["help"]


def test_a_stale_button_is_refused_and_audited(make_front: Callable[..., Front]) -> None:
    import json
    import urllib.parse

    front = make_front()
    stub = front.stub
    payload = {
        "type": "block_actions",
        "trigger_id": "btn-1",
        "user": {"id": "U0SHADOW"},
        "channel": {"id": "C0OPS"},
        "team": {"id": "T0TEAM"},
        "api_app_id": "A0STUB",
        "response_url": stub.response_url("btn"),
        "actions": [{"action_id": "approve", "value": "run-1:step-2", "type": "button", "action_ts": "1.2"}],
    }
    body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
    assert post(f"{front.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
    reply = stub.wait_for_responses(1)[0]
    assert "not active" in reply["text"]
    (entry,) = front.services.store.audit_entries()
    assert (entry.kind, entry.user_id, entry.outcome) == ("action", "U0SHADOW", "refused")
