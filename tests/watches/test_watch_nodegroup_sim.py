"""`--nodegroup` scopes a watch's pod view to the group's nodes, plus the pods its replacement
displaced while they are unhealthy elsewhere: on the sim, the published pod count equals the truth
read back through the API, before and after the `ng-shared` group is replaced."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bot.adapters.kube import Cluster
from bot.adapters.store import Store
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.kube.objects import classify, node_group, workload_key, workload_of
from bot.core.kube.wire import WPod
from bot.core.watches.service import subject
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import WatchHarness as Harness
from tests.support.watch_harness import published as _published
from tests.support.watch_harness import step as _step
from tests.support.watch_harness import wait as _wait

GROUP = "ng-shared"
CHANNEL = "C0WATCH"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _truth(kubeconfig: Path, displaced: set[str]) -> tuple[int, set[str]]:
    """Pods on the group's nodes, plus unhealthy pods elsewhere of workloads that had a pod there
    (`displaced` grows with what is seen on the group's nodes); and the updated set."""
    cluster = Cluster.connect(ClusterConfig(name="truth", kubeconfig=kubeconfig))
    try:
        nodes = cluster.get_json("/api/v1/nodes")["items"]
        pods = [msgspec.convert(p, WPod) for p in cluster.get_json("/api/v1/pods")["items"]]
    finally:
        cluster.close()
    names = {
        n["metadata"]["name"]
        for n in nodes
        if node_group(n["metadata"].get("labels"), DEFAULT_NODE_GROUP_LABELS) == GROUP
    }
    count = 0
    for p in pods:
        wkey = workload_key(p.metadata.namespace, *workload_of(p))
        if p.spec.node_name in names:
            displaced.add(wkey)
            count += 1
        elif wkey in displaced and classify(p) is not None:
            count += 1
    return count, displaced


def test_a_node_group_watch_counts_the_groups_pods_and_those_its_replacement_displaced(
    sim_eks: SimCluster,
    store: Store,
    slack_stub: SlackStub,
    tmp_path: Path,
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    harness = Harness(store, slack_stub, kubeconfig)
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", nodegroups=(GROUP,))
    try:
        harness.runner.scan()
        _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        before, displaced = _truth(kubeconfig, set())
        _wait(lambda: _published(store, row.id).pods == before, timeout=15)
        total = len(_published(store, row.id).nodes)
        assert {n.group for n in _published(store, row.id).nodes} == {GROUP}
        assert 0 < before < 60
        sim_eks.control.replace_node_group(GROUP, "1.25.16")
        _step(sim_eks, 60, steps=40, driver=harness.runner.drivers[row.id])
        after, _ = _truth(kubeconfig, displaced)
        with contextlib.suppress(AssertionError):
            _wait(lambda: _published(store, row.id).pods == after, timeout=15)
        summary = _published(store, row.id)
        # On a mismatch, what the watch published and the workloads the truth counted as displaced.
        assert summary.pods == after, (summary, sorted(displaced))
        assert len(summary.nodes) == total
        assert all(n.kubelet.startswith("v1.25.16") for n in summary.nodes)
    finally:
        harness.runner.shutdown()
