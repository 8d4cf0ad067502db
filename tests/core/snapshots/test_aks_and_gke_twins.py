"""A twin of a GKE cluster is served as GKE serves it: its /version names GKE's build
(`v1.29.8-gke.1031000`, as the snapshot recorded it) and its nodes carry their node pool's
`cloud.google.com/gke-nodepool` label, which its workloads are placed by. A twin of an AKS cluster
(whose /version is plain) is AKS by its nodes' agent-pool labels: its nodes are an agent pool's,
on AKS's OS image and in the region's numbered zones."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bot.adapters.kube import Cluster
from bot.core.snapshots.projection import P, take_snapshot
from bot.records import ClusterConfig
from bot.sim import SimCluster
from bot.sim.world.twin import scenario_from_snapshot


def _snapshot(sim: SimCluster, kubeconfig: Path) -> dict[str, Any]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    try:
        return take_snapshot(cluster, label="pre", taken_by="U1", now=datetime.now(UTC))
    finally:
        cluster.close()


def test_a_gke_clusters_twin_serves_gkes_build_and_its_node_pools_labels(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path], tmp_path: Path
) -> None:
    gke = sim_factory("gke-nodepools", speed=0.0, seed=1)
    snap = _snapshot(gke, sim_kubeconfig(gke))
    assert snap["version"]["gitVersion"] == "v1.29.8-gke.1031000"
    scenario = scenario_from_snapshot(snap)
    assert (scenario["cluster"]["platform"], scenario["cluster"]["version"]) == ("gke", "1.29.8-gke.1031000")
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    twin = sim_factory(path, speed=0.0, seed=1)
    with urllib.request.urlopen(f"{twin.url}/version", timeout=10) as response:
        assert json.load(response)["gitVersion"] == "v1.29.8-gke.1031000"
    twin_snap = _snapshot(twin, sim_kubeconfig(twin))
    # Its nodes by pool, as the bot's default labels find them, on GKE's build; none EKS-shaped.
    by_pool = sorted((n["group"], n["group_label"], n["kubelet"]) for n in twin_snap["nodes"])
    assert by_pool == sorted((n["group"], n["group_label"], n["kubelet"]) for n in snap["nodes"])
    assert {label for _, label, _ in by_pool} == {"cloud.google.com/gke-nodepool"}
    assert all(str(n["name"]).startswith("gke-") for n in twin_snap["nodes"])
    # Its workloads run in the pools the cluster ran them in: placed by the node pool's label.
    assert {pool for _, _, pool, _ in _placed(snap)} == {"system", "apps", "batch"}
    assert _placed(twin_snap) == _placed(snap)


def test_an_aks_clusters_twin_is_aks_by_its_nodes_agent_pool_labels(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path], tmp_path: Path
) -> None:
    aks = sim_factory("aks-nodepools", speed=0.0, seed=1)
    snap = _snapshot(aks, sim_kubeconfig(aks))
    scenario = scenario_from_snapshot(snap)
    assert (scenario["cluster"]["platform"], scenario["cluster"]["region"]) == ("aks", "westeurope")
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    twin = sim_factory(path, speed=0.0, seed=1)
    twin_snap = _snapshot(twin, sim_kubeconfig(twin))
    # Its nodes by pool, as the bot's default labels find them, each in the zone and on the OS
    # image its cluster's node had; none EKS-shaped.
    shape = ("group", "group_label", "kubelet", "zone", "os_image", "kernel")
    by_pool = sorted(tuple(n[k] for k in shape) for n in twin_snap["nodes"])
    assert by_pool == sorted(tuple(n[k] for k in shape) for n in snap["nodes"])
    assert {n["group_label"] for n in twin_snap["nodes"]} == {"kubernetes.azure.com/agentpool"}
    assert {n["zone"] for n in twin_snap["nodes"]} == {"westeurope-1", "westeurope-2", "westeurope-3"}
    assert all(str(n["name"]).startswith("aks-") for n in twin_snap["nodes"])
    assert {pool for _, _, pool, _ in _placed(snap)} == {"system", "apps", "batch"}
    assert _placed(twin_snap) == _placed(snap)


def _placed(snap: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(namespace, workload, its node's pool, phase) of every pod not on a DaemonSet."""
    pool = {str(n["name"]): str(n["group"]) for n in snap["nodes"]}
    return sorted(
        (row[P["namespace"]], row[P["workload"]], pool.get(row[P["node"]], "?"), row[P["phase"]])
        for row in snap["pods"]
        if row[P["workload_kind"]] != "DaemonSet"
    )
