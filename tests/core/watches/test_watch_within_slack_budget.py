"""Issue 13's Slack acceptance for a watch: while the stub fails about 20% of `chat.update` and
`chat.postMessage` calls (429 with Retry-After, 503), a watch through a node-group replacement with
crash loops and a known issue is delayed but loses nothing — every milestone posted exactly once,
the card ending in the last state, nothing about the failures said in Slack, and the budget's
limits kept. The real WebClient against the Slack stub, the real store, the watch service and the
shipped rules; the cluster's events are folded directly (time passed in, fake clocks)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.slack_budget import BudgetConfig, SlackBudget
from bot.adapters.store import Store
from bot.core.coalesce import CoalescingPoster
from bot.core.delivery import Deliveries
from bot.core.rendering import Renderer
from bot.core.rules import load_rules
from bot.core.watches.model import WatchState
from bot.core.watches.service import WatchService, subject
from bot.core.watches.verdict import verdict
from bot.records import WatchRow
from bot.resources import BUILTIN_RULES, BUILTIN_TEMPLATES
from tests.support.clock import FakeClock, FakeMonotonic
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.watch_objects import GROUP_LABEL, crashing, node, pod

T0 = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)
CHANNEL = "C0OPS"
OLD = [f"old-{i}" for i in range(6)]
NEW = [f"new-{i}" for i in range(6)]


@dataclass
class World:
    service: WatchService
    clock: FakeClock
    mono: FakeMonotonic
    stub: SlackStub
    edits: CoalescingPoster
    budget: SlackBudget
    store: Store
    row: WatchRow
    state: WatchState

    def publish(self, *, force: bool = False) -> None:
        """What the driver does every 2 s: publish (Slack's refusals are logged, the posts stay
        owed), and the coalescer's flusher sends the due card edit."""
        assert not self.service.publish(self.row, self.state, force=force).lost
        self.mono.advance(2.0)
        self.edits.flush_due()

    def settle(self) -> None:
        for _ in range(40):
            self.clock.advance(timedelta(seconds=2))
            self.publish(force=True)
            if not self.edits.pending and not self.store.unposted_messages():
                return
        raise AssertionError("Slack never caught up")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    mono = FakeMonotonic()
    with SlackStub(clock=mono) as stub:
        store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
        clock = FakeClock(T0)
        budget = SlackBudget(BudgetConfig(), clock=mono, sleep=mono.sleep)
        gateway = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False), budget=budget)
        edits = CoalescingPoster(gateway, interval=2.0, clock=mono)
        deliveries = Deliveries(store=store, poster=edits, clock=clock, owner="test", immediate=gateway)
        edits.on_gone = deliveries.repost_gone
        service = WatchService(
            store=store,
            deliveries=deliveries,
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
            owner="test",
            node_group_labels=(GROUP_LABEL,),
            rules=load_rules([BUILTIN_RULES]),
        )
        row = service.start(cluster="prod", channel=CHANNEL, started_by="U0ALICE")
        assert service.claim(row)  # what the runner's scan does: this process drives it
        state = WatchState(service.spec(row), rules=service.rules)
        yield World(service, clock, mono, stub, edits, budget, store, row, state)
        store.close()


def kube_proxy(name: str, node_name: str, *, pulling: bool) -> dict[str, Any]:
    raw = pod(
        name,
        "kube-system",
        daemonset="kube-proxy",
        node_name=node_name,
        ready=not pulling,
        waiting="ImagePullBackOff" if pulling else None,
    )
    raw["status"]["containerStatuses"][0]["name"] = "kube-proxy"
    return raw


def replace_group(world: World) -> None:
    """A node group replaced one node at a time, with crash loops and kube-proxy failing to pull."""
    s, now = world.state, world.clock
    s.sync("node", [node(n, kubelet="v1.29.4") for n in OLD], now())
    s.sync("pod", [pod(f"web-{i}", deployment="web", node_name=n) for i, n in enumerate(OLD)], now())
    for kind in ("deployment", "daemonset", "statefulset", "event"):
        s.sync(kind, [], now())
    world.publish()
    for i, (old, new) in enumerate(zip(OLD, NEW, strict=True)):
        now.advance(timedelta(seconds=20))
        s.apply("node", "ADDED", node(new, kubelet="v1.30.2", ready=False), now())
        world.publish()
        now.advance(timedelta(seconds=20))
        s.apply("node", "MODIFIED", node(new, kubelet="v1.30.2"), now())
        s.apply("pod", "ADDED", kube_proxy(f"kube-proxy-{i}", new, pulling=i == 2), now())
        world.publish()
        s.apply("node", "MODIFIED", node(old, kubelet="v1.29.4", cordoned=True), now())
        world.publish()
        now.advance(timedelta(seconds=20))
        if i % 2:
            s.apply(
                "pod", "ADDED", crashing(f"api{i}-5d8f7c9b6-a", deployment=f"api{i}", node_name=new), now()
            )
        s.apply("node", "DELETED", node(old, kubelet="v1.29.4", cordoned=True), now())
        world.publish()


def test_a_flaky_slack_delays_a_watch_but_loses_nothing(world: World) -> None:
    world.stub.flaky(0.2, seed=7, retry_after=3, methods={"chat.update", "chat.postMessage"})
    replace_group(world)
    world.settle()
    world.stub.flaky(0)
    world.settle()
    stub = world.stub
    faults = [c for c in stub.calls if c.method.startswith("chat.") and not c.response]
    assert len(faults) >= 5, len(faults)  # Slack really did fail a share of the calls
    assert world.budget.stats.rate_limited > 0
    cards = [m for m in stub.posted(CHANNEL) if not m["thread_ts"]]
    assert len(cards) == 1
    # The card ends in the last state: what the service renders for the stored summary now.
    summary = world.service.previous(world.store.watch(world.row.id) or world.row)
    assert summary is not None
    spec = world.service.spec(world.row)
    context = world.service.card_context(summary, spec, verdict(summary, spec, summary.at), "", summary.at)
    assert cards[0]["text"] == world.service.renderer.render("watch_card", context).text
    assert "6/6" in cards[0]["text"]
    # Every milestone stored is posted, each exactly once (by its dedup key in the message metadata).
    posted = Counter(m["metadata"]["event_payload"]["key"] for m in stub.posted(CHANNEL) if m["metadata"])
    assert max(posted.values()) == 1
    refs = world.store.messages(subject(world.row.id))
    assert all(r.ts for r in refs.values()), [k for k, r in refs.items() if not r.ts]
    thread = [m["text"] for m in stub.posted(CHANNEL) if m["thread_ts"] == cards[0]["ts"]]
    lines = [line for text in thread if not text.startswith(":mag:") for line in text.splitlines()]
    assert sorted(line for line in lines if "joined and is Ready" in line) == sorted(
        line for line in set(lines) if "joined and is Ready" in line
    )
    assert sum("joined and is Ready" in line for line in lines) == len(NEW)
    assert sum("drained and removed" in line for line in lines) == len(OLD)
    assert sum("cordoned" in line for line in lines) == len(OLD)
    assert sum("entered CrashLoopBackOff" in line for line in lines) == 3
    assert [t.splitlines()[1] for t in thread if t.startswith(":mag:")] == [
        "DaemonSet `kube-system/kube-proxy` (1 pod) — seen: kube-proxy waiting: ImagePullBackOff"
    ]
    # Nothing about the failures was said in Slack.
    said = " ".join(str(m["text"]).lower() for m in stub.posted())
    for phrase in ("http 429", "ratelimited", "rate limit", "rate-limit", "retry", "not answering", "budget"):
        assert phrase not in said
    assert world.edits.dropped == 0
    # The budget: at most one card edit per 2 s interval, ≤ ~50 edits a minute, ≤ ~1 post a second.
    made = stub.most_in_window(
        "chat.update", 2.0, where=lambda c: c.params["ts"] == cards[0]["ts"] and bool(c.response.get("ok"))
    )
    assert made == 1
    assert stub.most_in_window("chat.update", 60.0) <= 50 + BudgetConfig().burst
    assert stub.most_in_window("chat.postMessage", 1.0, where=lambda c: bool(c.response.get("ok"))) <= 1 + (
        BudgetConfig().burst
    )
