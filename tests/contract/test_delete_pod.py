"""`delete-pod` against both backends with every pod of a workload not ready (issue 38): the API
server lets a Pending pod be evicted past any disruption budget (`canIgnorePDB`), so these are the
cases where the job's own rules must hold — the last pod stays in every `only=` mode, a budget at 0
keeps its pods unless the gate chose force, and without a budget the pods go through the Eviction
API, never a bare delete."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from bot.core.jobs.common import GATE
from bot.core.jobs.pods import DeletePodJob, workload_line
from bot.errors import UserError
from tests.contract.workloads import deployment, pdb
from tests.support.backends import TIMEOUT, Backend
from tests.support.jobs import CountingCluster, JobDriver, run_job, utcnow
from tests.support.testbed import wait_until

FORCE_GATE = {"option": "force", "by": ["U0PRIMARY", "U0SHADOW"], "reasons": ["U0PRIMARY: node ip-1 is gone"]}


def _stuck_web(backend: Backend, replicas: int = 3) -> dict[str, str]:
    """A Deployment `web` whose pods no node can take (they select a node group that does not
    exist): every pod Pending, none ready. name → uid."""
    client.AppsV1Api(backend.api).create_namespaced_deployment(
        backend.namespace, deployment("web", "no-such-group", replicas=replicas)
    )
    wait_until(lambda: len(_web(backend)) == replicas, timeout=TIMEOUT, what=f"{replicas} web pods")
    return _web(backend)


def _web(backend: Backend) -> dict[str, str]:
    pods = (
        client.CoreV1Api(backend.api).list_namespaced_pod(backend.namespace, label_selector="app=web").items
    )
    return {p.metadata.name: p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}


def _budget(backend: Backend, expected: int) -> None:
    """A budget that wants 2 of web's pods healthy: with none ready, it allows no disruption."""
    policy = client.PolicyV1Api(backend.api)
    policy.create_namespaced_pod_disruption_budget(backend.namespace, pdb("web", minAvailable=2))

    def settled() -> bool:
        budget = policy.read_namespaced_pod_disruption_budget("web", backend.namespace)
        status = budget.status
        return bool(
            status
            and status.observed_generation == budget.metadata.generation
            and status.expected_pods == expected
            and status.disruptions_allowed == 0
        )

    wait_until(settled, timeout=TIMEOUT, what="PDB web computed (0 allowed)")


def _writes(cluster: CountingCluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (what, _target), n in cluster.calls.items():
        counts[what] = counts.get(what, 0) + n
    return counts


def test_a_pending_pod_is_evicted_past_a_budget_at_0_by_the_api_server_itself(backend: Backend) -> None:
    # Why the job checks budgets itself: the eviction API never asks a budget about a Pending pod.
    pods = _stuck_web(backend, replicas=2)
    _budget(backend, 2)
    victim = sorted(pods)[0]
    assert backend.bot().evict(backend.namespace, victim, uid=pods[victim]) is True
    wait_until(lambda: victim not in _web(backend), timeout=TIMEOUT, what="the Pending pod evicted")


@pytest.mark.parametrize("how", ["workload", "pods"])
def test_all_pods_not_ready_and_a_budget_at_0_nothing_goes_and_the_budget_is_named(
    backend: Backend, how: str
) -> None:
    ns = backend.namespace
    pods = _stuck_web(backend)
    _budget(backend, 3)
    cluster = CountingCluster(backend.bot())
    job = DeletePodJob()
    named = {"pod": ",".join(f"{ns}/{name}" for name in sorted(pods))}
    args = {"workload": f"deployment/{ns}/web", "only": "not-ready"} if how == "workload" else named

    # only=terminating: none of them is, nothing to do.
    with pytest.raises(UserError, match=r"(is not|is) terminating now: nothing to delete"):
        job.plan(cluster, {**args, "only": "terminating"}, now=_now())

    progress = job.plan(cluster, args, now=_now())
    assert [workload_line(w) for w in progress["workloads"]] == [
        f"web: 3 pods, 3 not ready → deletes 2, keeps 1, 1 remains (maxUnavailable 25%, replicas 3 of "
        f"Deployment {ns}/web)"
    ]
    kept = [p for p in progress["pods"] if p["state"] == "kept"]
    assert [p["why"] for p in kept] == [f"the last pod of Deployment {ns}/web stays"]
    lines = job.dry_run(cluster, progress)
    assert sum(f"held by PodDisruptionBudget {ns}/web (disruptionsAllowed 0)" in line for line in lines) == 2

    driver = JobDriver(job, cluster, progress=progress).run()
    assert driver.last is not None
    assert driver.last.done
    assert not driver.last.ok  # the stuck pods are still stuck: people must know
    assert _writes(cluster) == {}  # not one eviction, not one delete
    assert _web(backend) == pods
    blocked = [text for key, text in driver.posts.items() if key.startswith("delete-pod-blocked:")]
    assert len(blocked) == 2
    assert all(f"PodDisruptionBudget {ns}/web (disruptionsAllowed 0)" in text for text in blocked)
    assert all("only the gate's force option passes a budget" in text for text in blocked)


def test_force_chosen_at_the_gate_passes_the_budget_but_never_takes_the_last_pod(backend: Backend) -> None:
    ns = backend.namespace
    pods = _stuck_web(backend)
    _budget(backend, 3)
    cluster = CountingCluster(backend.bot())
    job = DeletePodJob()
    progress = job.plan(cluster, {"workload": f"deployment/{ns}/web", "only": "not-ready"}, now=_now())
    progress[GATE] = FORCE_GATE  # what the job service writes from the gate's approvals
    (kept,) = [p["name"] for p in progress["pods"] if p["state"] == "kept"]
    assert kept == max(pods, key=lambda name: _created(backend, name))  # the newest stays

    driver = JobDriver(job, cluster, progress=progress).run()
    assert driver.last is not None
    assert driver.last.ok, driver.last
    assert _writes(cluster) == {"delete_pod": 2}
    assert kept in _web(backend)
    assert _web(backend)[kept] == pods[kept]
    forced = [detail for what, detail in driver.audit if what == "delete-pod"]
    assert len(forced) == 2
    for detail in forced:
        assert (
            f"deleted with grace period 0 (forced, past PodDisruptionBudget {ns}/web (disruptionsAllowed 0))"
            in detail
        )
        assert "force chosen at the gate by U0PRIMARY, U0SHADOW: U0PRIMARY: node ip-1 is gone" in detail


def test_without_a_budget_the_pods_go_through_the_eviction_api_and_one_remains(backend: Backend) -> None:
    ns = backend.namespace
    pods = _stuck_web(backend)
    cluster = CountingCluster(backend.bot())
    job = DeletePodJob()
    driver = run_job(job, cluster, {"workload": f"deployment/{ns}/web", "only": "not-ready"})
    assert driver.last is not None
    assert driver.last.ok, driver.last
    assert _writes(cluster) == {"evict": 2}  # the Eviction API, never a bare delete
    kept = [p["name"] for p in driver.progress["pods"] if p["state"] == "kept"]
    assert len(kept) == 1
    assert _web(backend)[kept[0]] == pods[kept[0]]
    assert sorted(d.split(" (uid ")[0] for w, d in driver.audit if w == "delete-pod") == sorted(
        f"pod {ns}/{name} (not scheduled) (Deployment {ns}/web; not ready)"
        for name in pods
        if name not in kept
    )
    # The Deployment starts its replacements: the workload is never without a pod.
    wait_until(lambda: len(_web(backend)) == 3, timeout=TIMEOUT, what="web back to 3 pods")


def _created(backend: Backend, name: str) -> Any:
    pod = client.CoreV1Api(backend.api).read_namespaced_pod(name, backend.namespace)
    return (pod.metadata.creation_timestamp, name)


def _now() -> Any:
    return utcnow()
