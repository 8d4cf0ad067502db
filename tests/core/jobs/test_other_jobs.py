"""cordon/uncordon, restart, wait-nodegroup and the registry, on an in-memory cluster."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core.jobs.common import RESUMED_AT, iso
from bot.core.jobs.nodes import CordonJob, UncordonJob
from bot.core.jobs.registry import default_jobs, job_kind
from bot.core.jobs.restart import RestartJob
from bot.core.jobs.waitgroup import WaitNodeGroupJob, group_counts
from bot.core.rules import read_rules
from bot.errors import UserError
from bot.resources import BUILTIN_RULES
from tests.support.clock import FakeClock
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import container_status, deployment, node, pod

T0 = datetime(2026, 11, 24, 7, 0, tzinfo=UTC)
LABELS = ("eks.amazonaws.com/nodegroup",)


def test_the_registry_maps_every_kind_plans_use() -> None:
    registry = default_jobs(LABELS)
    assert sorted(registry.jobs) == [
        "aks-upgrade-control-plane",
        "aks-upgrade-nodepool",
        "alerts",
        "analysis",
        "app-health",
        "argocd-pause",
        "argocd-resume",
        "cordon",
        "delete-pod",
        "drain",
        "eks-update-addon",
        "eks-update-cluster",
        "eks-update-nodegroup",
        "flux-resume",
        "flux-suspend",
        "gke-update-master",
        "gke-update-nodepool",
        "restart",
        "set-image",
        "uncordon",
        "wait-controlplane",
        "wait-nodegroup",
    ]
    assert all(registry.get(kind).kind == kind for kind in registry.jobs)  # type: ignore[union-attr]
    assert registry.get("reboot") is None


def test_cordon_changes_only_schedulable_nodes_and_lists_those_it_cordoned() -> None:
    fake = FakeCluster(nodes=[node("n1", "g"), node("n2", "g", unschedulable=True)])
    driver = JobDriver(CordonJob(LABELS), fake, {"nodegroup": "g"}, now=FakeClock(T0))
    driver.tick()
    assert driver.last is not None
    assert driver.last.done
    assert fake.writes == [("cordon", "n1")]
    assert driver.progress["cordoned"] == ["n1"]
    assert driver.audit == [("cordon", "node n1: schedulable → unschedulable")]
    assert driver.posts == {
        "cordon:n1": "node n1 cordoned",
        "cordon-already:n2": "node n2 was already unschedulable: left as it is",
    }
    assert driver.last.card[0] == "▓▓▓▓▓▓▓▓▓▓ 2/2 nodes cordoned"


def test_a_cordon_dry_run_changes_nothing_and_says_what_would_happen() -> None:
    fake = FakeCluster(nodes=[node("n1", "g"), node("n2", "g", unschedulable=True)])
    job = CordonJob(LABELS)
    lines = job.dry_run(fake, job.plan(fake, {"node": "n1,n2"}, now=T0))
    assert lines == [
        "would cordon node n1 (schedulable → unschedulable)",
        "node n2 is already unschedulable: left as it is",
    ]
    assert fake.writes == []


def test_uncordon_re_run_after_a_crash_does_not_patch_again() -> None:
    fake = FakeCluster(nodes=[node("n1", "g", unschedulable=True)])
    driver = JobDriver(UncordonJob(LABELS), fake, {"node": "n1"}, now=FakeClock(T0))
    driver.tick(crash=True)
    driver.tick()
    assert fake.writes == [("uncordon", "n1")]
    assert driver.progress["uncordoned"] == ["n1"]


def _web(**spec: Any) -> dict[str, Any]:
    raw = deployment("shop", "web")
    raw["spec"].update(spec)
    raw["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    return raw


def _pods(waiting: str | None) -> list[dict[str, Any]]:
    out = []
    for name in ("web-5d8f-a", "web-5d8f-b"):
        raw = pod(
            "shop",
            name,
            owner=("ReplicaSet", "web-5d8f"),
            containers=[container_status("app", ready=False, waiting=waiting)],
        )
        raw["metadata"]["labels"] = {"app": "web", "pod-template-hash": "5d8f"}
        out.append(raw)
    return out


def test_restart_stamps_once_then_waits_for_the_new_generation_to_roll_out() -> None:
    fake = FakeCluster(workloads={("deployment", "shop", "web"): _web()})
    clock = FakeClock(T0)
    driver = JobDriver(RestartJob(), fake, {"workloads": "deployment/shop/web"}, now=clock)
    assert driver.progress["workloads"][0]["stamp"] == "2026-11-24T07:00:00Z"
    driver.tick(crash=True)
    driver.tick()  # the stamp is already there: not patched twice
    assert fake.writes == [("restart_workload", "deployment/shop/web")]
    assert driver.progress["workloads"][0]["state"] == "rolling"
    driver.tick()
    assert driver.last is not None
    assert not driver.last.done  # generation 2 not observed yet
    assert driver.last.card[1] == "deployment/shop/web: waiting for the restart to be observed"
    fake.workloads[("deployment", "shop", "web")]["status"]["observedGeneration"] = 2
    driver.tick()
    assert driver.last.done
    assert driver.last.ok
    assert (
        driver.posts["rollout-done:deployment/shop/web"]
        == 'deployment/shop/web: deployment "web" successfully rolled out'
    )


@pytest.mark.parametrize(
    ("waiting", "limit", "word"),
    [
        ("CrashLoopBackOff", "crashloop_after", "CrashLoopBackOff"),
        ("ImagePullBackOff", "imagepull_after", "ImagePullBackOff/ErrImagePull"),
        ("ErrImagePull", "imagepull_after", "ImagePullBackOff/ErrImagePull"),
    ],
)
def test_a_restart_stops_not_ok_when_pods_crash_loop_or_fail_to_pull_longer_than_the_limit(
    waiting: str, limit: str, word: str
) -> None:
    workload = _web()
    workload["status"]["updatedReplicas"] = 0
    fake = FakeCluster(workloads={("deployment", "shop", "web"): workload}, pods=_pods(waiting))
    clock = FakeClock(T0)
    driver = JobDriver(RestartJob(), fake, {"workloads": "deployment/shop/web", limit: "1m"}, now=clock)
    driver.tick()
    fake.workloads[("deployment", "shop", "web")]["status"]["observedGeneration"] = 2
    driver.tick()
    assert driver.progress["workloads"][0]["bad"] == {word: "2026-11-24T07:00:00Z"}
    clock.advance(timedelta(seconds=60))
    assert not driver.tick().done  # exactly the limit is not longer than it
    clock.advance(timedelta(seconds=1))
    driver.tick()
    assert driver.last is not None
    assert driver.last.done
    assert not driver.last.ok
    assert (
        driver.last.detail
        == f"1 workload(s) failed: deployment/shop/web (2 pod(s) in {word} for more than 60 s)"
    )


def test_a_restart_not_rolled_out_within_its_timeout_ends_not_ok() -> None:
    fake = FakeCluster(workloads={("deployment", "shop", "web"): _web()})
    clock = FakeClock(T0)
    driver = JobDriver(RestartJob(), fake, {"workloads": "deployment/shop/web", "timeout": "10m"}, now=clock)
    driver.tick()
    clock.advance(timedelta(minutes=10))
    end = driver.tick()
    assert end.done
    assert not end.ok
    assert "within the timeout" in driver.posts["rollout-failed:deployment/shop/web"]


def test_a_paused_deployment_is_refused_with_a_line_and_the_job_is_not_ok() -> None:
    fake = FakeCluster(workloads={("deployment", "shop", "web"): _web(paused=True)})
    driver = JobDriver(RestartJob(), fake, {"namespace": "shop"}, now=FakeClock(T0))
    driver.tick()
    assert driver.last is not None
    assert driver.last.done
    assert not driver.last.ok
    assert (
        driver.posts["restart-refused:deployment/shop/web"]
        == "deployment/shop/web is paused: not restarted (resume it first)"
    )
    assert fake.writes == []


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"workloads": "deployment/shop/api"}, "no such workload"),
        ({"workloads": "job/shop/web"}, "is not like"),
        ({"namespace": "empty"}, "nothing to restart"),
        ({"namespace": "shop", "kinds": "cronjob"}, "kinds:"),
        ({}, "either workloads"),
    ],
)
def test_restart_arguments_that_name_nothing_are_refused(args: dict[str, str], reason: str) -> None:
    fake = FakeCluster(workloads={("deployment", "shop", "web"): _web()})
    with pytest.raises(UserError, match=reason):
        RestartJob().plan(fake, args, now=T0)


def _group(*nodes: dict[str, Any]) -> FakeCluster:
    return FakeCluster(nodes=[copy.deepcopy(n) for n in nodes])


def test_old_cordoned_deleting_or_not_ready_nodes_are_not_on_target() -> None:
    deleting = node("n4", "g", kubelet="v1.30.2")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-24T07:00:00Z"
    nodes = [
        node("n1", "g", kubelet="v1.30.2"),
        node("n2", "g", kubelet="v1.29.4", unschedulable=True),
        node("n3", "g", kubelet="v1.30.2", ready="False"),
        deleting,
    ]
    assert group_counts(nodes, "1.30") == {"total": 4, "on_target": 1, "not_ready": 1, "old": 1}


def test_wait_nodegroup_is_done_when_every_node_is_ready_on_the_version_and_fails_at_the_timeout() -> None:
    clock = FakeClock(T0)
    fake = _group(node("n1", "g", kubelet="v1.30.2"), node("n2", "g", kubelet="v1.29.4"), node("x", "other"))
    driver = JobDriver(
        WaitNodeGroupJob(LABELS), fake, {"nodegroup": "g", "version": "1.30", "timeout": "10m"}, now=clock
    )
    first = driver.tick()
    assert first.card == ("▓▓▓▓▓░░░░░ 1/2 nodes of g Ready on 1.30", "1 old node(s) remaining")
    assert not first.done
    del fake.nodes["n2"]
    assert driver.tick().done
    assert driver.posts["nodegroup-ready:g:1.30"] == "node group g: all 1 node(s) Ready on 1.30"

    late = JobDriver(
        WaitNodeGroupJob(LABELS),
        _group(node("n2", "g")),
        {"nodegroup": "g", "version": "1.30", "timeout": "10m"},
        now=clock,
    )
    clock.advance(timedelta(minutes=10))
    end = late.tick()
    assert end.done
    assert not end.ok
    assert "not all on 1.30 in time" in end.detail


def test_a_resumed_wait_for_a_node_group_counts_its_timeout_from_the_resume() -> None:
    clock = FakeClock(T0)
    driver = JobDriver(
        WaitNodeGroupJob(LABELS),
        _group(node("n2", "g")),
        {"nodegroup": "g", "version": "1.30", "timeout": "10m"},
        now=clock,
    )
    assert not driver.tick().done
    clock.advance(timedelta(minutes=30))  # interrupted meanwhile
    driver.progress[RESUMED_AT] = iso(clock())
    assert not driver.tick().done
    clock.advance(timedelta(minutes=10))
    end = driver.tick()
    assert end.done
    assert not end.ok


def test_an_empty_group_is_never_done() -> None:
    driver = JobDriver(
        WaitNodeGroupJob(LABELS), FakeCluster(), {"nodegroup": "g", "version": "1.30"}, now=FakeClock(T0)
    )
    assert not driver.tick().done


def test_wait_nodegroup_with_replaces_waits_until_the_old_group_has_no_node_left() -> None:
    fake = _group(
        node("n1", "others-1-25", kubelet="v1.30.2"),
        node("o1", "others", unschedulable=True),
        node("x", "logging"),
    )
    args = {"nodegroup": "others-1-25", "version": "1.30", "replaces": "others"}
    driver = JobDriver(WaitNodeGroupJob(LABELS), fake, args, now=FakeClock(T0))
    assert WaitNodeGroupJob(LABELS).dry_run(fake, driver.progress) == [
        "would wait (up to 3600 s, writing nothing) until every node of group others-1-25 is Ready on 1.30 "
        "and group others, which it replaces, has no node left: now 1/1 on target, 0 NotReady, 0 old, "
        "1 node(s) left in others"
    ]
    first = driver.tick()
    assert not first.done  # the new group is all on 1.30, but the old one still has a node
    assert first.card == (
        "▓▓▓▓▓▓▓▓▓▓ 1/1 nodes of others-1-25 Ready on 1.30",
        "1 node(s) left in others, which others-1-25 replaces",
    )
    del fake.nodes["o1"]
    assert driver.tick().done
    assert driver.posts["nodegroup-ready:others-1-25:1.30"] == (
        "node group others-1-25: all 1 node(s) Ready on 1.30; others, which it replaces, has no node left"
    )
    with pytest.raises(UserError, match="replaces: the old group"):
        job_kind("wait-nodegroup").check({**args, "replaces": "others-1-25"})  # type: ignore[union-attr]


def test_wait_nodegroup_needs_a_group_and_a_version() -> None:
    with pytest.raises(UserError, match="version: required"):
        WaitNodeGroupJob(LABELS).plan(FakeCluster(), {"nodegroup": "g"}, now=T0)
    with pytest.raises(UserError, match="nodegroup: required"):
        WaitNodeGroupJob(LABELS).plan(FakeCluster(), {"version": "1.30"}, now=T0)


def test_a_workload_deleted_while_restarting_fails_the_job_with_a_line() -> None:
    fake = FakeCluster(workloads={("deployment", "shop", "web"): _web()})
    driver = JobDriver(RestartJob(), fake, {"workloads": "deployment/shop/web"}, now=FakeClock(T0))
    driver.tick()
    del fake.workloads[("deployment", "shop", "web")]
    end = driver.tick()
    assert end.done
    assert not end.ok
    assert (
        driver.posts["rollout-failed:deployment/shop/web"]
        == "deployment/shop/web was deleted while restarting"
    )


def test_a_failed_restart_names_the_known_issue_rule_and_its_remedy() -> None:
    rules = read_rules(BUILTIN_RULES)
    workload = _web()
    workload["status"]["conditions"] = [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    ]
    pods = []
    for name in ("web-5d8f-a", "web-5d8f-b"):
        raw = pod(
            "shop",
            name,
            owner=("ReplicaSet", "web-5d8f"),
            containers=[container_status("app"), container_status("vault-agent", ready=False)],
        )
        raw["metadata"]["labels"] = {"app": "web", "pod-template-hash": "5d8f"}
        raw["metadata"]["annotations"] = {"vault.hashicorp.com/agent-inject": "true"}
        pods.append(raw)
    fake = FakeCluster(workloads={("deployment", "shop", "web"): workload}, pods=pods)
    clock = FakeClock(T0)
    driver = JobDriver(RestartJob(rules), fake, {"workloads": "deployment/shop/web"}, now=clock)
    driver.tick()
    fake.workloads[("deployment", "shop", "web")]["status"]["observedGeneration"] = 2
    end = driver.tick()
    assert end.done
    assert not end.ok
    line = driver.posts["rollout-failed:deployment/shop/web"]
    assert line.startswith(
        'deployment/shop/web: rollout failed: deployment "web" exceeded its progress deadline — '
        "KI004 Vault-injected pod with the vault-agent sidecar not ready: "
        # The remedy is filled with the failing pods' names, so it can be pasted.
        'Look for "error authenticating" in the agent\'s log: '
        "kubectl -n shop logs web-5d8f-a -c vault-agent --tail=50; "
        "kubectl -n shop logs web-5d8f-b -c vault-agent --tail=50"
    )
    assert end.detail == (
        '1 workload(s) failed: deployment/shop/web (deployment "web" exceeded its progress deadline'
        " — KI004 Vault-injected pod with the vault-agent sidecar not ready)"
    )
    # Without rules the line is as before: the failure stands on its own.
    bare = JobDriver(RestartJob(), FakeCluster(workloads={("deployment", "shop", "web"): _web()}, pods=pods),
                     {"workloads": "deployment/shop/web"}, now=clock)  # fmt: skip
    bare.cluster.workloads[("deployment", "shop", "web")]["status"]["conditions"] = workload["status"][
        "conditions"
    ]
    bare.tick()
    bare.cluster.workloads[("deployment", "shop", "web")]["status"]["observedGeneration"] = 2
    bare.tick()
    assert bare.posts["rollout-failed:deployment/shop/web"] == (
        'deployment/shop/web: rollout failed: deployment "web" exceeded its progress deadline'
    )


def test_a_plan_or_action_may_ask_the_drain_to_depool_and_bad_values_are_refused_before_a_gate() -> None:
    check = job_kind("drain").check
    check({"nodegroup": "ng-shared", "depool": "true", "depool_wait": "30s"})
    check({"node": "n1", "depool": "keep"})
    assert {"depool", "depool_wait"} <= job_kind("drain").arguments
    with pytest.raises(UserError, match="depool: 'maybe' is not true, false or keep"):
        check({"node": "n1", "depool": "maybe"})
    with pytest.raises(UserError, match="depool_wait: only with depool"):
        check({"node": "n1", "depool_wait": "30s"})
    with pytest.raises(UserError, match="depool_wait"):
        check({"node": "n1", "depool": "true", "depool_wait": "soon"})
