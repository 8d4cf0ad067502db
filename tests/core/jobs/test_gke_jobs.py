"""The GKE actions (issue 46), ticked against the sim: the real kube adapter on its API server and
google-cloud-container's real client (its REST transport) on the sim's GKE facade, with the sim's
clock stepped by the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.jobs import preview
from bot.core.jobs.base import Decision, Job
from bot.core.jobs.gke import GkeUpdateNodepoolJob, check_nodepool
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.trail import make_trail
from bot.core.providers import ProviderAccess
from bot.core.rendering import inert_naming
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig
from bot.sim import SimCluster
from tests.support.budgets import hold_a_pod
from tests.support.gcp import gke_calls, gke_provider
from tests.support.jobs import JobDriver

#: The bot's own default node-group labels: the sim's nodes carry their cloud's pool label.
LABELS = DEFAULT_NODE_GROUP_LABELS
TARGET = "1.30.4-gke.1348000"
OLD = "1.29.8-gke.1031000"


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    # The master first: a node pool may not be newer than it.
    world = sim.core.providers["gke"]
    with world.lock:
        world.update_master(TARGET)
    sim.control.advance(700)
    return sim


@pytest.fixture
def kube(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=sim_kubeconfig(sim), context="sim"))
    yield cluster
    cluster.close()


def driver(job: Job, kube: Cluster, sim: SimCluster, args: dict[str, str]) -> JobDriver:
    def now() -> datetime:
        return datetime.fromtimestamp(sim.core.clock.now(), UTC)

    progress = job.plan(kube, args, now=now())
    progress["trail"] = make_trail(run_id="R1", step_id="s", job_id=7, approved_by=["U1", "U2"])
    return JobDriver(job, kube, now=now, progress=progress)


def until_choice_or_end(d: JobDriver, sim: SimCluster, *, step: float = 30.0, limit: int = 200) -> None:
    for _ in range(limit):
        d.tick()
        if d.done or d.choice is not None:
            return
        sim.control.advance(step)
    raise AssertionError(f"the job did not end: {d.last}")


def test_a_person_asks_at_the_soak_and_the_rollback_is_called_once_through_a_crash(
    sim: SimCluster, kube: Cluster
) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "apps", "version": TARGET})
    # The pool's own settings: blue-green with an hour's soak, shown at the gate.
    assert (d.progress["strategy"], d.progress["soak"]) == ("blue-green", 3600.0)
    gate = job.dry_run(kube, d.progress)
    assert gate[0] == (
        f"would call UpdateNodePool (PUT …/clusters/shop-prod/nodePools/apps) with nodeVersion={TARGET}, "
        "upgradeSettings strategy=BLUE_GREEN nodePoolSoakDuration=1h"
    )
    assert gate[1].startswith("blue-green (the pool's own): GKE creates a green pool of 3 node(s)")
    until_choice_or_end(d, sim)
    soak = d.choice
    assert soak is not None
    assert soak.key == f"soak:{TARGET}:0"
    assert "the soak's evidence holds: 3 green node(s) Ready" in soak.question
    assert [(o.id, o.needs_reason) for o in soak.options] == [("keep", False), ("rollback", True)]
    d.tick(Decision(choice_key=soak.key, option="rollback", by="U0SHADOW", reason="p99 latency up on green"))
    assert d.progress["rollback"]["by"] == "U0SHADOW"
    d.tick()  # the rollback's intent
    assert gke_calls(sim).get("RollbackNodePoolUpgrade", 0) == 0
    # The process dies after GKE accepted the rollback but before the tick was stored: the tick
    # runs again, finds the rollback's operation running and follows it — never a second call.
    d.tick(crash=True)
    again = d.tick()
    assert "made before the interruption reached GKE" in again.card[0]
    until_choice_or_end(d, sim)
    assert gke_calls(sim)["RollbackNodePoolUpgrade"] == 1
    assert gke_calls(sim)["UpdateNodePool"] == 1
    assert d.last is not None
    assert not d.last.ok
    assert d.last.detail.startswith(
        f"node pool apps {OLD} → {TARGET}: rolled back (RollbackNodePoolUpgrade, asked by U0SHADOW): the pool is "
        f"on {OLD} again"
    )
    assert sim.core.providers["gke"].pool("apps")["version"] == OLD
    # The thread's last line names who asked as a mention, as the line of the ask did.
    (done,) = [p for p in d.last.posts if p.key == "rollback-done:apps"]
    assert "asked by <@U0SHADOW>)" in inert_naming(done.text, done.people)


def test_surge_settings_from_the_plan_are_sent_and_shown_and_bad_ones_refused(
    sim: SimCluster, kube: Cluster
) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "batch", "max_surge": "3", "max_unavailable": "1"})
    assert d.progress["target"] == TARGET  # the master's version when none is given
    gate = job.dry_run(kube, d.progress)
    assert gate[1].startswith("surge (set by the plan): max_surge 3, max_unavailable 1")
    until_choice_or_end(d, sim)
    assert d.last is not None
    assert d.last.ok, d.last.detail
    assert sim.core.providers["gke"].pools["batch"] == {"surge": {"max_surge": 3, "max_unavailable": 1}}
    assert gke_calls(sim)["UpdateNodePool"] == 1
    with pytest.raises(UserError, match="strategy: 'canary' is not one of surge, blue-green"):
        check_nodepool({"nodepool": "apps", "strategy": "canary"})
    with pytest.raises(UserError, match="max_surge: '33%' is not a node count"):
        check_nodepool({"nodepool": "apps", "max_surge": "33%"})


def soak_phase(sim: SimCluster) -> str:
    world = sim.core.providers["gke"]
    with world.lock:
        info = world.pool("apps").get("updateInfo") or {}
    return str((info.get("blueGreenInfo") or {}).get("phase") or "")


def test_the_soak_waits_for_the_pods_drained_onto_the_green_pool_before_it_asks(
    sim: SimCluster, kube: Cluster
) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "apps", "version": TARGET})
    d.tick()  # the intent
    d.tick()  # the call
    # The last web pod evicted off the blue pool is still starting on the green one when GKE
    # begins the soak: read at that moment, the evidence fails — for a moment.
    for _ in range(2000):
        if soak_phase(sim) == "NODE_POOL_SOAKING":
            break
        sim.control.advance(0.25)
    else:
        raise AssertionError("the blue-green upgrade never reached its soak")
    settling = d.tick()
    assert settling.choice is None
    assert settling.card[0].endswith(": the green pool soaks for 1h (the blue one is kept until then)")
    assert settling.card[1].startswith(
        "the soak's evidence does not hold yet: 1 pod(s) not Ready on the pool: shop/web-"
    )
    assert settling.card[2].startswith("the green pool settles: read again every 10 s")
    assert all(len(line) <= 200 for line in settling.card)
    assert not [key for key in d.posts if key.startswith("soak:")]
    sim.control.advance(10)
    asked = d.tick()
    assert asked.choice is not None
    assert "the soak's evidence holds: 3 green node(s) Ready" in asked.choice.question
    assert [key for key in d.posts if key.startswith("soak:")] == [f"soak:apps:{TARGET}"]


def test_a_soak_whose_evidence_keeps_failing_asks_with_it_once_the_green_pool_had_its_time(
    sim: SimCluster, kube: Cluster
) -> None:
    # Every web pod started from now on never gets Ready: the green pool's copies fail their probe.
    sim.control.inject_fault(
        {
            "type": "not_ready",
            "match": {"namespace": "shop", "name_prefix": "web-"},
            "never_ready": "HTTP probe failed with statuscode: 503",
        }
    )
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "apps", "version": TARGET, "soak": "10m"})
    until_choice_or_end(d, sim)
    soak = d.choice
    assert soak is not None
    assert "the soak's evidence fails: 3 pod(s) not Ready on the pool: shop/web-" in soak.question
    # It was read again for a quarter of the 10 m soak before people were asked with it.
    settling = [t for t in d.ticks if len(t.card) > 1 and "does not hold yet" in t.card[1]]
    assert "people are asked when it holds, or at " in settling[0].card[2]
    assert len(settling) >= 150 / 30
    assert d.progress["evidence"][0].startswith("3 pod(s) not Ready on the pool: shop/web-")


def test_a_soak_ended_while_nobody_followed_it_says_nobody_was_asked(sim: SimCluster, kube: Cluster) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "apps", "version": TARGET})
    d.tick()  # the intent
    d.tick()  # the call
    # The bot is down for two hours: GKE soaks the green pool and deletes the blue one meanwhile.
    sim.control.advance(7200)
    until_choice_or_end(d, sim)
    assert d.last is not None
    assert d.last.ok, d.last.detail
    assert d.choice is None
    assert d.last.detail.endswith(
        "3/3 node(s) Ready on 1.30.4-gke.1348000; its soak ended before the job read it (GKE deleted the blue pool), "
        "so nobody was asked to keep it or roll back"
    )


def test_the_nodepool_gate_names_the_budgets_that_hold_its_pods_and_what_gke_does_with_them(
    sim: SimCluster, kube: Cluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "apps", "version": TARGET})
    assert not [line for line in job.dry_run(kube, d.progress) if "disruption budgets" in line]
    budget, pod = hold_a_pod(sim_kubeconfig(sim), {n["metadata"]["name"] for n in job._nodes(kube, "apps")})
    (line,) = [line for line in job.dry_run(kube, d.progress) if "disruption budgets" in line]
    # GKE's gate said nothing, and GKE evicted the pods past their budget an hour a node later.
    assert line.startswith(f"disruption budgets at 0 now that hold pods on its nodes: {budget} (")
    assert pod in line
    assert line.endswith(
        " — GKE respects a budget for up to an hour a node, then evicts the pods anyway: free them first if "
        "they must not go down"
    )


def test_an_operation_gke_no_longer_keeps_is_judged_by_the_pool_itself(
    sim: SimCluster, kube: Cluster
) -> None:
    """A bot paused for days comes back to an operation GKE has forgotten (NOT_FOUND): the job ended
    with GKE's refusal although the pool was upgraded. It reads the pool's version instead."""
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "batch"})
    for _ in range(3):
        d.tick()
        if d.progress.get("operation"):
            break
    operation = d.progress["operation"]
    assert operation
    world = sim.core.providers["gke"]
    for _ in range(200):  # the update runs its course while nobody follows it
        sim.control.advance(30)
        with world.lock:
            if world.ops[operation].op.state != "InProgress":
                break
    with world.lock:
        del world.ops[operation]  # and GKE no longer keeps its record
    until_choice_or_end(d, sim)
    assert d.last is not None
    assert d.last.ok, d.last.detail
    assert f"GKE operation {operation}" in d.last.detail


def test_a_node_pool_gke_does_not_know_is_said_with_the_clusters_pools_at_the_gate_and_the_step(
    sim: SimCluster, kube: Cluster
) -> None:
    said = "nodepool: node pool btch does not exist in shop-prod (its pools: apps, batch, system); did you mean batch?"
    access = ProviderAccess({"prod": gke_provider(sim)}, kind="gke")
    now = datetime.fromtimestamp(sim.core.clock.now(), UTC)
    # The gate's dry run, before anyone approves: the action's own line says it, not GKE's NOT_FOUND.
    call = ActionCall(name="gke-update-nodepool", args={"nodepool": "btch", "version": TARGET})
    gate = preview.read(kube, [call], default_jobs(LABELS, gke=access), now=now)
    assert gate["actions"][0]["error"] == said
    # The step: its job ends with the same reason (the service ends a job on a UserError).
    job = GkeUpdateNodepoolJob(access, LABELS)
    with pytest.raises(UserError) as refused:
        job.plan(kube, {"nodepool": "btch"}, now=now)
    assert refused.value.user_message == said
    # A pool removed after the job planned: its tick says so too.
    d = driver(job, kube, sim, {"nodepool": "batch"})
    d.progress["nodepool"] = "btch"
    d.tick()  # the call's intent
    with pytest.raises(UserError) as gone:
        d.tick()
    assert gone.value.user_message == said
    assert gke_calls(sim).get("UpdateNodePool", 0) == 0


def test_the_gate_says_an_exclusion_in_force_and_its_end_as_the_posts_say_times(
    sim: SimCluster, kube: Cluster
) -> None:
    job = GkeUpdateNodepoolJob(ProviderAccess({"prod": gke_provider(sim)}, kind="gke"), LABELS)
    d = driver(job, kube, sim, {"nodepool": "batch"})
    # The step began inside the scenario's holiday freeze (2026-12-20 … 2027-01-04).
    d.progress["started"] = "2026-12-22T14:00:00Z"
    # It said "until 2027-01-04T00:00:00Z", GKE's raw ISO.
    assert job.dry_run(kube, d.progress)[-1] == (
        ":warning: maintenance exclusion holiday-freeze (NO_UPGRADES) is in force until 2027-01-04 00:00 UTC: the "
        "team's freeze — GKE lets a manual upgrade through it, the check's GKE002 does not"
    )
