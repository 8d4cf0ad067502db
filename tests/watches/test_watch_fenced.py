"""Watches are a leader duty: a driver runs in the fence of the job that started it, stops quietly
when that fence goes stale (writing nothing more), stops when the replica follows, and records its
events for `/metrics`. Real SQLite store, the sim's API through the kube adapter, the Slack stub."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store, fencing
from bot.core.announcements.service import AnnouncementService
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.coalesce import CoalescingPoster
from bot.core.delivery import Deliveries
from bot.core.duties import Duties, Lane
from bot.core.leadership import Leadership
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs.service import RunService
from bot.core.watches.service import WatchService, subject
from bot.core.watches.spec import Target
from bot.errors import Fenced
from bot.frontdoor.metrics import Metrics
from bot.frontdoor.triggers import Triggers
from bot.frontdoor.watching import WatchDuty, WatchSource
from bot.records import ClusterConfig, Fence
from bot.sim import SimCluster
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import wait

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
CHANNEL = "C0FENCE"
LEASE = timedelta(seconds=60)
TARGET = Target(nodegroups=("ng-shared",), kubelet_version="1.25.16", settle=timedelta(hours=2))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _runner(
    store: Store, stub: SlackStub, kubeconfig: Path, leadership: Leadership | None = None, **options: Any
) -> Lane:
    poster = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url))
    clock = lambda: datetime.now(UTC)  # noqa: E731
    service = WatchService(
        store=store,
        deliveries=Deliveries(store=store, poster=poster, clock=clock, owner="a"),
        renderer=Renderer([TEMPLATES]),
        clock=clock,
        owner="a",
        node_group_labels=DEFAULT_NODE_GROUP_LABELS,
        stale_after=timedelta(seconds=2),
    )

    def connect(name: str) -> WatchSource:
        return Cluster.connect(ClusterConfig(name=name, kubeconfig=kubeconfig))

    engine = Duties(leadership=leadership)
    return engine.add(WatchDuty(service, connect, publish_seconds=0.3, heartbeat_seconds=0.3, **options))


def service(lane: Lane) -> WatchService:
    assert isinstance(lane.kind, WatchDuty)
    return lane.kind.service


def _lead(store: Store, holder: str, *, force: bool = False) -> Fence:
    lease = store.acquire_lease(holder, epoch=store.lease().epoch, duration=LEASE, force=force)
    assert lease.held_by(holder)
    return Fence(holder=holder, epoch=lease.epoch)


def test_a_fenced_watch_driver_writes_nothing_more_and_stops_quietly(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runner = _runner(store, slack_stub, sim_eks.write_kubeconfig(tmp_path / "kubeconfig"))
    fence = _lead(store, "a")
    fenced: list[Fenced] = []
    row = service(runner).start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", target=TARGET)
    try:
        with fencing(fence, fenced.append):  # as the triggers' scan job runs it
            assert runner.scan() == [row.id]
        wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        driver = runner.drivers[row.id]
        assert driver.alive
        # Another replica takes the lease over (this one's renewals stalled): epoch + 1.
        _lead(store, "b", force=True)
        caplog.clear()
        driver.thread.join(timeout=10)
        assert not driver.alive
        assert fenced, "the stale fence was reported (the elector steps down)"
        after = store.watch(row.id)
        posts = len(slack_stub.calls_to("chat.postMessage")) + len(slack_stub.calls_to("chat.update"))
        sim_eks.control.run_upgrade()
        for _ in range(5):
            sim_eks.control.advance(60)
            time.sleep(0.3)
        assert store.watch(row.id) == after, "a deposed driver wrote to the store"
        assert len(slack_stub.calls_to("chat.postMessage")) + len(slack_stub.calls_to("chat.update")) == posts
        assert not [r for r in caplog.records if r.exc_info], "no traceback for a fenced watch"
    finally:
        runner.shutdown()


def test_follow_stops_the_runners_drivers_and_no_scan_starts_one(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    clock = lambda: datetime.now(UTC)  # noqa: E731
    # The standing first, then the engine and the triggers that read it (as `assemble` builds them).
    leadership = Leadership(replica="a", check_fence=store.check_fence)
    runner = _runner(store, slack_stub, sim_eks.write_kubeconfig(tmp_path / "kubeconfig"), leadership)
    triggers = Triggers(
        announcements=AnnouncementService(store=store, clock=clock),
        runs=RunService(store=store, directory=StaticDirectory(), clock=clock),
        duties=runner.engine,
        leadership=leadership,
    )
    row = service(runner).start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", target=TARGET)
    try:
        triggers.lead(_lead(store, "a"))
        with triggers.duty() as ok:
            assert ok
            assert runner.scan() == [row.id]
        driver = runner.drivers[row.id]
        wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        started = time.monotonic()
        triggers.follow()
        assert not driver.alive
        assert time.monotonic() - started < 5
        assert runner.drivers == {}
        assert runner.scan() == []  # a follower starts none
    finally:
        runner.shutdown()
        triggers.shutdown()


def test_watch_events_and_card_edits_appear_in_metrics(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    runner = _runner(store, slack_stub, sim_eks.write_kubeconfig(tmp_path / "kubeconfig"), telemetry=metrics)
    row = service(runner).start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", target=TARGET)
    caplog.set_level(logging.INFO)
    try:
        assert runner.scan() == [row.id]
        wait(lambda: _sample(metrics, "upgrade_bot_watch_events_total") > 0)
    finally:
        runner.shutdown()
    # Card edits through the coalescer: two edits of one card before a flush are one sent, one
    # coalesced.
    edits = CoalescingPoster(
        SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)), interval=0, clock=time.monotonic
    )
    edits.on_outcome = metrics.card_update
    posted = edits.post_message(CHANNEL, "card", dedup_key="metrics-card")
    edits.update_message(CHANNEL, posted.ts, "card, edited")
    edits.update_message(CHANNEL, posted.ts, "card, edited again")
    assert edits.flush_due() == 1
    assert _sample(metrics, 'upgrade_bot_card_updates_total{outcome="sent"}') == 1
    assert _sample(metrics, 'upgrade_bot_card_updates_total{outcome="coalesced"}') == 1


def _sample(metrics: Metrics, name: str) -> float:
    text = metrics.exposition().decode()
    return float(next(x for x in text.splitlines() if x.startswith(name + " ")).split()[1])
