"""A twin keeps its pods' restart counts (issue 42: "restart counts, readiness and the known-issue
states"): the snapshot's pod rows say how often each pod restarted; the twin's scenario carries them
per workload and node (`restarts:`), the settled build writes them on the pods' first container, and
a snapshot of the twin shows the same counts, pod for pod, as `sim fidelity` compares them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kube import Cluster
from bot.core.snapshots.fidelity import compare_snapshots
from bot.core.snapshots.projection import P, take_snapshot
from bot.records import ClusterConfig
from bot.sim import SimCluster
from bot.sim.world.scenario import Scenario, ScenarioError
from bot.sim.world.twin import scenario_from_snapshot

SOURCE = """\
name: restarted
description: two groups, two Deployments and their pods.
cluster: {version: "1.29.4", platform: eks, lease_renew_seconds: 0, warmup: 0s}
generate: {node_groups: 2, nodes: 4, pods: 12, namespaces: 1, deployments: 2, daemonsets: [], pod_bytes: 0}
"""


def _snapshot(sim: SimCluster, kubeconfig: Path, label: str) -> dict[str, Any]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    try:
        return take_snapshot(cluster, label=label, taken_by="U1", now=datetime.now(UTC))
    finally:
        cluster.close()


def test_the_twin_restarts_each_pod_as_often_as_the_snapshot_saw(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path], tmp_path: Path
) -> None:
    source = tmp_path / "restarted.yaml"
    source.write_text(SOURCE, encoding="utf-8")
    sim = sim_factory(source, speed=0.0, seed=1)
    snap = _snapshot(sim, sim_kubeconfig(sim), "pre")
    # The cluster as a real one is: some pods restarted (an OOM last week, a node's reboot).
    rows = [list(row) for row in snap["pods"]]
    assert len(rows) == 12
    for i, row in enumerate(rows):
        row[P["restarts"]] = (0, 3, 0, 17)[i % 4]
    snap["pods"] = [tuple(row) for row in rows]

    scenario = scenario_from_snapshot(snap)
    assert scenario["restarts"]  # per workload, per node, in turn
    assert sum(sum(c) for nodes in scenario["restarts"].values() for c in nodes.values()) == 3 * (3 + 17)
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    twin = sim_factory(path, speed=0.0, seed=1)
    twin_snap = _snapshot(twin, sim_kubeconfig(twin), "twin")

    assert sorted(r[P["restarts"]] for r in twin_snap["pods"]) == sorted(
        r[P["restarts"]] for r in snap["pods"]
    )
    assert [line for line in compare_snapshots(snap, twin_snap) if line.startswith("pod ")] == []


def test_restarts_that_are_not_a_map_of_nodes_is_a_scenario_error() -> None:
    data = yaml.safe_load(SOURCE)
    data["restarts"] = {"Deployment/ns/web": [1, 2]}
    with pytest.raises(ScenarioError, match="restarts"):
        Scenario.from_dict(data)
