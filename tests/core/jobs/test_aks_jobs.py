"""The AKS actions (issue 46), ticked against the sim: the real kube adapter on its API server and
azure-mgmt-containerservice's real client on its ARM facade (azure-core serialises every request
and the SDK's models read every answer), with the sim's clock stepped by the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.jobs import preview
from bot.core.jobs.aks import AksUpgradeControlPlaneJob, AksUpgradeNodepoolJob
from bot.core.jobs.base import Decision, Job
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.trail import make_trail
from bot.core.providers import ProviderAccess, ProviderUnavailable
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig
from bot.sim import SimCluster
from tests.support.azure import aks_provider, aks_scenario, azure_calls
from tests.support.budgets import hold_a_pod
from tests.support.jobs import JobDriver

#: The bot's own default node-group labels: the sim's nodes carry their cloud's pool label.
LABELS = DEFAULT_NODE_GROUP_LABELS


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("aks-nodepools", speed=0.0, seed=1)


def _cluster(sim: SimCluster, kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig(sim), context="sim"))
    yield cluster
    cluster.close()


@pytest.fixture
def kube(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    yield from _cluster(sim, sim_kubeconfig)


def access(sim: SimCluster) -> ProviderAccess:
    return ProviderAccess({"prod": aks_provider(sim)}, kind="aks")


def sim_now(sim: SimCluster) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)


def driver(job: Job, kube: Cluster, sim: SimCluster, args: dict[str, str]) -> JobDriver:
    now = sim_now(sim)
    progress = job.plan(kube, args, now=now())
    progress["trail"] = make_trail(run_id="R1", step_id="s", job_id=7, approved_by=["U1", "U2"])
    return JobDriver(job, kube, now=now, progress=progress)


def follow(d: JobDriver, sim: SimCluster, *, step: float = 60.0, limit: int = 200) -> None:
    for _ in range(limit):
        d.tick()
        if d.done or d.choice is not None:
            return
        sim.control.advance(step)
    raise AssertionError(f"the job did not end: {d.last}")


def test_the_api_block_is_a_choice_of_two_people_with_an_expiry_and_the_put_is_made_once(
    sim: SimCluster, kube: Cluster
) -> None:
    d = driver(AksUpgradeControlPlaneJob(access(sim), LABELS), kube, sim, {"version": "1.26.6"})
    assert (d.progress["from"], d.progress["target"]) == ("1.25.11", "1.26.6")
    intent = d.tick()
    assert intent.progress["intent"]["call"] == "ManagedClusters_CreateOrUpdate"
    assert azure_calls(sim).get("ManagedClusters_CreateOrUpdate", 0) == 0
    d.tick()
    asked = d.choice
    assert asked is not None  # AKS's refusal is a question, never the job's end
    assert asked.key == "api-block:1.26.6:1"
    assert asked.question.startswith(
        "control plane 1.25.11 → 1.26.6: AKS refused the upgrade over recent use of APIs 1.26.6 removes: "
        "horizontalpodautoscalers.autoscaling.v2beta2. Override? The bot then sets "
        "upgradeSettings.overrideSettings forceUpgrade=true, expiring 1h after it is confirmed"
    )
    assert [(o.id, o.needs_reason) for o in asked.options] == [("override", True), ("stop", False)]
    assert d.audit[-1][0] == "ManagedClusters_CreateOrUpdate refused"
    d.tick(
        Decision(choice_key=asked.key, option="override", by="U0PRIMARY", reason="dashboard retired Monday")
    )
    confirm = d.choice
    assert confirm is not None
    assert confirm.key == "api-block:1.26.6:1:confirm"
    assert confirm.options[0].not_by == ("U0PRIMARY",)
    # One person's word sends nothing.
    assert azure_calls(sim)["ManagedClusters_CreateOrUpdate"] == 1
    assert sim.core.providers["aks"].override == {}
    confirmed_at = sim_now(sim)()
    d.tick(
        Decision(
            choice_key=confirm.key, option="override", by="U0SHADOW", reason="usage is the dashboard only"
        )
    )
    until = (confirmed_at + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert d.progress["until"] == until  # ARM's form, sent as it is
    said = f"{confirmed_at + timedelta(hours=1):%Y-%m-%d %H:%M} UTC"  # people's, the zone named
    assert d.audit[-1] == (
        "override chosen",
        "control plane 1.25.11 → 1.26.6: override of AKS's deprecated-API block "
        f"(horizontalpodautoscalers.autoscaling.v2beta2) until {said}, asked by U0PRIMARY (dashboard "
        "retired Monday) and confirmed by U0SHADOW (usage is the dashboard only)",
    )
    d.tick()  # the override call's intent
    # The process dies after ARM accepted the PUT but before its tick was stored: the tick runs
    # again, reads the cluster Upgrading and follows it — the PUT is never made twice.
    d.tick(crash=True)
    again = d.tick()
    assert again.progress["following"] == "resource"
    assert sim.core.providers["aks"].override == {"forceUpgrade": True, "until": until}
    follow(d, sim)
    assert d.last is not None
    assert d.last.ok, d.last.detail
    assert d.last.detail == (
        "control plane 1.25.11 → 1.26.6: shop-prod's provisioningState Succeeded and the API server reports v1.26.6"
    )
    assert azure_calls(sim)["ManagedClusters_CreateOrUpdate"] == 2  # refused once, accepted once
    assert len(sim.core.providers["aks"].ops) == 1


def test_people_can_stop_an_upgrade_aks_blocked_over_deprecated_api_usage(
    sim: SimCluster, kube: Cluster
) -> None:
    d = driver(AksUpgradeControlPlaneJob(access(sim), LABELS), kube, sim, {"version": "1.26.6"})
    d.tick()
    d.tick()
    assert d.choice is not None
    d.tick(Decision(choice_key=d.choice.key, option="stop", by="U0COORD"))
    assert d.last is not None
    assert not d.last.ok
    assert d.last.detail.endswith("; stopped by U0COORD, not overridden")
    assert azure_calls(sim)["ManagedClusters_CreateOrUpdate"] == 1
    assert sim.core.providers["aks"].ops == {}


def test_without_the_block_the_control_plane_upgrade_follows_its_async_operation(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(aks_scenario(api_block=False), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        job = AksUpgradeControlPlaneJob(access(sim), LABELS)
        d = driver(job, kube, sim, {"version": "1.26.6"})
        # The gate shows the exact call, and that the agent pools stay where they are.
        assert job.dry_run(kube, d.progress)[0] == (
            "would call ManagedClusters_CreateOrUpdate (PUT managedClusters/shop-prod) with kubernetesVersion=1.26.6, "
            "every agent pool kept on its version (control plane only: apps 1.25.11, batch 1.25.11, system 1.25.11)"
        )
        d.tick()
        started = d.tick()
        op = started.progress["operation"]
        assert op
        assert started.progress["following"] == "operation"
        follow(d, sim)
        assert d.last is not None
        assert d.last.ok
        assert d.last.detail == (
            f"control plane 1.25.11 → 1.26.6: AKS operation {op} Succeeded and the API server reports v1.26.6"
        )
        assert azure_calls(sim)["ManagedClusters_CreateOrUpdate"] == 1
        assert azure_calls(sim)["Operations_Get"] >= 1
        # The pools were not touched.
        assert {
            p["properties"]["orchestratorVersion"]
            for p in [sim.core.providers["aks"].pool(n) for n in ("apps", "batch", "system")]
        } == {"1.25.11"}


def test_the_nodepool_upgrade_shows_its_max_surge_and_a_crash_never_repeats_the_put(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(aks_scenario(api_block=False), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        cp = driver(AksUpgradeControlPlaneJob(access(sim), LABELS), kube, sim, {"version": "1.26.6"})
        follow(cp, sim)
        job = AksUpgradeNodepoolJob(access(sim), LABELS)
        d = driver(job, kube, sim, {"nodepool": "apps"})
        assert d.progress["target"] == "1.26.6"  # the control plane's
        lines = job.dry_run(kube, d.progress)
        assert (
            lines[0]
            == "would call AgentPools_CreateOrUpdate (PUT agentPools/apps) with orchestratorVersion=1.26.6"
        )
        assert lines[1].startswith("max surge 33% (the pool's own): AKS adds that many new nodes at a time")
        d2 = driver(job, kube, sim, {"nodepool": "batch", "max_surge": "1"})
        assert job.dry_run(kube, d2.progress)[:2] == [
            "would call AgentPools_CreateOrUpdate (PUT agentPools/batch) with orchestratorVersion=1.26.6, "
            "upgradeSettings.maxSurge=1",
            "max surge 1 (set by the plan; the pool's own is 50%): AKS adds that many new nodes at a time, then "
            "drains and removes as many old ones",
        ]
        d.tick()  # intent
        d.tick(crash=True)  # the PUT reached ARM; its answer was lost with the process
        again = d.tick()
        assert again.progress["following"] == "resource"
        assert again.posts[0].text == (
            "agent pool apps 1.25.11 → 1.26.6: AgentPools_CreateOrUpdate made before the interruption reached AKS "
            "(the resource is upgrading): following it, not called again"
        )
        follow(d, sim)
        assert d.last is not None
        assert d.last.ok, d.last.detail
        assert d.last.detail == (
            "agent pool apps 1.25.11 → 1.26.6: shop-prod/apps's provisioningState Succeeded — 3/3 node(s) Ready on 1.26.6"
        )
        assert azure_calls(sim)["AgentPools_CreateOrUpdate"] == 1


def test_a_failed_nodepool_upgrade_fails_the_step_with_aks_reason(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(aks_scenario(api_block=False, fail_updates=["nodepool:apps"]), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        follow(driver(AksUpgradeControlPlaneJob(access(sim), LABELS), kube, sim, {"version": "1.26.6"}), sim)
        d = driver(AksUpgradeNodepoolJob(access(sim), LABELS), kube, sim, {"nodepool": "apps"})
        follow(d, sim)
        assert d.last is not None
        assert not d.last.ok
        assert d.last.detail.startswith("agent pool apps 1.25.11 → 1.26.6: AKS operation ")
        assert d.last.detail.endswith(
            " Failed — UpgradeFailed: surge nodes failed to join (planted by the scenario)"
        )


def test_aks_refusing_a_version_it_does_not_offer_ends_the_job_with_its_reason(
    sim: SimCluster, kube: Cluster
) -> None:
    d = driver(AksUpgradeControlPlaneJob(access(sim), LABELS), kube, sim, {"version": "1.27.3"})
    d.tick()
    with pytest.raises(UserError) as refused:
        d.tick()
    assert refused.value.user_message.startswith(
        "AKS refused ManagedClusters_CreateOrUpdate: UpgradeNotAllowed: Upgrading from 1.25.11 to 1.27.3 is not allowed"
    )


def test_without_a_provider_or_without_the_sdk_the_aks_actions_refuse_with_a_short_reason(
    sim: SimCluster, kube: Cluster
) -> None:
    job = AksUpgradeControlPlaneJob(ProviderAccess({"prod": None}, kind="aks"), LABELS)
    with pytest.raises(UserError) as no_provider:
        job.plan(kube, {"version": "1.26.6"}, now=sim_now(sim)())
    assert no_provider.value.user_message == (
        "cluster prod has no AKS provider: the AKS actions need "
        "`provider: {aks: {subscription_id, resource_group, name}}` in its configuration"
    )
    # A plan for AKS on a cluster the configuration says is EKS: the wrong plan, said so.
    wrong = AksUpgradeControlPlaneJob(
        ProviderAccess({"prod": None}, kind="aks", elsewhere={"prod": "eks"}), LABELS
    )
    with pytest.raises(UserError) as other_cloud:
        wrong.plan(kube, {"version": "1.26.6"}, now=sim_now(sim)())
    assert other_cloud.value.user_message == (
        "cluster prod runs on EKS (its `provider: {eks: …}`), not AKS: the AKS actions are for AKS clusters — "
        "is this the right plan for it?"
    )

    def no_sdk(config: object) -> object:
        raise ProviderUnavailable("azure-mgmt-containerservice is not installed")

    job = AksUpgradeControlPlaneJob(ProviderAccess({"prod": aks_provider(sim)}, no_sdk, kind="aks"), LABELS)  # type: ignore[arg-type]
    with pytest.raises(UserError) as no_sdk_error:
        job.plan(kube, {"version": "1.26.6"}, now=sim_now(sim)())
    assert no_sdk_error.value.user_message == (
        "the AKS actions need azure-mgmt-containerservice, which this bot does not have "
        "(pip install 'upgrade-bot[aks]')"
    )


def test_an_operations_errors_name_its_cloud_and_each_code_once() -> None:
    from bot.core.jobs.cloud import update_errors
    from bot.records import OperationError

    assert update_errors((), "AKS") == "AKS gave no reason"
    assert (
        update_errors(
            (OperationError(code="PodEvictionFailure", message="PodEvictionFailure: Reached max retries"),),
            "EKS",
        )
        == "PodEvictionFailure: Reached max retries"
    )
    assert update_errors(
        (OperationError(code="UpgradeFailed", message="surge nodes failed to join"),), "AKS"
    ) == ("UpgradeFailed: surge nodes failed to join")


def test_the_nodepool_gate_names_the_budgets_that_hold_its_pods_and_what_aks_does_with_them(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(aks_scenario(api_block=False), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        job = AksUpgradeNodepoolJob(access(sim), LABELS)
        d = driver(job, kube, sim, {"nodepool": "apps", "version": "1.26.6"})
        assert not [line for line in job.dry_run(kube, d.progress) if "disruption budgets" in line]
        nodes = {n["metadata"]["name"] for n in job._nodes(kube, "apps")}
        budget, pod = hold_a_pod(sim_kubeconfig(sim), nodes)
        (line,) = [line for line in job.dry_run(kube, d.progress) if "disruption budgets" in line]
        # EKS's gate said this; AKS's said nothing and the upgrade failed unannounced.
        assert line.startswith(f"disruption budgets at 0 now that hold pods on its nodes: {budget} (")
        assert pod in line
        assert line.endswith(
            " — AKS's drain waits on them until its drain timeout (30 minutes by default), then fails the "
            "upgrade (PodEvictionFailure) with the pool half upgraded: free them first"
        )


def test_the_control_plane_gate_says_a_not_allowed_span_in_force_now_is_the_teams_freeze(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    spans = [
        {"start": "2000-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"},  # in force whenever the test runs
        {"start": "2099-06-01T00:00:00Z", "end": "2099-06-05T00:00:00Z"},
    ]
    sim = sim_factory(
        aks_scenario(api_block=False, maintenance=[{"name": "default", "not_allowed": spans}]), speed=0.0
    )
    for kube in _cluster(sim, sim_kubeconfig):
        job = AksUpgradeControlPlaneJob(access(sim), LABELS)
        lines = job.dry_run(kube, driver(job, kube, sim, {"version": "1.26.6"}).progress)
        # It said "(they hold AKS's own upgrades, not this one)" of a span in force, as of one to come.
        assert (
            ":warning: planned maintenance: not-allowed span default (2000-01-01 00:00 – 2099-01-01 00:00 UTC) "
            "is in force now: the team's freeze — AKS lets this manual upgrade through it"
        ) in lines
        assert (
            "planned maintenance: not-allowed spans default 2099-06-01 00:00 – 2099-06-05 00:00 UTC "
            "(they hold AKS's own upgrades, not this one)"
        ) in lines


def test_an_agent_pool_aks_does_not_know_is_said_with_the_clusters_pools_at_the_gate_and_the_step(
    sim: SimCluster, kube: Cluster
) -> None:
    said = "nodepool: agent pool aps does not exist in shop-prod (its pools: apps, batch, system); did you mean apps?"
    # The gate's dry run, before anyone approves: the action's own line says it, not ARM's NotFound.
    jobs = default_jobs(LABELS, aks=access(sim))
    call = ActionCall(name="aks-upgrade-nodepool", args={"nodepool": "aps", "version": "1.26.6"})
    gate = preview.read(kube, [call], jobs, now=sim_now(sim)())
    assert gate["actions"][0]["error"] == said
    # The step: its job ends with the same reason (the service ends a job on a UserError).
    job = AksUpgradeNodepoolJob(access(sim), LABELS)
    with pytest.raises(UserError) as refused:
        job.plan(kube, {"nodepool": "aps"}, now=sim_now(sim)())
    assert refused.value.user_message == said
    # Nothing near: the pools alone.
    with pytest.raises(UserError) as far:
        job.plan(kube, {"nodepool": "gpu"}, now=sim_now(sim)())
    assert far.value.user_message == (
        "nodepool: agent pool gpu does not exist in shop-prod (its pools: apps, batch, system)"
    )
    # A pool removed after the job planned: its tick says so too.
    d = driver(job, kube, sim, {"nodepool": "apps", "version": "1.26.6"})
    d.progress["nodepool"] = "aps"
    d.tick()  # the call's intent
    with pytest.raises(UserError) as gone:
        d.tick()
    assert gone.value.user_message == said
    assert azure_calls(sim).get("AgentPools_CreateOrUpdate", 0) == 0


def test_an_aks_version_is_major_minor_patch_and_another_clouds_build_is_refused_not_trimmed() -> None:
    from bot.core.jobs.aks import check_control_plane, check_nodepool, version_arg

    assert version_arg({"version": "1.26.6"}, required=True) == "1.26.6"
    assert version_arg({"version": "v1.26.6"}, required=True) == "1.26.6"
    # It was read as 1.26.6: a GKE build in an AKS plan went through as another version.
    for text in ("1.26.6-gke.100", "1.26.6+k3s1", "1.26"):
        with pytest.raises(UserError) as refused:
            check_control_plane({"version": text})
        assert refused.value.user_message == (
            f"version: {text!r} is not a version AKS takes: major.minor.patch, like 1.26.6"
        )
    with pytest.raises(UserError, match=r"^version: '1\.26\.6-gke\.100' is not a version AKS takes"):
        check_nodepool({"nodepool": "apps", "version": "1.26.6-gke.100"})
