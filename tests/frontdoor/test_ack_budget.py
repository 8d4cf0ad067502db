"""Slow work never delays an ack: listeners ack and enqueue, the bot's own pool does the work."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from bot.core.command import Args, CommandContext, Registry, Reply
from commands import build_registry
from tests.support.front import Front
from tests.support.signing import slash_command_body
from tests.support.testbed import wait_until


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
        result = front.command(text, response_url=stub.response_url(f"r{i}"), trigger_id=f"trig-{i}")
        assert result.status == 200
        return result.seconds

    try:
        with ThreadPoolExecutor(max_workers=10) as pool:
            slow_acks = list(pool.map(lambda i: send(i, "slow"), range(10)))
        # All ten are now working (the pool has room); none has answered yet. (The stub's own
        # `wait_for` looks again only when Slack is called, which the commands do not do now.)
        wait_until(lambda: len(started) == 10, timeout=10, what="ten slow commands started", interval=0.01)
        assert stub.responses == []
        eleventh = send(10, "help")
        assert max(slow_acks) < 3
        assert eleventh < 3
        # The eleventh's work is not queued behind the slow ones either.
        replies = stub.wait_for_responses(1, timeout=5)
        assert len(replies) == 1
        assert "/upgrade help" in replies[0]["text"]
    finally:
        release.set()
    stub.wait_for_responses(11, timeout=15)


def test_a_retried_delivery_runs_the_command_once(make_front: Callable[..., Front]) -> None:
    front = make_front()
    stub = front.stub
    body = slash_command_body("help", response_url=stub.response_url(), trigger_id="same-trigger")
    first = front.send(body)
    second = front.send(body, {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"})
    assert (first.status, second.status) == (200, 200)
    front.workers.shutdown(wait=True)  # every job that was enqueued has now finished
    assert len(stub.responses) == 1
    assert [e.subcommand for e in front.services.store.audit_entries()] == ["help"]


def test_a_stale_button_is_refused_and_audited(make_front: Callable[..., Front]) -> None:
    front = make_front()
    stub = front.stub
    click = front.click("U0SHADOW", "run-1:step-2", action="approve", response_url=stub.response_url("btn"))
    assert click.status == 200
    reply = stub.wait_for_responses(1)[0]
    assert "not active" in reply["text"]
    (entry,) = front.services.store.audit_entries()
    assert (entry.kind, entry.user_id, entry.outcome) == ("action", "U0SHADOW", "refused")
