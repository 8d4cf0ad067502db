"""A watch driven for real in a test: the watch service with the real Slack client against the
Slack stub, a real store and the kube adapter pointed at a sim's kubeconfig."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.adapters.kube import Cluster
from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.checks.rules import Rule
from bot.core.delivery import Deliveries
from bot.core.duties import Duties
from bot.core.rendering import Renderer
from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS
from bot.core.watches.model import Summary
from bot.core.watches.service import WatchService
from bot.frontdoor.watching import WatchDuty, WatchSource
from bot.records import ClusterConfig
from bot.resources import BUILTIN_TEMPLATES
from bot.sim import SimCluster
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


class WatchHarness:
    def __init__(
        self,
        store: Store,
        stub: SlackStub,
        kubeconfig: Path,
        owner: str = "p1",
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rules: Sequence[Rule] = (),
    ) -> None:
        self.store = store
        self.kubeconfig = kubeconfig
        poster = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url))
        self.service = WatchService(
            store=store,
            deliveries=Deliveries(store=store, poster=poster, clock=clock, owner=owner),
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
            owner=owner,
            node_group_labels=DEFAULT_NODE_GROUP_LABELS,
            stale_after=timedelta(seconds=2),
            rules=rules,
        )
        #: The watches' lane of a duty engine of its own (leading, outside any fence).
        self.runner = Duties().add(
            WatchDuty(self.service, self.connect, publish_seconds=0.3, heartbeat_seconds=0.5)
        )

    def connect(self, name: str) -> WatchSource:
        return Cluster.connect(ClusterConfig(name=name, kubeconfig=self.kubeconfig))


def wait(predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def published(store: Store, watch_id: int) -> Summary:
    row = store.watch(watch_id)
    assert row is not None
    assert row.summary
    return Summary.from_json(row.summary)


def step(sim: SimCluster, seconds: float, *, steps: int) -> None:
    for _ in range(steps):
        sim.control.advance(seconds)
        time.sleep(0.4)
