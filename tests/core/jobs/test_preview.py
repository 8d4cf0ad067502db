"""A gate's dry run (bot/core/jobs/preview.py) and its message: what a drain, a cordon and a
restart will touch, read without writing anything, and bounded for Slack however large the group."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from bot.core.jobs import preview
from bot.core.jobs.registry import default_jobs
from bot.records import ActionCall
from tests.support.blockkit import MAX_BLOCKS, MAX_SECTION, buttons, text_of
from tests.support.gates import gate_blocks
from tests.support.jobs import FakeCluster
from tests.support.kube_objects import node, pod

NOW = datetime(2026, 11, 28, 14, 2, 11, tzinfo=UTC)
JOBS = default_jobs(("eks.amazonaws.com/nodegroup",))
LONG = "x" * 40


def labelled(p: dict[str, Any], **labels: str) -> dict[str, Any]:
    p["metadata"]["labels"] = labels
    return p


def budget(namespace: str, name: str, allowed: int, **match: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"selector": {"matchLabels": match}},
        "status": {"disruptionsAllowed": allowed},
    }


def big_group(nodes: int = 200, pods: int = 30) -> FakeCluster:
    """A node group of `nodes` nodes with long names, `pods` pods each (one DaemonSet pod, one with
    emptyDir), and a budget at 0 in every namespace."""
    all_nodes = [node(f"ip-10-0-{i // 250}-{i % 250}.{LONG}.compute.internal", "big") for i in range(nodes)]
    all_pods: list[dict[str, Any]] = []
    pdbs: dict[str, list[dict[str, Any]]] = {}
    for i, n in enumerate(all_nodes):
        name = n["metadata"]["name"]
        for j in range(pods):
            ns = f"team-{j % 10}-{LONG}"
            owner = ("DaemonSet", "node-exporter") if j == 0 else ("ReplicaSet", f"app-{j}")
            p = labelled(pod(ns, f"app-{j}-{i}-{LONG}", owner=owner, node_name=name), app=f"app-{j}")
            if j == 1:
                p["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
            all_pods.append(p)
    for k in range(10):
        ns = f"team-{k}-{LONG}"
        pdbs[ns] = [budget(ns, f"strict-{m}-{LONG}", 0, app=f"app-{m}") for m in range(k, 30, 10)]
    return FakeCluster(nodes=all_nodes, pods=all_pods, pdbs=pdbs)


def test_a_drain_of_200_nodes_keeps_a_small_dry_run_and_a_message_within_slacks_limits() -> None:
    fake = big_group()
    calls = [ActionCall(name="drain", args={"nodegroup": "big"})]
    read = preview.read(fake, calls, JOBS, now=NOW)
    assert fake.writes == []  # read only: not even a server-side dry run
    (drain,) = read["actions"]
    assert drain["node_count"] == 200
    assert drain["cordon_count"] == 200
    assert drain["evict_count"] == 200 * 28  # 30 pods a node, less the DaemonSet and the emptyDir one
    assert drain["stay_count"] == 200
    assert drain["refused_count"] == 200
    assert drain["blocking_count"] == 28  # not the budgets of the DaemonSet and the refused pods
    assert len(drain["nodes"]) == preview.NODES
    assert all(len(n["pods"]) == preview.PODS for n in drain["nodes"])
    assert len(drain["blocking"]) == preview.BUDGETS
    assert len(drain["refused"]) == preview.REFUSED
    assert len(json.dumps(read)) < 10_000  # the kept row stays small too

    blocks, text = gate_blocks(read)
    assert len(blocks) <= MAX_BLOCKS
    longest = max(len(b["text"]["text"]) for b in blocks if b["type"] == "section")
    assert longest <= MAX_SECTION
    shown = text_of(blocks)
    assert "…and 192 more node(s)" in shown
    assert "…and 23 more budget(s)" in shown
    assert "…and 195 more pod(s)" in shown
    assert "cordon 200 of 200 node(s), evict 5600 pod(s)" in shown
    assert f"<!date^{int(NOW.timestamp())}^{{time_secs}}|23:02:11 Asia/Tokyo>" in shown
    assert "+25 more" in shown  # pods of a node beyond the three named
    assert "Dry run at 23:02:11 Asia/Tokyo" not in text  # the text keeps the date token too
    (reject,) = [b for b in buttons(blocks) if b["action_id"] == "gate_reject"]
    assert reject["confirm"]["style"] == "danger"


def test_cordon_names_the_nodes_already_cordoned_and_restart_lists_its_workloads() -> None:
    fake = FakeCluster(
        nodes=[node("n1", "g"), node("n2", "g", unschedulable=True)],
        workloads={
            ("deployment", "shop", "web"): {"metadata": {"name": "web", "namespace": "shop"}},
            ("deployment", "shop", "api"): {"metadata": {"name": "api", "namespace": "shop"}},
        },
    )
    calls = [
        ActionCall(name="cordon", args={"nodegroup": "g"}),
        ActionCall(name="restart", args={"namespace": "shop"}),
        ActionCall(name="cordon", args={"dry_run": "true", "nodegroup": "g"}),
    ]
    assert [c.name for c in preview.changes_cluster(calls)] == ["cordon", "restart"]
    read = preview.read(fake, preview.changes_cluster(calls), JOBS, now=NOW)
    cordon, restart = read["actions"]
    assert (cordon["change_count"], cordon["node_count"]) == (1, 2)
    assert cordon["nodes"] == [{"name": "n1", "already": False}, {"name": "n2", "already": True}]
    assert restart["workloads"] == ["deployment/shop/api", "deployment/shop/web"]
    assert fake.writes == []


def test_a_selection_the_job_would_refuse_is_said_on_the_gate() -> None:
    fake = FakeCluster(nodes=[node("n1", "g")])
    read = preview.read(fake, [ActionCall(name="drain", args={"nodegroup": "nope"})], JOBS, now=NOW)
    (drain,) = read["actions"]
    assert drain["error"] == "node group 'nope' has no nodes"
    _, text = gate_blocks(read)
    assert "*drain* `nodegroup=nope`: node group 'nope' has no nodes" in text
