"""The AKS and GKE scenarios' nodes are shaped as their clouds make them — an agent pool's
`kubernetes.azure.com/agentpool` label and scale-set names, a node pool's
`cloud.google.com/gke-nodepool` label and instance-group names — not EKS's, so what the bot reads
of them (a draft's "nodes labelled …", a job's pool) is what a real cluster shows."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Callable
from typing import Any

from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.kube.objects import node_group
from bot.sim import SimCluster

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
