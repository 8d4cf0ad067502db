"""The EKS actions and wait-controlplane (issue 29), ticked against the sim: the real kube adapter
on its API server and boto3's real `eks` client on its AWS APIs (botocore serialises every call
and parses every answer), with the sim's clock stepped by the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.providers import eks as aws
from bot.core.jobs import preview
from bot.core.jobs.base import Decision, Job
from bot.core.jobs.controlplane import WaitControlPlaneJob
from bot.core.jobs.eks import (
    EksAccess,
    EksUpdateAddonJob,
    EksUpdateClusterJob,
    EksUpdateNodegroupJob,
)
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.trail import make_trail
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig, EksProvider
from bot.sim import SimCluster
from tests.support.aws import EKS_NAME, REGION, aws_calls, aws_env, eks_scenario_in_step
from tests.support.jobs import JobDriver

LABELS = ("eks.amazonaws.com/nodegroup",)


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in aws_env(tmp_path).items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory(eks_scenario_in_step(), speed=0.0, seed=1)


def _cluster(sim: SimCluster, kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig(sim), context="sim"))
    yield cluster
    cluster.close()


@pytest.fixture
def kube(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    yield from _cluster(sim, sim_kubeconfig)


def access(sim: SimCluster) -> EksAccess:
    return EksAccess({"prod": EksProvider(name=EKS_NAME, region=REGION, endpoint_url=sim.aws_url)})


def sim_now(sim: SimCluster) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)


def driver(job: Job, kube: Cluster, sim: SimCluster, args: dict[str, str], job_id: int = 7) -> JobDriver:
    now = sim_now(sim)
    progress = job.plan(kube, args, now=now())
    progress["trail"] = make_trail(run_id="R1", step_id="s", job_id=job_id, approved_by=["U1", "U2"])
    return JobDriver(job, kube, now=now, progress=progress)


def follow(d: JobDriver, sim: SimCluster, *, step: float = 60.0, limit: int = 200) -> None:
    """Tick, moving the sim's clock between ticks, until the job ends or asks people."""
    for _ in range(limit):
        d.tick()
        if d.done or d.choice is not None:
            return
        sim.control.advance(step)
    raise AssertionError(f"the job did not end: {d.last}")


def test_the_control_plane_update_is_followed_until_successful_and_the_api_server_reports_it(
    sim: SimCluster, kube: Cluster
) -> None:
    d = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"})
    assert (d.progress["from"], d.progress["version"]) == ("1.24", "1.25")
    # The call's intent is stored before the call is made (issue 38).
    intent = d.tick()
    assert intent.progress["intent"]["call"] == "UpdateClusterVersion"
    assert intent.progress["intent"]["known"] == []
    assert aws_calls(sim).get("UpdateClusterVersion", 0) == 0
    # The process dies after EKS accepted the call but before its tick was stored: the tick runs
    # again, finds the update by ListUpdates and follows it — the call is never made twice.
    first = d.tick(crash=True)
    again = d.tick()
    assert first.progress["update"] == again.progress["update"] != ""
    update = again.progress["update"]
    sim.control.advance(60)
    d.tick()
    assert not d.done
    assert d.last is not None
    assert d.last.card[0].startswith(f"control plane 1.24 → 1.25: EKS update {update} InProgress")
    assert d.last.card[1].startswith("API server /version: v1.24.17")
    follow(d, sim)
    assert d.last is not None
    assert d.last.ok
    assert d.last.detail == (
        f"control plane 1.24 → 1.25: EKS update {update} Successful and the API server reports "
        f"{kube.get_json('/version')['gitVersion']}"
    )
    assert d.posts[f"update-started:{update}"].startswith(
        "control plane 1.24 → 1.25: UpdateClusterVersion made before the interruption found by"
        " ListUpdates (not called again)"
    )
    assert d.audit[0] == (
        "UpdateClusterVersion",
        f"runbook-prod 1.24 → 1.25: update {update} (found by ListUpdates after an interrupted call;"
        " not called again)",
    )
    # One call, one update at EKS.
    assert aws_calls(sim)["UpdateClusterVersion"] == 1
    assert len(sim.core.aws.updates) == 1  # type: ignore[union-attr]


def test_a_new_job_follows_a_control_plane_update_still_in_progress_instead_of_calling_again(
    sim: SimCluster, kube: Cluster
) -> None:
    # The step timed out with EKS's update still InProgress; the run is resumed and the step
    # approved again: a new job (a new token) for the same version.
    first = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"}, job_id=7)
    first.tick()
    started = first.tick()
    update = started.progress["update"]
    assert aws_calls(sim)["UpdateClusterVersion"] == 1
    second = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"}, job_id=8)
    found = second.tick()
    assert found.progress["update"] == update
    text = found.posts[0].text
    assert text.startswith(
        f"control plane 1.24 → 1.25: EKS update {update} to 1.25 is already in progress (started "
    )
    assert text.endswith(" UTC, before this job): following it, UpdateClusterVersion not called")
    follow(second, sim)
    assert second.last is not None
    assert second.last.ok, second.last.detail
    # Not a second call (EKS would refuse it: ResourceInUseException, and the step failed again).
    assert aws_calls(sim)["UpdateClusterVersion"] == 1


def test_a_failed_control_plane_update_fails_the_step_with_the_aws_reason(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(eks_scenario_in_step(fail_updates=["cluster"]), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        d = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"})
        follow(d, sim)
        assert d.last is not None
        assert not d.last.ok
        assert "Failed — Unknown: the control plane update failed (planted by the scenario)" in d.last.detail
        assert d.last.posts[0].text == d.last.detail  # in the thread; the step's failure is broadcast


def test_eks_refusing_the_update_ends_the_job_with_its_reason(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    # The scenario as planted: node group `others` is still on 1.22.
    sim = sim_factory("eks-nodegroups", speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        job = EksUpdateClusterJob(access(sim), LABELS)
        d = driver(job, kube, sim, {"version": "1.25"})
        # The gate said so before anyone approved.
        assert job.dry_run(kube, d.progress)[2] == (
            "node groups behind the control plane, which EKS requires on 1.24 before it updates it: others (1.22)"
        )
        d.tick()  # the call's intent
        with pytest.raises(UserError) as refused:
            d.tick()
        assert refused.value.user_message == (
            "EKS refused UpdateClusterVersion: InvalidRequestException: Nodegroup(s) others must be "
            "updated to match cluster version 1.24 before updating the cluster version"
        )


def test_eks_refusing_the_update_over_upgrade_insights_asks_two_people_before_it_forces(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    # EKS refuses UpdateClusterVersion while an upgrade insight of the target is in ERROR (the
    # scenario's "Deprecated APIs removed in Kubernetes v1.25"), unless the call says force.
    sim = sim_factory(eks_scenario_in_step(insights_block=True), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        d = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"})
        d.tick()  # the call's intent
        d.tick()
        asked = d.choice
        assert asked is not None  # a question, not the job's end
        assert asked.key == "insights-force:1.25:1"
        assert asked.question.startswith(
            "control plane 1.24 → 1.25: EKS refused UpdateClusterVersion over its upgrade insights in ERROR "
            "for 1.25: Deprecated APIs removed in Kubernetes v1.25 ("
        )
        assert "One person asks with a reason; a second person confirms with theirs." in asked.question
        # The removed API still called, and who calls it: what the team must weigh before forcing.
        assert (
            "They name: /apis/policy/v1beta1/poddisruptionbudgets → /apis/policy/v1/poddisruptionbudgets, "
            "called by helm/v3.8.2 8,640 times in 30 days. Update with force?"
        ) in asked.question
        assert "`/upgrade check --to 1.25` lists each finding with its objects (EKS010)" in asked.question
        assert [(o.id, o.needs_reason) for o in asked.options] == [("force", True), ("stop", False)]
        assert d.audit[-1][0] == "UpdateClusterVersion refused"
        assert "InvalidStateException" not in d.audit[-1][1]
        assert "Amazon EKS detected upgrade readiness issues." in d.audit[-1][1]
        assert "called by helm/v3.8.2 8,640 times in 30 days" in d.audit[-1][1]
        assert aws_calls(sim)["UpdateClusterVersion"] == 1
        assert aws_calls(sim)["ListInsights"] == 1
        d.tick(
            Decision(choice_key=asked.key, option="force", by="U0PRIMARY", reason="apps moved off v1beta1")
        )
        confirm = d.choice
        assert confirm is not None
        assert confirm.key == "insights-force:1.25:1:confirm"
        assert confirm.options[0].not_by == ("U0PRIMARY",)
        assert d.audit[-1] == (
            "force asked",
            "control plane 1.24 → 1.25: U0PRIMARY asks to update with force past the upgrade insights in "
            "ERROR (Deprecated APIs removed in Kubernetes v1.25): apps moved off v1beta1. A second person "
            "confirms, or stops.",
        )
        # One person's word sends nothing.
        assert aws_calls(sim)["UpdateClusterVersion"] == 1
        # The thread names both as people (it showed "U0PRIMARY asks" and "asked by U0PRIMARY").
        assert d.shown["force-asked:1.25:1"].startswith("control plane 1.24 → 1.25: <@U0PRIMARY> asks to ")
        d.tick(Decision(choice_key=confirm.key, option="force", by="U0SHADOW", reason="audit log shows none"))
        assert d.progress["force"] is True
        assert d.shown["forced:1.25"].endswith(
            "asked by <@U0PRIMARY> (apps moved off v1beta1) and confirmed by <@U0SHADOW> (audit log shows none)"
        )
        assert d.audit[-1] == (
            "force chosen",
            "control plane 1.24 → 1.25: update with force past the upgrade insights in ERROR (Deprecated "
            "APIs removed in Kubernetes v1.25), asked by U0PRIMARY (apps moved off v1beta1) and confirmed "
            "by U0SHADOW (audit log shows none)",
        )
        follow(d, sim)
        assert d.last is not None
        assert d.last.ok, d.last.detail
        assert aws_calls(sim)["UpdateClusterVersion"] == 2
        assert len(sim.core.aws.updates) == 1  # type: ignore[union-attr]


def test_people_can_stop_a_control_plane_update_eks_refused_over_its_insights(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(eks_scenario_in_step(insights_block=True), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        d = driver(EksUpdateClusterJob(access(sim), LABELS), kube, sim, {"version": "1.25"})
        d.tick()
        d.tick()
        assert d.choice is not None
        d.tick(Decision(choice_key=d.choice.key, option="stop", by="U0COORD"))
        assert d.last is not None
        assert not d.last.ok
        assert d.last.detail.startswith(
            "control plane 1.24 → 1.25: EKS refused UpdateClusterVersion — Amazon EKS detected upgrade "
            "readiness issues."
        )
        assert d.last.detail.endswith("; stopped by U0COORD, not forced")
        assert aws_calls(sim)["UpdateClusterVersion"] == 1
        assert sim.core.aws.updates == {}  # type: ignore[union-attr]


def test_without_a_provider_or_without_boto3_the_eks_actions_refuse_with_a_short_reason(
    sim: SimCluster, kube: Cluster
) -> None:
    job = EksUpdateClusterJob(EksAccess({"prod": None}), LABELS)
    with pytest.raises(UserError) as no_provider:
        job.plan(kube, {"version": "1.25"}, now=sim_now(sim)())
    assert no_provider.value.user_message == (
        "cluster prod has no EKS provider: the EKS actions need `provider: {eks: {name, region}}` "
        "in its configuration"
    )

    def no_boto3(provider: EksProvider) -> Any:
        raise aws.AwsUnavailable("boto3 is not installed")

    provider = EksProvider(name=EKS_NAME, region=REGION, endpoint_url=sim.aws_url)
    job = EksUpdateClusterJob(EksAccess({"prod": provider}, no_boto3), LABELS)
    with pytest.raises(UserError) as no_extra:
        job.plan(kube, {"version": "1.25"}, now=sim_now(sim)())
    assert no_extra.value.user_message == (
        "the EKS actions need boto3, which this bot does not have (pip install 'upgrade-bot[aws]')"
    )
    assert "UpdateClusterVersion" not in aws_calls(sim)


def test_wait_controlplane_needs_several_answers_in_a_row_on_the_version(
    sim: SimCluster, kube: Cluster
) -> None:
    now = sim_now(sim)
    d = JobDriver(WaitControlPlaneJob(), kube, {"version": "1.25", "answers": "3", "timeout": "2h"}, now=now)
    d.tick()
    assert d.progress["streak"] == 0
    assert d.last is not None
    assert d.last.card == ("/version: v1.24.17-eks-10df0b3", "0/3 answers in a row on 1.25")
    sim.control.upgrade_control_plane("1.25.16")
    sim.control.advance(20 * 60)
    d.tick()
    d.tick()
    assert not d.done
    d.tick()
    assert d.done
    assert d.last.ok
    assert d.last.detail.startswith("control plane: 3 answers in a row from /version report v1.25.16")


def test_wait_controlplane_gives_up_after_its_timeout_when_the_version_is_not_there(
    sim: SimCluster, kube: Cluster
) -> None:
    d = JobDriver(WaitControlPlaneJob(), kube, {"version": "1.25", "timeout": "10m"}, now=sim_now(sim))
    d.tick()
    sim.control.advance(11 * 60)
    d.tick()
    assert d.done
    assert d.last is not None
    assert not d.last.ok
    assert d.last.detail == (
        "control plane: /version did not report 1.25 3 times in a row within 10m (last: v1.24.17-eks-10df0b3)"
    )


def test_an_add_on_update_with_none_fails_on_the_planted_conflict_and_overwrite_gets_past_it(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(eks_scenario_in_step(fail_updates=["addon:coredns"]), speed=0.0, seed=1)
    for kube in _cluster(sim, sim_kubeconfig):
        job = EksUpdateAddonJob(access(sim), LABELS)
        # The add-on versions for 1.24 (the control plane is still on it).
        args = {"addon": "vpc-cni", "version": "v1.15.1-eksbuild.1"}
        ok = driver(job, kube, sim, {**args, "resolve_conflicts": "preserve"}, job_id=1)
        assert ok.progress["resolve_conflicts"] == "PRESERVE"
        follow(ok, sim)
        assert ok.last is not None
        assert ok.last.ok
        assert "EKS update" in ok.last.detail
        assert ok.last.detail.endswith("Successful, add-on ACTIVE")
        none = driver(job, kube, sim, {"addon": "coredns", "version": "v1.8.7-eksbuild.3"}, job_id=2)
        assert none.progress["from"] == "v1.8.7-eksbuild.3"
        none.tick()
        assert none.done  # already on it: nothing called
        vpc_calls = aws_calls(sim)["UpdateAddon"]
        assert vpc_calls == 1
    conflicting = eks_scenario_in_step(fail_updates=["addon:kube-proxy"])
    sim = sim_factory(conflicting, speed=0.0, seed=2)
    for kube in _cluster(sim, sim_kubeconfig):
        job = EksUpdateAddonJob(access(sim), LABELS)
        args = {"addon": "kube-proxy", "version": "v1.24.17-minimal-eksbuild.4"}
        sim.core.aws.addons["kube-proxy"].version = "v1.24.10"  # type: ignore[union-attr]
        stopped = driver(job, kube, sim, args, job_id=3)
        assert stopped.progress["resolve_conflicts"] == "NONE"
        follow(stopped, sim)
        # The conflict is a question for people, not the end of the job (issue 40 item 8).
        assert stopped.choice is not None
        stopped.tick(Decision(choice_key=stopped.choice.key, option="stop", by="U0COORD"))
        assert stopped.last is not None
        assert not stopped.last.ok
        assert "Failed — ConfigurationConflict: Conflicts found when trying to apply" in stopped.last.detail
        assert stopped.last.detail.endswith("; stopped by U0COORD, neither OVERWRITE nor PRESERVE chosen")
        assert aws_calls(sim)["UpdateAddon"] == 1
        forced = driver(job, kube, sim, {**args, "resolve_conflicts": "OVERWRITE"}, job_id=4)
        follow(forced, sim)
        assert forced.last is not None
        assert forced.last.ok


def test_an_add_on_conflict_asks_people_for_overwrite_or_preserve_and_updates_again_with_it(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory(eks_scenario_in_step(fail_updates=["addon:kube-proxy"]), speed=0.0, seed=2)
    for kube in _cluster(sim, sim_kubeconfig):
        job = EksUpdateAddonJob(access(sim), LABELS)
        sim.core.aws.addons["kube-proxy"].version = "v1.24.10"  # type: ignore[union-attr]
        d = driver(job, kube, sim, {"addon": "kube-proxy", "version": "v1.24.17-minimal-eksbuild.4"})
        follow(d, sim)
        first = d.progress["update"]
        choice = d.choice
        assert choice is not None
        assert choice.key == f"conflict:{first}"
        assert choice.question.startswith(
            f"add-on kube-proxy v1.24.10 → v1.24.17-minimal-eksbuild.4: EKS failed update {first} with "
            "resolveConflicts=NONE: ConfigurationConflict: Conflicts found when trying to apply."
        )
        # Each answer says what it means.
        assert "OVERWRITE: EKS overwrites what you changed on the add-on's objects with its defaults." in (
            choice.question
        )
        assert "PRESERVE: EKS keeps what you changed on the add-on's objects" in choice.question
        assert [(o.id, o.label, o.needs_reason) for o in choice.options] == [
            ("overwrite", "Retry with OVERWRITE", True),
            ("preserve", "Retry with PRESERVE", True),
            ("stop", "Stop (fail the step)", False),
        ]
        assert d.last is not None
        assert d.last.card[1] == (
            "waiting for people: retry with another conflict policy, or stop (see the thread)"
        )
        # Nothing is called again until people answer: a resume repeats no failed call.
        assert aws_calls(sim)["UpdateAddon"] == 1
        d.tick(
            Decision(choice_key=choice.key, option="overwrite", by="U0SHADOW", reason="drop the hand edit")
        )
        assert (d.progress["resolve_conflicts"], d.progress["update"], d.progress["tries"]) == (
            "OVERWRITE",
            "",
            1,
        )
        assert d.audit[-1] == (
            "conflict policy chosen",
            "add-on kube-proxy v1.24.10 → v1.24.17-minimal-eksbuild.4: U0SHADOW chose to update again with "
            "resolveConflicts=OVERWRITE (drop the hand edit): EKS overwrites what you changed on the add-on's "
            "objects with its defaults",
        )
        follow(d, sim)
        assert d.last is not None
        assert d.last.ok, d.last.detail
        second = d.progress["update"]
        assert second != first
        assert d.posts[f"update-started:{second}"].startswith(
            "add-on kube-proxy v1.24.10 → v1.24.17-minimal-eksbuild.4: EKS accepted UpdateAddon (conflicts: OVERWRITE)"
        )
        # A second update under its own token (the first token would answer the failed update).
        assert aws_calls(sim)["UpdateAddon"] == 2
        assert len(sim.core.aws.updates) == 2  # type: ignore[union-attr]


def test_a_node_group_update_names_the_budget_that_blocks_it_and_asks_before_forcing(
    sim: SimCluster, kube: Cluster
) -> None:
    sim.control.upgrade_control_plane("1.25.16")
    sim.control.advance(20 * 60)
    group = "others"
    nodes = [
        n["metadata"]["name"]
        for page in kube.list_pages("/api/v1/nodes", {"labelSelector": f"{LABELS[0]}={group}"})
        for n in page.items
    ]
    pods = [
        p
        for n in nodes
        for p in kube.node_pods(n)
        if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])
    ]
    held = pods[0]["metadata"]
    # A budget that allows no disruption of one of the group's pods: EKS cannot drain its node.
    sim.control.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "hold-it", "namespace": held["namespace"]},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": held["labels"]}},
        }
    )
    sim.control.advance(10)
    job = EksUpdateNodegroupJob(access(sim), LABELS)
    d = driver(job, kube, sim, {"nodegroup": group})
    # No version: the control plane's, as EKS does.
    assert (d.progress["version"], d.progress["target"], d.progress["force"]) == ("", "1.25", False)
    lines = job.dry_run(kube, d.progress)
    assert lines[0] == (
        "would call eks:UpdateNodegroupVersion clusterName=runbook-prod nodegroupName=others force=false "
        "clientRequestToken=(the run's and the job's ids)"
    )
    assert any(line.startswith("disruption budgets at 0 now that hold pods on its nodes: ") for line in lines)
    assert f"{held['namespace']}/hold-it ({held['namespace']}/{held['name']})" in " ".join(lines)
    follow(d, sim, step=30)
    blocked = [text for key, text in d.posts.items() if key.startswith("pdb-blocked:")]
    assert blocked
    assert (
        f"disruption budget {held['namespace']}/hold-it allows no disruption and holds "
        f"{held['namespace']}/{held['name']} on old node "
    ) in blocked[0]
    choice = d.choice
    assert choice is not None  # EKS failed the update; the job never forces by itself
    assert "PodEvictionFailure" in choice.question
    assert [(o.id, o.needs_reason) for o in choice.options] == [("force", True), ("stop", False)]
    assert aws_calls(sim)["UpdateNodegroupVersion"] == 1
    d.tick(
        Decision(choice_key=choice.key, option="force", by="U0SHADOW", reason="one replica behind its PDB")
    )
    assert (d.progress["update"], d.progress["force"], d.progress["tries"]) == ("", True, 1)
    follow(d, sim, step=60)
    assert d.last is not None
    assert d.last.ok
    assert d.last.detail.startswith("node group others 1.24 → 1.25: EKS update ")
    seen = d.progress["seen"]
    assert d.last.detail.endswith(f"Successful — {seen['total']}/{seen['total']} node(s) Ready on 1.25")
    assert seen["old"] == 0
    assert aws_calls(sim)["UpdateNodegroupVersion"] == 2  # the second one chosen by people


def test_people_can_stop_a_node_group_update_eks_failed(sim: SimCluster, kube: Cluster) -> None:
    job = EksUpdateNodegroupJob(access(sim), LABELS)
    d = driver(job, kube, sim, {"nodegroup": "others", "version": "1.24"})
    # As the force question left it: EKS's reason and the group's nodes then.
    failed = "EKS update u-1 Failed — PodEvictionFailure: Reached max retries while trying to evict pods"
    d.progress = {
        **d.progress,
        "update": "u-1",
        "status": "Failed",
        "failed": failed,
        "seen": {"on_target": 2, "total": 4},
    }
    d.tick(Decision(choice_key="force:u-1", option="stop", by="U0COORD"))
    assert d.last is not None
    assert not d.last.ok
    # The failure keeps EKS's reason and where the group stands (it said only "stopped … not forced").
    assert d.last.detail == (
        f"node group others {d.progress['from']} → 1.24: {failed}; stopped by U0COORD (not forced); "
        f"2/4 node(s) Ready on 1.24, the others still on {d.progress['from']}"
    )
    assert "UpdateNodegroupVersion" not in aws_calls(sim)


def test_stopping_after_a_retried_conflict_policy_failed_says_it_was_tried(
    sim: SimCluster, kube: Cluster
) -> None:
    from bot.core.jobs.eks import CONFLICT

    job = EksUpdateAddonJob(access(sim), LABELS)
    d = driver(job, kube, sim, {"addon": "kube-proxy", "version": "v1.24.17-minimal-eksbuild.4"})
    failed = "add-on kube-proxy: EKS update u-2 Failed — ConfigurationConflict: Conflicts found"
    d.progress = {
        **d.progress,
        "update": "u-2",
        "status": "Failed",
        "resolve_conflicts": "PRESERVE",
        "conflict": failed,
    }
    d.tick(Decision(choice_key=f"{CONFLICT}:u-2", option="stop", by="U0COORD"))
    assert d.last is not None
    assert not d.last.ok
    # Not "neither OVERWRITE nor PRESERVE chosen": PRESERVE was chosen, and failed.
    assert d.last.detail.endswith("; stopped by U0COORD, after the update with PRESERVE failed too")


def test_the_gate_dry_runs_say_what_would_be_called_and_what_eks_says_now(
    sim: SimCluster, kube: Cluster
) -> None:
    calls = [
        ActionCall(name="eks-update-cluster", args={"version": "1.25"}),
        ActionCall(name="eks-update-addon", args={"addon": "coredns", "version": "v1.9.3-eksbuild.11"}),
        ActionCall(name="wait-controlplane", args={"version": "1.25"}),
    ]
    assert preview.changes_cluster(calls) == calls
    jobs = default_jobs(LABELS, eks=access(sim))
    read = preview.read(kube, calls, jobs, now=sim_now(sim)())
    assert read["error"] == ""
    cluster, addon, wait = read["actions"]
    assert cluster["lines"][:3] == [
        "would call eks:UpdateClusterVersion name=runbook-prod version=1.25 clientRequestToken=(the run's "
        "and the job's ids: a resumed job never starts a second update)",
        "DescribeCluster now: version 1.24, platform eks.12, status ACTIVE",
        "API server /version now: v1.24.17-eks-10df0b3",
    ]
    assert addon["lines"][1] == (
        "conflict policy NONE: EKS changes nothing you changed on the add-on's objects; a conflict fails the update"
    )
    assert addon["lines"][2] == "DescribeAddon now: v1.8.7-eksbuild.3, status ACTIVE"
    assert wait["lines"][1] == "/version now: v1.24.17-eks-10df0b3"
    # Without a provider the gate says why, in the action's line; nothing is called.
    bare = preview.read(kube, calls[:1], default_jobs(LABELS), now=sim_now(sim)())
    assert bare["actions"][0]["error"] == "cluster prod has no EKS provider: the EKS actions need one"
    assert not {"UpdateClusterVersion", "UpdateAddon"} & set(aws_calls(sim))


def test_the_gate_warns_of_a_skipped_minor_and_of_a_kubeconfig_that_reaches_another_cluster(
    sim: SimCluster,
    kube: Cluster,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> None:
    jobs = default_jobs(LABELS, eks=access(sim))
    skip = preview.read(
        kube, [ActionCall(name="eks-update-cluster", args={"version": "1.26"})], jobs, now=sim_now(sim)()
    )
    assert skip["actions"][0]["lines"][1] == (
        ":warning: EKS updates the control plane one minor version at a time: from 1.24 it refuses 1.26 "
        "(InvalidParameterException)"
    )
    # The provider names the EKS cluster on 1.24; the kubeconfig reaches another one, on 1.29.
    other = sim_factory("small", speed=0.0, seed=1)
    for elsewhere in _cluster(other, sim_kubeconfig):
        api = elsewhere.get_json("/version")["gitVersion"]
        call = ActionCall(name="eks-update-cluster", args={"version": "1.25", "timeout": "5m"})
        gate = preview.read(elsewhere, [call], jobs, now=sim_now(sim)())
        assert gate["actions"][0]["lines"][1].startswith(
            f":warning: the API server this cluster's kubeconfig reaches reports {api}, EKS says 1.24: "
            "they are not the same cluster"
        )
        # Its update: EKS says Successful, but /version never reports 1.25 — not done (it was).
        d = driver(
            EksUpdateClusterJob(access(sim), LABELS), elsewhere, sim, {"version": "1.25", "timeout": "1h"}
        )
        follow(d, sim)
        assert d.last is not None
        assert not d.last.ok
        cards = [c for t in d.ticks for c in t.card]
        assert any(f"(it reports {api}, past it: is this cluster's kubeconfig" in c for c in cards), (
            cards[-3:],
            d.last.detail,
        )


def test_the_gate_of_a_resumed_step_says_the_job_follows_the_update_it_started(
    sim: SimCluster, kube: Cluster
) -> None:
    d = driver(
        EksUpdateAddonJob(access(sim), LABELS),
        kube,
        sim,
        {"addon": "vpc-cni", "version": "v1.15.1-eksbuild.1"},
    )
    d.tick()  # the call's intent
    d.tick()
    update = d.progress["update"]
    call = ActionCall(name="eks-update-addon", args={"addon": "vpc-cni", "version": "v1.15.1-eksbuild.1"})
    jobs = default_jobs(LABELS, eks=access(sim))
    read = preview.read(kube, [call], jobs, now=sim_now(sim)(), resumed={"eks-update-addon": d.progress})
    assert read["actions"][0]["lines"] == [
        f"resumes following EKS update {update}, which this job started before it was interrupted: "
        "no new update is called",
        "DescribeUpdate now: InProgress",
    ]
    assert aws_calls(sim)["UpdateAddon"] == 1


def test_a_node_group_gate_ahead_of_the_control_plane_says_eks_refuses_it(
    sim: SimCluster, kube: Cluster
) -> None:
    job = EksUpdateNodegroupJob(access(sim), LABELS)
    ahead = job.dry_run(kube, driver(job, kube, sim, {"nodegroup": "ng-shared", "version": "1.25"}).progress)
    assert ahead[1] == (
        ":warning: the control plane is on 1.24: EKS refuses a node group newer than it "
        "(InvalidParameterException); update the control plane first"
    )
    level = job.dry_run(kube, driver(job, kube, sim, {"nodegroup": "others", "version": "1.24"}).progress)
    assert not [line for line in level if "refuses a node group newer" in line]


def test_a_node_group_gate_says_its_subnets_free_addresses_and_warns_when_a_surge_cannot_fit(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    scenario = eks_scenario_in_step()
    assert scenario.aws is not None
    roomy = [dict(s) for s in scenario.aws["subnets"]]
    full = [{**s, "free": 0} if "nodes" in s.get("use", ()) else s for s in roomy]
    for subnets, warned in ((roomy, False), (full, True)):
        sim = sim_factory(eks_scenario_in_step(subnets=subnets), speed=0.0, seed=1)
        for kube in _cluster(sim, sim_kubeconfig):
            job = EksUpdateNodegroupJob(access(sim), LABELS)
            lines = job.dry_run(
                kube, driver(job, kube, sim, {"nodegroup": "others", "version": "1.24"}).progress
            )
            (line,) = [line for line in lines if "its subnets now: " in line]
            assert "subnet-0d0a10000000000a2 (ap-northeast-1a) " in line
            # It said nothing: with every node subnet full, the update then "succeeded" in the sim and
            # fails with NodeCreationFailure at EKS.
            assert line.startswith(":warning:") is warned, line
            if warned:
                assert line.endswith(
                    " — 0 address(es) for a surge of up to 6 new node(s): EKS cannot launch them (the update "
                    "fails with NodeCreationFailure); free addresses first"
                )


def test_work_done_outside_the_bot_is_seen_at_the_gate_and_never_called_again(
    sim: SimCluster, kube: Cluster
) -> None:
    """The control plane and a node group updated by hand (here: by other jobs, as the console
    would) after the steps began: each gate says nothing will be called, and the node group's job
    ends without a second UpdateNodegroupVersion, which would replace every node again."""
    control = EksUpdateClusterJob(access(sim), LABELS)
    follow(driver(control, kube, sim, {"version": "1.25"}, job_id=1), sim)
    again = driver(control, kube, sim, {"version": "1.25"}, job_id=2)
    lines = control.dry_run(kube, again.progress)
    assert (
        lines[0]
        == "the control plane is already on 1.25: nothing will be called, the step succeeds as it starts"
    )
    assert not [line for line in lines if "would call" in line or "behind the control plane" in line]

    groups = EksUpdateNodegroupJob(access(sim), LABELS)
    ours = driver(groups, kube, sim, {"nodegroup": "others", "version": "1.25"}, job_id=3)
    assert ours.progress["from"] == "1.24"
    follow(
        driver(groups, kube, sim, {"nodegroup": "others", "version": "1.25"}, job_id=4), sim
    )  # "the console"
    assert aws_calls(sim)["UpdateNodegroupVersion"] == 1
    gate = groups.dry_run(kube, ours.progress)
    assert gate[0].startswith(
        "node group others is already on 1.25 (it was on 1.24 when the step began: updated outside the bot; release "
    )
    assert gate[0].endswith("): nothing will be called, the step succeeds as it starts")
    follow(ours, sim)
    assert ours.last is not None
    assert ours.last.ok
    assert ours.last.detail == (
        "node group others is already on 1.25 (it was on 1.24 when the step began: updated outside the bot): "
        "nothing to update, UpdateNodegroupVersion not called"
    )
    assert aws_calls(sim)["UpdateNodegroupVersion"] == 1

    # A group already on the target when its step begins: the call is an AMI refresh, and says so.
    refresh = driver(groups, kube, sim, {"nodegroup": "others", "version": "1.25"}, job_id=5)
    (warning,) = [line for line in groups.dry_run(kube, refresh.progress) if line.startswith(":warning:")]
    assert warning.startswith(
        ":warning: node group others is already on 1.25: the call only moves it to the newest AMI release of 1.25"
    )
    assert warning.endswith("EKS replaces every node of it again. Reject the gate if it was upgraded by hand")


def test_a_node_group_eks_does_not_know_is_said_with_the_clusters_groups_at_the_gate_and_the_step(
    sim: SimCluster, kube: Cluster
) -> None:
    said = (
        "nodegroup: node group ng-sharde does not exist in runbook-prod (its node groups: control-plane, "
        "istio, logging, ng-shared, others); did you mean ng-shared?"
    )
    # The gate's dry run, before anyone approves: the action's own line says it, not EKS's
    # ResourceNotFoundException.
    call = ActionCall(name="eks-update-nodegroup", args={"nodegroup": "ng-sharde", "version": "1.24"})
    gate = preview.read(kube, [call], default_jobs(LABELS, eks=access(sim)), now=sim_now(sim)())
    assert gate["actions"][0]["error"] == said
    # The step: its job ends with the same reason (the service ends a job on a UserError).
    job = EksUpdateNodegroupJob(access(sim), LABELS)
    with pytest.raises(UserError) as refused:
        job.plan(kube, {"nodegroup": "ng-sharde"}, now=sim_now(sim)())
    assert refused.value.user_message == said
    # Nothing near: the groups alone.
    with pytest.raises(UserError) as far:
        job.plan(kube, {"nodegroup": "gpu"}, now=sim_now(sim)())
    assert far.value.user_message == (
        "nodegroup: node group gpu does not exist in runbook-prod "
        "(its node groups: control-plane, istio, logging, ng-shared, others)"
    )
    # A group removed after the job planned: its tick says so too, and nothing is called.
    d = driver(job, kube, sim, {"nodegroup": "ng-shared", "version": "1.25"})
    d.progress["nodegroup"] = "ng-sharde"
    with pytest.raises(UserError) as gone:
        d.tick()
    assert gone.value.user_message == said
    assert aws_calls(sim).get("UpdateNodegroupVersion", 0) == 0
