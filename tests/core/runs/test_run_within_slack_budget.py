"""Acceptance for Slack's budget and failures: a run with many card edits and thread lines while
the stub fails 20% of calls (429 with Retry-After, 5xx) is delayed but loses nothing — the final
card exact, every thread line there once, nothing about 429 in Slack; a card deleted mid-run is
posted again once and linked from its thread. Real WebClient to the stub, fake clocks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.slack_budget import BudgetConfig, SlackBudget
from bot.adapters.store import Store
from bot.core.coalesce import CoalescingPoster
from bot.core.delivery import Deliveries
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import RunCards, card_context
from bot.core.runs.service import Actor, RunService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock, FakeMonotonic
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
STEPS = 8
PLAN = """\
name: long
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: UTC}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
""" + "".join(
    f"""  - id: s{i}
    title: "Step {i}"
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
"""
    for i in range(STEPS)
)


@dataclass
class World:
    service: RunService
    clock: FakeClock
    mono: FakeMonotonic
    stub: SlackStub
    edits: CoalescingPoster
    budget: SlackBudget
    store: Store
    renderer: Renderer

    def settle(self) -> None:
        """What the flusher and the timer do: pending edits out, owed lines posted."""
        for _ in range(20):
            self.mono.advance(2.0)
            self.edits.flush_due()
            self.service.catch_up_slack()
            if not self.edits.pending and not self.store.unposted_messages():
                return
        raise AssertionError("Slack never caught up")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    mono = FakeMonotonic()
    with SlackStub(clock=mono) as stub:
        store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
        store.save_plan(name="long", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
        clock = FakeClock(T0)
        budget = SlackBudget(BudgetConfig(), clock=mono, sleep=mono.sleep)
        gateway = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False), budget=budget)
        edits = CoalescingPoster(gateway, interval=2.0, clock=mono)
        deliveries = Deliveries(store=store, poster=edits, clock=clock, owner="test", immediate=gateway)
        edits.on_gone = deliveries.repost_gone
        renderer = Renderer([BUILTIN_TEMPLATES])
        service = RunService(
            store=store,
            directory=StaticDirectory(),
            clock=clock,
            cards=RunCards(deliveries=deliveries, renderer=renderer, clock=clock),
        )
        yield World(service, clock, mono, stub, edits, budget, store, renderer)
        store.close()


def drive(world: World, run_id: str, steps: range, *, flush_every: int = 1) -> None:
    for n, i in enumerate(steps):
        for epoch, who in ((1, "U0PRIMARY"), (2, "U0SHADOW")):
            world.clock.advance(timedelta(minutes=1))
            world.service.click(R.ButtonRef(run_id=run_id, step_id=f"s{i}", epoch=epoch), Actor(user_id=who))
            world.mono.advance(0.5)
        if n % flush_every == 0:
            world.edits.flush_due()


def final_card(world: World, run_id: str) -> str:
    run = world.service.load(run_id)
    return world.renderer.render("runs/card", card_context(run, world.clock())).text


def test_a_flaky_slack_delays_the_run_but_loses_nothing(world: World) -> None:
    world.stub.flaky(0.2, seed=13, retry_after=3)
    run = world.service.start("long", Actor(user_id="U0PRIMARY")).run
    drive(world, run.id, range(STEPS))
    world.settle()
    world.stub.flaky(0)
    stub = world.stub
    faults = [c for c in stub.calls if c.method.startswith(("chat.", "conversations.")) and not c.response]
    assert len(faults) >= 10  # Slack really did fail a share of the calls
    assert world.budget.stats.rate_limited > 0
    cards = [m for m in stub.posted("C0OPS") if not m["thread_ts"]]
    assert len(cards) == 1
    assert cards[0]["text"] == final_card(world, run.id)
    # Every thread line of every transition is there, once.
    keys = Counter(m["metadata"]["event_payload"]["key"] for m in stub.posted("C0OPS") if m["metadata"])
    assert keys
    assert max(keys.values()) == 1
    refs = world.store.messages(run.id)
    events = [k for k in refs if k.startswith("event:")]
    assert len(events) >= 2 * STEPS
    assert all(refs[k].ts for k in refs)
    assert {f"{run.id}/{k}" for k in events} <= set(keys)
    # Nothing about the rate limits was said in Slack.
    # (Not a bare "429": a random run id may hold those digits.)
    said = " ".join(str(m["text"]).lower() for m in stub.posted())
    for phrase in ("http 429", "ratelimited", "rate limit", "rate-limit", "retry", "not answering", "budget"):
        assert phrase not in said
    assert world.edits.dropped == 0
    # Card edits kept within the budget: one per interval per card (a retry of a refused attempt
    # is the same edit), ≤ ~50 a minute.
    made = stub.most_in_window(
        "chat.update", 2.0, where=lambda c: c.params["ts"] == cards[0]["ts"] and bool(c.response.get("ok"))
    )
    assert made == 1
    assert stub.most_in_window("chat.update", 60.0) <= 50 + BudgetConfig().burst


def test_a_deleted_card_is_posted_again_once_and_linked_from_its_thread(world: World) -> None:
    run = world.service.start("long", Actor(user_id="U0PRIMARY")).run
    drive(world, run.id, range(3))
    world.settle()
    first = world.store.messages(run.id)["card"]
    world.stub.delete_message(first.channel, first.ts)
    drive(world, run.id, range(3, STEPS))
    world.settle()
    stub = world.stub
    cards = [m for m in stub.posted("C0OPS") if not m["thread_ts"]]
    assert len(cards) == 1  # the first one is gone; one new card, not one per edit
    card = world.store.messages(run.id)["card"]
    assert card.ts == cards[0]["ts"] != first.ts
    assert cards[0]["text"] == final_card(world, run.id)
    links = [m for m in stub.posted("C0OPS") if "posted again" in m["text"]]
    assert len(links) == 1
    assert links[0]["thread_ts"] == first.ts
    assert f"/archives/C0OPS/p{card.ts.replace('.', '')}" in links[0]["text"]
    # The thread goes on where it began: the later steps' lines are in the first card's thread.
    last_lines = [m for m in stub.posted("C0OPS") if m["thread_ts"] and f"s{STEPS - 1}" in str(m["text"])]
    assert last_lines
    assert all(m["thread_ts"] == first.ts for m in last_lines)
    assert world.edits.gone == 1
    assert len([c for c in stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]) == 2


def test_a_card_deleted_twice_is_posted_again_each_time_and_the_thread_stays(world: World) -> None:
    run = world.service.start("long", Actor(user_id="U0PRIMARY")).run
    first = world.store.messages(run.id)["card"]
    for steps in (range(2), range(2, 4)):
        world.settle()
        card = world.store.messages(run.id)["card"]
        world.stub.delete_message(card.channel, card.ts)
        drive(world, run.id, steps)
    world.settle()
    cards = [m for m in world.stub.posted("C0OPS") if not m["thread_ts"]]
    assert len(cards) == 1
    assert cards[0]["text"] == final_card(world, run.id)
    links = [m for m in world.stub.posted("C0OPS") if "posted again" in m["text"]]
    assert len(links) == 2
    assert {m["thread_ts"] for m in links} == {first.ts}


def test_a_repost_cut_off_by_a_crash_is_not_posted_twice(world: World) -> None:
    run = world.service.start("long", Actor(user_id="U0PRIMARY")).run
    world.settle()
    card = world.store.messages(run.id)["card"]
    world.stub.delete_message(card.channel, card.ts)
    # A process posted the card again and died before re-pointing the reference to it.
    crashed = world.service.cards
    assert crashed is not None
    crashed.deliveries.post_once(run.id, f"card:repost:{card.ts}", card.channel, "the card, again")
    assert world.store.messages(run.id)["card"].ts == card.ts
    drive(world, run.id, range(2))
    world.settle()
    cards = [m for m in world.stub.posted("C0OPS") if not m["thread_ts"]]
    assert len(cards) == 1
    assert world.store.messages(run.id)["card"].ts == cards[0]["ts"]
    assert cards[0]["text"] == final_card(world, run.id)
    assert len([m for m in world.stub.posted("C0OPS") if "posted again" in m["text"]]) == 1
