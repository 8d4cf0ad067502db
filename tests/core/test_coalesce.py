"""Card edits coalesced on the trailing edge, through the real gateway to the stub: one edit per
card per interval, the last state always delivered, nothing dropped; replies batched."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.core.coalesce import CoalescingPoster, thread_lines
from tests.support.clock import FakeMonotonic
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


@pytest.fixture
def clock() -> FakeMonotonic:
    return FakeMonotonic()


@pytest.fixture
def stub(clock: FakeMonotonic) -> Iterator[SlackStub]:
    with SlackStub(clock=clock) as s:
        yield s


def edits(stub: SlackStub, clock: FakeMonotonic) -> CoalescingPoster:
    return CoalescingPoster(SlackGateway(make_web_client(BOT_TOKEN, stub.api_url)), interval=2.0, clock=clock)


def card_text(stub: SlackStub, ts: str) -> str:
    return str(next(m["text"] for m in stub.posted() if m["ts"] == ts))


def test_one_edit_per_card_per_interval_and_the_last_state_is_delivered(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    poster = edits(stub, clock)
    a = poster.post_message("C0OPS", "card a").ts
    b = poster.post_message("C0OPS", "card b").ts
    for i in range(100):
        poster.update_message("C0OPS", a, f"a {i}")
        if i % 3 == 0:
            poster.update_message("C0OPS", b, f"b {i}")
        if i % 10 == 9:
            poster.flush_due()
        clock.advance(0.25)
    poster.flush_due()
    clock.advance(2.0)
    poster.flush_due()
    assert poster.pending == 0
    assert card_text(stub, a) == "a 99"
    assert card_text(stub, b) == "b 99"
    for ts in (a, b):
        assert stub.most_in_window("chat.update", 2.0, where=lambda c, ts=ts: c.params["ts"] == ts) <= 1
    assert poster.dropped == 0
    assert poster.coalesced == 134 - poster.sent
    assert poster.sent == len(stub.calls_to("chat.update"))


@pytest.mark.slow  # slack_sdk sleeps between its retries of the 503s
def test_an_edit_slack_does_not_take_stays_pending_and_goes_out_later(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    poster = edits(stub, clock)
    ts = poster.post_message("C0OPS", "card").ts
    stub.fail_next("chat.update", status=503, times=3)  # the first try and both client retries
    poster.update_message("C0OPS", ts, "second")
    assert poster.flush_due() == 0
    assert poster.retried == 1
    assert poster.pending == 1
    poster.update_message("C0OPS", ts, "third")  # the newer body wins
    clock.advance(2.0)
    assert poster.flush_due() == 1
    assert card_text(stub, ts) == "third"


def test_an_edit_delayed_many_times_is_logged_once_then_once_when_it_goes_through(
    stub: SlackStub, clock: FakeMonotonic, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack (or the store under it) away for a minute: one warning per card, not one per retry."""
    poster = CoalescingPoster(
        SlackGateway(make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False)), interval=2.0, clock=clock
    )
    ts = poster.post_message("C0OPS", "card").ts
    stub.fail_next("chat.update", status=503, times=30)
    poster.update_message("C0OPS", ts, "live")
    with caplog.at_level(logging.DEBUG, logger="bot.core.coalesce"):
        for _ in range(31):
            poster.flush_due()
            clock.advance(2.0)
    assert poster.retried == 30
    assert card_text(stub, ts) == "live"
    ours = [r for r in caplog.records if r.name == "bot.core.coalesce"]
    warnings = [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"edit of C0OPS/{ts} delayed (retried each interval, said once): ")
    assert [r.getMessage() for r in ours if r.levelno == logging.INFO] == [
        f"edit of C0OPS/{ts} went through after 30 delayed attempt(s)"
    ]


def test_stop_flushes_what_is_pending_and_the_thread_sends_on_its_own(stub: SlackStub) -> None:
    import time

    poster = CoalescingPoster(
        SlackGateway(make_web_client(BOT_TOKEN, stub.api_url)), interval=0.2, clock=time.monotonic
    )
    ts = poster.post_message("C0OPS", "card").ts
    poster.start(tick=0.01)
    poster.update_message("C0OPS", ts, "live")
    stub.wait_for(lambda: any(c.params.get("text") == "live" for c in stub.calls_to("chat.update")))
    poster.update_message("C0OPS", ts, "one")
    poster.update_message("C0OPS", ts, "last")
    poster.stop()
    assert card_text(stub, ts) == "last"
    assert poster.pending == 0
    assert poster.dropped == 0


def test_the_slot_of_a_card_says_when_its_next_edit_may_go(stub: SlackStub, clock: FakeMonotonic) -> None:
    poster = edits(stub, clock)
    ts = poster.post_message("C0OPS", "card").ts
    assert poster.slot_in("C0OPS", ts) == float("-inf")  # never edited: now
    poster.update_message("C0OPS", ts, "one")
    assert poster.flush_due() == 1
    clock.advance(0.5)
    assert poster.slot_in("C0OPS", ts) == 1.5
    poster.update_message("C0OPS", ts, "two")
    assert poster.flush_due() == 0
    clock.advance(1.5)
    assert poster.slot_in("C0OPS", ts) == 0.0
    assert poster.flush_due() == 1


def test_the_thread_sends_an_edit_as_its_slot_opens_not_at_its_next_tick(stub: SlackStub) -> None:
    import time

    poster = CoalescingPoster(
        SlackGateway(make_web_client(BOT_TOKEN, stub.api_url)), interval=0.5, clock=time.monotonic
    )
    a = poster.post_message("C0OPS", "card a").ts
    b = poster.post_message("C0OPS", "card b").ts
    poster.start(tick=10.0)  # a tick far longer than the waits below
    try:

        def sent(text: str) -> bool:
            return any(c.params.get("text") == text for c in stub.calls_to("chat.update"))

        poster.update_message("C0OPS", a, "a1")
        stub.wait_for(lambda: sent("a1"), timeout=5)
        poster.update_message("C0OPS", a, "a2")  # waits for a's slot, half a second on
        started = time.monotonic()
        poster.update_message("C0OPS", b, "b1")  # b's slot is open: it goes now, a pending or not
        stub.wait_for(lambda: sent("b1"), timeout=5)
        assert time.monotonic() - started < 0.4
        stub.wait_for(lambda: sent("a2"), timeout=5)
        assert time.monotonic() - started < 2.0  # at a's slot, not at the thread's next tick
    finally:
        poster.stop()


def test_lines_that_piled_up_are_joined_under_a_size_bound() -> None:
    lines = [f"node ip-10-0-{i}.ec2.internal joined and Ready" for i in range(200)]
    replies = thread_lines(lines, limit=3000)
    assert all(len(r) <= 3000 for r in replies)
    assert "\n".join(replies).split("\n") == lines
    assert len(replies) < 10
