"""The AKS and GKE scenarios' nodes are shaped as their clouds make them — an agent pool's
`kubernetes.azure.com/agentpool` label and scale-set names, a node pool's
`cloud.google.com/gke-nodepool` label and instance-group names, each cloud's OS image and zones —
not EKS's, so what the bot reads of them (a draft's "nodes labelled …", a job's pool, a snapshot's
OS image and zone) is what a real cluster shows."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from typing import Any

from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.kube.objects import node_group
from bot.core.providers import connect
from bot.sim import SimCluster
from tests.support.azure import aks_provider
from tests.support.gcp import gke_provider

Obj = dict[str, Any]


def _nodes(sim: SimCluster) -> list[Obj]:
    with urllib.request.urlopen(f"{sim.url}/api/v1/nodes", timeout=10) as response:
        return list(json.load(response)["items"])


def _groups(nodes: list[Obj]) -> dict[str, str]:
    """Node name → its group, as the bot's default node-group labels resolve it."""
    return {
        n["metadata"]["name"]: node_group(n["metadata"]["labels"], DEFAULT_NODE_GROUP_LABELS) for n in nodes
    }


def _pooled(sim: SimCluster) -> tuple[dict[str, str], list[tuple[Obj, str, dict[str, str], str]]]:
    """The sim's node groups by node name (three apps, two batch, two system nodes, as both clouds'
    scenarios have them), and each node with its name, labels and pool; none labelled as EKS's."""
    nodes = _nodes(sim)
    groups = _groups(nodes)
    assert sorted(groups.values()) == ["apps", "apps", "apps", "batch", "batch", "system", "system"]
    for node in nodes:
        assert not [k for k in node["metadata"]["labels"] if "eks.amazonaws.com" in k], node["metadata"]
    return groups, [
        (n, n["metadata"]["name"], n["metadata"]["labels"], groups[n["metadata"]["name"]]) for n in nodes
    ]


def test_aks_nodes_carry_their_agent_pool_and_a_scale_sets_names(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    groups, pooled = _pooled(sim)
    for node, name, labels, pool in pooled:
        assert re.fullmatch(rf"aks-{pool}-\d{{8}}-vmss[0-9a-z]{{6}}", name), name
        assert (labels["kubernetes.azure.com/agentpool"], labels["agentpool"]) == (pool, pool)
        assert node["spec"]["providerID"].startswith("azure:///")
    # A pool's scale set numbers its VMs in turn, and a new one (a surge node) takes the next.
    assert sorted(n for n, g in groups.items() if g == "apps")[-1].endswith("-vmss000002")
    added = sim.core.cloud.add_node("apps")
    assert added.endswith("-vmss000003")
    assert added.rsplit("-", 1)[0] == sorted(n for n, g in groups.items() if g == "apps")[0].rsplit("-", 1)[0]


def test_gke_nodes_carry_their_node_pool_and_an_instance_groups_names(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    _, pooled = _pooled(sim)
    for node, name, labels, pool in pooled:
        assert re.fullmatch(rf"gke-shop-prod-{pool}-[0-9a-f]{{8}}-[0-9a-z]{{4}}", name), name
        assert labels["cloud.google.com/gke-nodepool"] == pool
        assert node["spec"]["providerID"].startswith("gce://")
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.29.8-gke.1031000"


def test_eks_nodes_keep_their_node_group_label_and_ec2_names(sim_factory: Callable[..., SimCluster]) -> None:
    sim = sim_factory("eks-nodegroups", speed=0.0, seed=1)
    for node in _nodes(sim):
        name, labels = node["metadata"]["name"], node["metadata"]["labels"]
        if labels.get("eks.amazonaws.com/compute-type") == "fargate":
            continue
        assert re.fullmatch(r"ip-10-0-\d+-\d+\.ap-northeast-1\.compute\.internal", name), name
        assert node_group(labels, DEFAULT_NODE_GROUP_LABELS) == labels["eks.amazonaws.com/nodegroup"]
        assert node["status"]["nodeInfo"]["osImage"] == "Amazon Linux 2"
        assert re.fullmatch(r"ap-northeast-1[abc]", labels["topology.kubernetes.io/zone"])


def _zoned(nodes: list[Obj]) -> list[tuple[str, str, str, str]]:
    """(OS image, kernel, region label, zone label) of each node."""
    return [
        (
            n["status"]["nodeInfo"]["osImage"],
            n["status"]["nodeInfo"]["kernelVersion"],
            n["metadata"]["labels"]["topology.kubernetes.io/region"],
            n["metadata"]["labels"]["topology.kubernetes.io/zone"],
        )
        for n in nodes
    ]


def test_aks_nodes_run_ubuntu_in_the_regions_numbered_zones(sim_factory: Callable[..., SimCluster]) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    zoned = _zoned(_nodes(sim))
    assert {(os, kernel, region) for os, kernel, region, _ in zoned} == {
        ("Ubuntu 22.04.4 LTS", "5.15.0-1064-azure", "westeurope")
    }
    assert {zone for *_, zone in zoned} == {"westeurope-1", "westeurope-2", "westeurope-3"}
    # ARM's agent pool names the same zones by number.
    assert connect(aks_provider(sim)).node_pool("apps")["properties"]["availabilityZones"] == ["1", "2", "3"]


def test_gke_nodes_run_container_optimized_os_in_the_regions_lettered_zones(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    zoned = _zoned(_nodes(sim))
    assert {(os, kernel, region) for os, kernel, region, _ in zoned} == {
        ("Container-Optimized OS from Google", "6.1.85+", "europe-west1")
    }
    assert {zone for *_, zone in zoned} == {"europe-west1-b", "europe-west1-c", "europe-west1-d"}
    # GKE's node pool names its zones in full.
    assert connect(gke_provider(sim)).node_pool("apps")["locations"] == [
        "europe-west1-b",
        "europe-west1-c",
        "europe-west1-d",
    ]
