"""A drain's `depool` option (issue 25): each node is labelled out of the cloud load balancers
(`node.kubernetes.io/exclude-from-external-load-balancers`) before its first eviction and put back
once drained or skipped; and the "delete" choice says which pods' local data it loses.

The progress transitions on the in-memory cluster; then the same drain through the kube adapter
against the sim's `known-issues-2` (its reports-cache-0: a StatefulSet's only replica on emptyDir),
with the label read back through the official kubernetes client."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.jobs.base import Decision
from bot.core.jobs.common import DEPOOL_LABEL, DEPOOL_VALUE
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.nodes import UncordonJob
from bot.errors import UserError
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import node, pod

T0 = datetime(2026, 11, 24, 7, 0, tzinfo=UTC)
LABELS = ("eks.amazonaws.com/nodegroup",)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def web(name: str, node_name: str = "n1") -> dict[str, Any]:
    raw = pod("shop", name, owner=("ReplicaSet", "web-5d8f"), node_name=node_name)
    raw["metadata"]["labels"] = {"app": "web"}
    return raw


def labels(fake: FakeCluster, name: str) -> dict[str, str]:
    return dict(fake.nodes[name]["metadata"].get("labels") or {})


def test_depool_labels_each_node_before_its_first_eviction_and_removes_it_once_drained() -> None:
    fake = FakeCluster(nodes=[node("n1", "workers"), node("n2", "workers")], pods=[web("a"), web("b", "n2")])
    driver = JobDriver(DrainJob(LABELS), fake, {"nodegroup": "workers", "depool": "true"}, now=Clock())
    driver.tick()  # cordons both: nothing depooled yet
    assert DEPOOL_LABEL not in labels(fake, "n1")
    driver.tick()  # n1: labelled, then its pods listed (intents only)
    assert labels(fake, "n1")[DEPOOL_LABEL] == DEPOOL_VALUE
    assert DEPOOL_LABEL not in labels(fake, "n2")  # one node at a time
    assert fake.writes[-1] == ("label", f"n1 {DEPOOL_LABEL}={DEPOOL_VALUE}")
    assert driver.progress["depooled"] == ["n1"]
    driver.tick()
    first_evict = fake.writes.index(("evict", "shop/a"))
    assert fake.writes.index(("label", f"n1 {DEPOOL_LABEL}={DEPOOL_VALUE}")) < first_evict
    fake.finish("shop/a")
    driver.tick()  # n1 drained: back in the load balancers
    assert DEPOOL_LABEL not in labels(fake, "n1")
    assert driver.posts["drain-repooled:n1"] == "node n1 back in the cloud load balancers"
    assert driver.posts["drain-depooled:n1"].startswith("node n1 taken out of the cloud load balancers")
    assert ("depool", f"node n1: label {DEPOOL_LABEL}={DEPOOL_VALUE} set") in driver.audit
    assert ("repool", f"node n1: label {DEPOOL_LABEL} removed") in driver.audit
    driver.run(until=lambda d: ("evict", "shop/b") in fake.writes)
    assert labels(fake, "n2")[DEPOOL_LABEL] == DEPOOL_VALUE
    fake.finish("shop/b")
    driver.run()
    assert driver.done
    assert driver.progress["depooled"] == []
    assert not any(DEPOOL_LABEL in labels(fake, n) for n in ("n1", "n2"))


def test_a_label_set_before_the_drain_is_left_and_keep_leaves_the_bots_for_uncordon() -> None:
    theirs = node("n1", "workers")
    theirs["metadata"]["labels"][DEPOOL_LABEL] = "ops"
    fake = FakeCluster(nodes=[theirs, node("n2", "workers")], pods=[web("a"), web("b", "n2")])
    driver = JobDriver(DrainJob(LABELS), fake, {"nodegroup": "workers", "depool": "keep"}, now=Clock())
    driver.run(until=lambda d: ("evict", "shop/a") in fake.writes)
    fake.finish("shop/a")
    driver.run(until=lambda d: ("evict", "shop/b") in fake.writes)
    fake.finish("shop/b")
    driver.run()
    assert driver.done
    # Someone else's label is theirs: never written; the bot's stays with keep.
    assert labels(fake, "n1")[DEPOOL_LABEL] == "ops"
    assert not any(w == ("label", f"n1 {DEPOOL_LABEL}={DEPOOL_VALUE}") for w in fake.writes)
    assert labels(fake, "n2")[DEPOOL_LABEL] == DEPOOL_VALUE
    assert driver.progress["depooled"] == ["n2"]
    # An uncordon puts the bot's back (and leaves the other one alone).
    uncordon = JobDriver(UncordonJob(LABELS), fake, {"nodegroup": "workers"}, now=Clock())
    uncordon.run()
    assert DEPOOL_LABEL not in labels(fake, "n2")
    assert labels(fake, "n1")[DEPOOL_LABEL] == "ops"


def test_depool_wait_holds_the_evictions_while_the_load_balancers_let_go() -> None:
    clock = Clock()
    fake = FakeCluster(nodes=[node("n1", "workers")], pods=[web("a")])
    driver = JobDriver(
        DrainJob(LABELS), fake, {"node": "n1", "depool": "true", "depool_wait": "30s"}, now=clock
    )
    driver.tick()
    driver.tick()
    assert driver.posts["drain-depooled:n1"].endswith("evicting in 30 s, once they have let go of it")
    clock.now += timedelta(seconds=29)
    driver.tick()
    assert ("evict", "shop/a") not in fake.writes
    clock.now += timedelta(seconds=2)
    driver.tick()
    assert ("evict", "shop/a") in fake.writes


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"node": "n1", "depool": "maybe"}, "depool: 'maybe' is not true, false or keep"),
        ({"node": "n1", "depool_wait": "30s"}, "depool_wait: only with depool"),
        ({"node": "n1", "depool": "true", "depool_wait": "soon"}, "depool_wait:"),
    ],
)
def test_bad_depool_arguments_are_refused_with_a_short_reason(args: dict[str, str], reason: str) -> None:
    fake = FakeCluster(nodes=[node("n1", "workers")], pods=[])
    with pytest.raises(UserError, match=reason):
        DrainJob(LABELS).plan(fake, args, now=T0)


def test_the_delete_choice_names_the_pods_whose_local_data_it_loses() -> None:
    cache = pod("shop", "cache-0", owner=("StatefulSet", "cache"), node_name="n1")
    cache["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    logs = web("logs")
    logs["spec"]["volumes"] = [{"name": "host", "hostPath": {"path": "/var/log"}}]
    plain = web("plain")
    statefulset = {"metadata": {"name": "cache", "namespace": "shop"}, "spec": {"replicas": 1}}
    replicaset = {"metadata": {"name": "web-5d8f", "namespace": "shop"}, "spec": {"replicas": 3}}
    fake = FakeCluster(
        nodes=[node("n1", "workers")],
        pods=[cache, logs, plain],
        workloads={
            ("statefulset", "shop", "cache"): statefulset,
            ("replicaset", "shop", "web-5d8f"): replicaset,
        },
    )
    fake.blocked.update({"shop/logs", "shop/plain"})
    clock = Clock()
    driver = JobDriver(DrainJob(LABELS), fake, {"node": "n1", "timeout": "1m"}, now=clock)
    for _ in range(3):
        driver.tick()
    clock.now += timedelta(minutes=2)
    driver.tick()
    choice = driver.choice
    assert choice is not None
    assert choice.question.endswith(
        ":warning: Deleting loses the local data of 2 pod(s) for good: shop/cache-0 (emptyDir; the only"
        " replica), shop/logs (hostPath). Evicting loses it too; skipping the node keeps it while the"
        " node lives."
    )
    delete = next(o for o in choice.options if o.id == "delete")
    assert delete.label == "Delete the pods (loses the local data of 2)"
    assert (delete.roles, delete.needs_reason) == (("coordinator",), True)

    # Without local data the choice is as before.
    quiet = FakeCluster(nodes=[node("n1", "workers")], pods=[web("plain")])
    quiet.blocked.add("shop/plain")
    clock2 = Clock()
    other = JobDriver(DrainJob(LABELS), quiet, {"node": "n1", "timeout": "1m"}, now=clock2)
    for _ in range(3):
        other.tick()
    clock2.now += timedelta(minutes=2)
    other.tick()
    assert other.choice is not None
    assert "warning" not in other.choice.question
    assert [o.label for o in other.choice.options][1] == "Delete the pods instead of evicting"


def test_a_depooled_drain_on_the_sim_labels_through_the_api_and_warns_before_deleting_local_data(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory("known-issues-2", speed=20.0, seed=1)
    kubeconfig = sim_kubeconfig(sim)
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig), persist_config=False))
    cache = api.read_namespaced_pod("reports-cache-0", "reports")
    target = cache.spec.node_name
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=kubeconfig, context="sim"))
    try:
        job = DrainJob(LABELS)
        dry = job.dry_run(
            cluster, job.plan(cluster, {"node": target, "depool": "true"}, now=datetime.now(UTC))
        )
        assert (
            f"would label node {target} {DEPOOL_LABEL}={DEPOOL_VALUE} before evicting"
            " (out of the cloud load balancers; removed once the node is drained)"
        ) in dry
        assert f"{target}: deleting reports/reports-cache-0 instead would lose its emptyDir data" in dry
        assert DEPOOL_LABEL not in (api.read_node(target).metadata.labels or {})  # a dry run writes nothing

        driver = JobDriver(DrainJob(LABELS), cluster, {"node": target, "depool": "true", "timeout": "1m"})
        driver.run(until=lambda d: d.choice is not None, timeout=60)
        assert api.read_node(target).metadata.labels[DEPOOL_LABEL] == DEPOOL_VALUE
        choice = driver.choice
        assert choice is not None
        assert "reports/reports-cache-0 (emptyDir; the only replica)" in choice.question
        driver.tick(Decision(choice_key=choice.key, option="skip", by="U-primary"))
        driver.run(timeout=60)
        assert driver.done
        assert DEPOOL_LABEL not in (api.read_node(target).metadata.labels or {})
        assert api.read_node(target).spec.unschedulable  # skipped: still cordoned
    finally:
        cluster.close()
