"""What the drain's question says when a node will not empty, on the sim through the kube adapter:
a delete takes a workload's last Ready pods past a budget at 0 — said before anyone picks it; and
pods stuck Terminating on a NotReady node (KI008), which neither waiting nor deleting moves — said,
with the stall line naming KI008, and a force-delete (grace 0) offered that empties the node."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.jobs.base import Decision
from bot.core.jobs.drain import DrainJob
from bot.core.rules import read_rules
from bot.records import ClusterConfig
from bot.resources import BUILTIN_RULES
from bot.sim import SimCluster
from tests.support.jobs import JobDriver

LABELS = ("eks.amazonaws.com/nodegroup",)


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("small", speed=20.0, seed=1)


@pytest.fixture
def api(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sim_kubeconfig(sim)), persist_config=False)


@pytest.fixture
def cluster(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    adapter = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim), context="sim"))
    yield adapter
    adapter.close()


def until(predicate: Callable[[], object], what: str, timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_delete_choice_says_it_goes_past_a_budget_and_takes_a_workloads_last_ready_pods(
    api: client.ApiClient, cluster: Cluster
) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    node = next(n.metadata.name for n in core.list_node().items if n.metadata.labels.get("role") == "workers")
    labels = {"app": "solo"}
    apps.create_namespaced_deployment(
        "shop",
        {
            "metadata": {"name": "solo", "labels": labels},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node},
                        "containers": [{"name": "app", "image": "nginx:1.25.3"}],
                        "volumes": [{"name": "scratch", "emptyDir": {}}],
                    },
                },
            },
        },
    )
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "shop",
        {"metadata": {"name": "solo"}, "spec": {"minAvailable": "100%", "selector": {"matchLabels": labels}}},
    )
    until(
        lambda: (
            (getattr(apps.read_namespaced_deployment("solo", "shop").status, "ready_replicas", 0) or 0) == 2
        ),
        "solo's two pods Ready",
    )
    driver = JobDriver(DrainJob(LABELS), cluster, {"node": node, "timeout": "1m"})
    driver.run(until=lambda d: d.choice is not None, timeout=60)
    choice = driver.choice
    assert choice is not None
    assert choice.question.endswith(
        ":warning: Deleting them would go past PodDisruptionBudget shop/solo (0 disruptions allowed now; 2 of its "
        "pods here); would leave Deployment shop/solo with no Ready pod: its 2 Ready pod(s) are all on this node."
    )
    assert [o.id for o in choice.options] == ["wait", "delete", "skip"]


def test_pods_stuck_terminating_on_a_dead_node_are_said_and_can_be_force_deleted(
    sim: SimCluster, api: client.ApiClient, cluster: Cluster
) -> None:
    core = client.CoreV1Api(api)
    db = until(lambda: core.read_namespaced_pod("db-0", "shop").spec.node_name, "db-0 placed")
    sim.control.inject_fault({"type": "node_not_ready", "node": db})
    # The node controller deletes its pods after their 300 s toleration; its kubelet never ends them.
    sim.control.advance(400)
    until(lambda: core.read_namespaced_pod("db-0", "shop").metadata.deletion_timestamp, "db-0 Terminating")
    stuck = core.read_namespaced_pod("db-0", "shop").metadata.uid
    rules = read_rules(BUILTIN_RULES, label="shipped")
    clock = [datetime.now(UTC)]
    driver = JobDriver(DrainJob(LABELS, rules), cluster, {"node": db, "timeout": "1m"}, now=lambda: clock[0])
    for _ in range(3):
        driver.tick()
    clock[0] += timedelta(minutes=2)  # the drain's timeout passes: people are asked
    driver.run(until=lambda d: d.choice is not None, timeout=60)
    choice = driver.choice
    assert choice is not None
    assert f":rotating_light: Node {db} is NotReady (NotReady since " in choice.question
    assert "Terminating and cannot finish without its kubelet (" in choice.question
    assert "shop/db-0" in choice.question
    assert "(known issue KI008)" in choice.question
    # Deleting again would do nothing for pods already Terminating: not offered; force is.
    assert [o.id for o in choice.options] == ["wait", "force", "skip"]
    force = choice.options[1]
    assert force.label.startswith("Force-delete ")
    assert force.label.endswith(" Terminating pod(s)")
    assert (force.roles, force.needs_reason) == (("coordinator",), True)
    stalled = next(t for k, t in driver.posts.items() if k.startswith("drain-stalled:"))
    assert "KI008" in stalled
    driver.tick(Decision(choice_key=choice.key, option="force", by="U0COORD", reason="the node is gone"))
    driver.run(timeout=60)
    assert driver.done
    drained = driver.posts[f"drained:{db}"]
    assert "force-deleted (grace 0)" in drained
    assert any(a == "delete-pod" and "force-deleted (grace 0)" in text for a, text in driver.audit)
    again = until(lambda: _pod_or_none(core, "db-0"), "db-0 recreated", timeout=60)
    assert again.metadata.uid != stuck


def _pod_or_none(core: client.CoreV1Api, name: str) -> client.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, "shop")
    except client.ApiException:
        return None
