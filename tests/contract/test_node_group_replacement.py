"""The bot's snapshot and diff across a node-group replacement played by the cloud pipeline.

New nodes of the new kubelet version join, the old are cordoned and drained through the eviction
API (the API enforces the PDB) and removed; the scheduler and controllers reschedule the pods.
The diff calls that expected, and a new node left cordoned a regression.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from bot.adapters.kube import Cluster
from bot.core.snapshots.diff import diff
from bot.core.snapshots.projection import take_snapshot
from tests.contract.workloads import pdb, pod_names, ready_replicas, start_web
from tests.support.backends import TIMEOUT, Backend
from tests.support.node_groups import replace_node_group
from tests.support.testbed import wait_until


def _snapshot(bot: Cluster, label: str) -> dict[str, Any]:
    return take_snapshot(bot, label=label, taken_by="contract", now=datetime.now(UTC))


def _pods_on(backend: Backend, nodes: list[str]) -> bool:
    pods = client.CoreV1Api(backend.api).list_namespaced_pod(backend.namespace, label_selector="app=web")
    return all(p.spec.node_name in nodes for p in pods.items) and len(pod_names(backend)) == 2


def test_snapshot_and_diff_of_a_node_group_replacement(backend: Backend) -> None:
    ns = backend.namespace
    group = f"ng-{uuid.uuid4().hex[:4]}"
    old = backend.add_nodes(group, 2, version="v1.29.4")
    start_web(backend, group)
    client.PolicyV1Api(backend.api).create_namespaced_pod_disruption_budget(ns, pdb("web", maxUnavailable=1))
    bot = backend.bot()
    pre = _snapshot(bot, "pre")
    assert pre["gaps"] == []  # on the real cluster: the bot's least-privilege role reads it all

    new = replace_node_group(
        backend.api,
        old,
        add_nodes=lambda n: backend.add_nodes(group, n, version="v1.30.2"),
        remove_node=backend.remove_node,
    )
    wait_until(
        lambda: ready_replicas(backend, "web") == 2 and _pods_on(backend, new),
        timeout=TIMEOUT,
        what="web ready on the new nodes",
    )
    report = diff(pre, _snapshot(bot, "post"))

    mine = [f for f in report.regressions if group in f.subject + f.detail or f.namespace == ns]
    assert mine == []
    by_category = {f.category: f.detail for f in report.expected if f.subject == f"node group {group}"}
    assert by_category["nodes replaced"].startswith("2 old nodes replaced by 2 new")
    kubelet = by_category["kubelet version"]
    assert kubelet.startswith("v1.29.4")
    assert "→ v1.30.2" in kubelet
    moved = [f.detail for f in report.expected if f.category == "pods rescheduled" and f.namespace == ns]
    assert moved
    assert moved[0].startswith("2 pods of 1 workload on new nodes")

    # The pipeline "forgets" to uncordon a new node: the diff calls that a regression.
    bot.cordon(new[0])
    broken = diff(pre, _snapshot(bot, "post"))
    found = [
        (f.category, f.subject)
        for f in broken.regressions
        if group in f.subject + f.detail or f.namespace == ns or f.subject == f"node {new[0]}"
    ]
    assert found == [("node cordoned", f"node {new[0]}")]
