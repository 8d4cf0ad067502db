"""A watch driven for real in a test: the watch service with the real Slack client against the
Slack stub, a real store and the kube adapter pointed at a sim's kubeconfig."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.adapters.kube import Cluster
from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.delivery import Deliveries
from bot.core.duties import Duties
from bot.core.rendering import Renderer
from bot.core.rules import Rule
from bot.core.watches.service import WatchService
from bot.core.watches.summary import Summary
from bot.frontdoor.watching import Stream, WatchDriver, WatchDuty, WatchSource
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
            WatchDuty(self.service, self.connect, publish_seconds=0.05, heartbeat_seconds=0.5)
        )

    def connect(self, name: str) -> WatchSource:
        return Cluster.connect(ClusterConfig(name=name, kubeconfig=self.kubeconfig))


def wait(predicate: Callable[[], Any], timeout: float = 30.0, *, what: str = "", every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" if what else "timed out")


def published(store: Store, watch_id: int) -> Summary:
    row = store.watch(watch_id)
    assert row is not None
    assert row.summary
    return Summary.from_json(row.summary)


#: The sim's storage key of each kind a watch streams (`bot.core.watches.schema.KINDS`).
SIM_KINDS = {
    "node": "nodes",
    "pod": "pods",
    "deployment": "deployments.apps",
    "daemonset": "daemonsets.apps",
    "statefulset": "statefulsets.apps",
    "event": "events",
}


def sim_versions(sim: SimCluster) -> dict[str, int]:
    """Per watched kind, the resourceVersion of its latest change in the sim that the watch's
    stream is sent (Warning events only, as the stream selects)."""
    store = sim.control.store
    with store.lock:
        versions = {kind: store.bucket(key).last_rv for kind, key in SIM_KINDS.items() if kind != "event"}
        warnings = [e.rv for e in store.entries("events") if e.field("type") == "Warning"]
    versions["event"] = max(warnings, default=0)
    return versions


def read_up_to(streams: Sequence[Stream], versions: Mapping[str, int]) -> bool:
    """Has each kind's stream queued its events up to `versions` (`sim_versions`)?"""
    by_kind = {s.kind: s for s in streams}
    return by_kind.keys() == versions.keys() and all(
        int(by_kind[k].resource_version or 0) >= v for k, v in versions.items()
    )


def settle(sim: SimCluster, driver: WatchDriver, *, timeout: float = 30.0) -> None:
    """Wait until the watch has what the sim holds now, and has published it: each stream at or past
    its kind's latest version, the driver's queue drained, then a publish begun after that."""
    versions = sim_versions(sim)
    wait(
        lambda: read_up_to(driver.streams, versions) and driver.events.empty(),
        timeout,
        what=f"the watch to read the sim up to {versions}",
        every=0.01,
    )
    published = driver.published
    wait(lambda: driver.published > published, timeout, what="a publish of what it read", every=0.01)


def step(sim: SimCluster, seconds: float, *, steps: int, driver: WatchDriver | None) -> None:
    """Advance the sim's clock `steps` times by `seconds`; after each, wait until `driver` has read
    and published what changed (`settle`), as a watch keeps up with a cluster (no fixed sleep).
    `driver=None`: the watch cannot read the sim now (its streams cut), only time moves."""
    for _ in range(steps):
        sim.control.advance(seconds)
        if driver is not None:
            settle(sim, driver)
