"""The `app-health` job (issue 39 item 3) through the kube adapter against the `gitops` sim:
Argo CD Applications must be Healthy and Synced and Flux objects Ready; an app already unhealthy
at the baseline is reported, not blocking; an Application going Degraded fails the step and names
the app with its message; an API server that does not answer, or refuses the read, is
Inconclusive (the alerts job's `evidence_inconclusive:` pause), never a pass."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.jobs.alerts import PAUSE_KIND
from bot.core.jobs.apphealth import AppHealthJob
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import default_jobs, job_kind
from bot.errors import UserError
from bot.records import ClusterConfig
from bot.sim import SimCluster

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
DEGRADE_SHOP = {
    "type": "app_status",
    "object": {"kind": "Application", "namespace": "argocd", "name": "shop"},
    "health": "Degraded",
    "message": "Deployment shop/web: Progress deadline exceeded",
}


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def cluster(sim: SimCluster, tmp_path: Path) -> Iterator[Cluster]:
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    adapter = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    yield adapter
    adapter.close()


def test_it_is_a_registered_plan_action_that_writes_nothing() -> None:
    kind = job_kind("app-health")
    assert kind is not None
    assert kind.mutating is False
    assert kind.optional == {"namespaces", "selector", "timeout"}
    assert isinstance(default_jobs(()).get("app-health"), AppHealthJob)
    with pytest.raises(UserError, match="timeout"):
        kind.check({"timeout": "soon"})
    with pytest.raises(UserError, match="namespaces"):
        kind.check({"namespaces": "Not_A_Namespace"})


def test_healthy_apps_pass_and_the_one_degraded_at_the_baseline_is_reported_not_blocking(
    cluster: Cluster,
) -> None:
    job = AppHealthJob()
    progress = job.plan(cluster, {"timeout": "10m"}, now=T0)
    assert progress["baseline"] == {
        "Application argocd/legacy": "Degraded/Synced — Deployment legacy/batch: Progress deadline exceeded"
    }
    tick = job.tick(cluster, progress, now=T0 + timedelta(seconds=15))
    assert (tick.done, tick.ok) == (True, True)
    assert tick.detail == "app-health: Apps: 3/4 healthy · 1 unhealthy at the baseline"
    reported = next(p for p in tick.posts if p.key.startswith("app-health-baseline:"))
    assert "reported, not blocking" in reported.text
    assert "• Application argocd/legacy: Degraded/Synced — Deployment legacy/batch" in reported.text


def test_an_application_going_degraded_fails_the_step_and_names_the_app_and_its_message(
    cluster: Cluster, sim: SimCluster
) -> None:
    job = AppHealthJob()
    progress = job.plan(cluster, {}, now=T0)
    sim.control.inject_fault(DEGRADE_SHOP)
    tick = job.tick(cluster, progress, now=T0 + timedelta(seconds=15))
    assert (tick.done, tick.ok) == (True, False)
    assert tick.detail == "app-health: 1 app(s) unhealthy: Application argocd/shop"
    failed = next(p for p in tick.posts if p.key.startswith("app-health-failed:"))
    assert "• Application argocd/shop: Degraded/Synced — Deployment shop/web: Progress deadline exceeded" in (
        failed.text
    )
    # legacy was Degraded before: it is not among the failures.
    assert "legacy" not in failed.text


def test_a_flux_object_not_ready_fails_and_one_still_reconciling_fails_only_at_the_timeout(
    cluster: Cluster, sim: SimCluster
) -> None:
    job = AppHealthJob()
    progress = job.plan(cluster, {"namespaces": "flux-system,cache", "timeout": "5m"}, now=T0)
    assert progress["baseline"] == {}
    fid = sim.control.inject_fault(
        {"type": "app_status", "object": {"kind": "Kustomization", "namespace": "flux-system", "name": "apps"},
         "ready": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}
    )  # fmt: skip
    waiting = job.tick(cluster, progress, now=T0 + timedelta(minutes=1))
    assert waiting.done is False
    assert waiting.card == (
        "Waiting on evidence: Apps: 1/2 healthy · 0 unhealthy at the baseline",
        "waiting for Kustomization flux-system/apps",
    )
    late = job.tick(cluster, waiting.progress, now=T0 + timedelta(minutes=5))
    assert (late.done, late.ok) == (True, False)
    assert late.detail == "app-health: 1 app(s) unhealthy after 5m: Kustomization flux-system/apps"
    sim.control.clear_fault(fid)
    sim.control.inject_fault(
        {"type": "app_status", "object": {"kind": "HelmRelease", "namespace": "cache", "name": "redis"},
         "ready": "False", "reason": "UpgradeFailed", "message": "Helm upgrade failed: timed out"}
    )  # fmt: skip
    failed = job.tick(cluster, progress, now=T0 + timedelta(minutes=1))
    assert (failed.done, failed.ok) == (True, False)
    assert (
        "• HelmRelease cache/redis: Ready=False UpgradeFailed — Helm upgrade failed: timed out"
        in failed.posts[-1].text
    )


def test_an_unreachable_api_server_is_inconclusive_and_only_people_waive_it(
    cluster: Cluster, sim: SimCluster
) -> None:
    job = AppHealthJob()
    progress = job.plan(cluster, {}, now=T0)
    sim.control.set_transport(error_rate=1.0, error_status=503, path_prefix="/apis/argoproj.io")
    asked = job.tick(cluster, progress, now=T0 + timedelta(seconds=15))
    assert asked.done is False
    assert asked.choice is not None
    assert asked.choice.key == f"{PAUSE_KIND}:app-health:1"
    assert asked.choice.question.startswith("App health is Inconclusive: applications.argoproj.io: ")
    assert [o.id for o in asked.choice.options] == ["wait", "waive", "abort"]
    assert asked.card[0].startswith("Waiting on evidence: app health — ")
    waived = job.tick(
        cluster,
        asked.progress,
        now=T0 + timedelta(minutes=1),
        decision=Decision(
            choice_key=asked.choice.key, option="waive", by="U1", reason="Argo CD is being upgraded"
        ),
    )
    assert (waived.done, waived.ok) == (True, True)
    assert waived.audit == (("evidence:waived", "app-health: waived by <@U1> (Argo CD is being upgraded)"),)


def test_a_cluster_with_no_gitops_objects_is_inconclusive_never_a_pass(
    sim_small: SimCluster, tmp_path: Path
) -> None:
    kubeconfig = sim_small.write_kubeconfig(tmp_path / "small")
    with contextlib.closing(
        Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    ) as small:
        job = AppHealthJob()
        progress = job.plan(small, {}, now=T0)
        asked = job.tick(small, progress, now=T0)
    assert asked.choice is not None
    assert "serves no Argo CD Application nor Flux Kustomization/HelmRelease" in asked.choice.question


def test_an_app_still_progressing_at_the_baseline_must_still_end_healthy(
    cluster: Cluster, sim: SimCluster
) -> None:
    sim.control.inject_fault(
        {"type": "app_status", "object": {"kind": "Application", "namespace": "argocd", "name": "shop"},
         "health": "Progressing"}
    )  # fmt: skip
    job = AppHealthJob()
    progress = job.plan(cluster, {}, now=T0)
    assert list(progress["baseline"]) == ["Application argocd/legacy"]
    waiting = job.tick(cluster, progress, now=T0 + timedelta(seconds=15))
    assert waiting.done is False
    sim.control.inject_fault(DEGRADE_SHOP)
    failed = job.tick(cluster, waiting.progress, now=T0 + timedelta(seconds=30))
    assert (failed.done, failed.ok) == (True, False)
    assert failed.detail == "app-health: 1 app(s) unhealthy: Application argocd/shop"


def test_in_the_background_of_a_drain_an_app_going_degraded_fails_and_one_degraded_before_does_not(
    sim: SimCluster, cluster: Cluster
) -> None:
    """`background: [app-health]` on a disruptive step: checked before each node; an app that
    goes Degraded during the drain stops it (named, with its message), the one Degraded at the
    baseline does not, and an API server that cannot be read is Inconclusive."""
    from bot.core.jobs.alerts import Evidence
    from bot.core.jobs.background import AppHealthCheck, default_checks

    assert isinstance(default_checks(lambda: Evidence())["app-health"], AppHealthCheck)
    check = AppHealthCheck()
    state = check.start(cluster, {}, now=T0)
    assert list(state["baseline"]) == ["Application argocd/legacy"]
    ok = check.poll(cluster, state, now=T0 + timedelta(seconds=15))
    assert (ok.verdict, ok.line) == ("ok", "Apps: 3/4 healthy · 1 unhealthy at the baseline")
    sim.control.inject_fault(DEGRADE_SHOP)
    failed = check.poll(cluster, ok.state, now=T0 + timedelta(seconds=30))
    assert failed.verdict == "failed"
    assert failed.reason == (
        "app-health: Application argocd/shop: Degraded/Synced — Deployment shop/web: Progress deadline exceeded"
    )
    gone = check.poll(cluster, {**ok.state, "namespaces": ["nowhere"]}, now=T0 + timedelta(seconds=45))
    assert gone.verdict == "inconclusive"
    assert "no Argo CD Application nor Flux object in nowhere" in gone.reason


def test_the_runs_recorded_baseline_is_used_so_an_app_broken_after_it_is_not_excused(
    sim: SimCluster, cluster: Cluster
) -> None:
    """The run's snapshot recorded the apps unhealthy when the run began (`app_scope`,
    `unhealthy_now`): a step planned after an earlier step broke `shop` fails on it, the step's
    own reading would have excused it; the recorded apps outside the check's view are not named,
    and the background check uses the same recorded set."""
    from bot.core.evidence.baseline import BASELINE_ARG, take_baseline
    from bot.core.jobs.apphealth import app_scope, unhealthy_now
    from bot.core.jobs.background import AppHealthCheck
    from bot.records import ActionCall

    calls = [
        ActionCall(name="snapshot", args={"label": "pre"}),
        ActionCall(name="app-health", args={"namespaces": "argocd"}),
        ActionCall(name="app-health", args={"namespaces": "flux-system,argocd"}),
    ]
    assert app_scope(calls) == ["argocd", "flux-system"]
    assert app_scope([*calls, ActionCall(name="app-health", args={})]) == []
    assert app_scope(calls[:1]) is None
    body = take_baseline(
        alerts=None, metrics=None, queries=[], now=T0, apps=lambda: unhealthy_now(cluster, ["argocd"])
    )
    assert body["apps"] == {
        "Application argocd/legacy": "Degraded/Synced — Deployment legacy/batch: Progress deadline exceeded"
    }
    body["apps"]["Application elsewhere/old"] = "Missing/OutOfSync"  # outside the check's namespaces
    sim.control.inject_fault(DEGRADE_SHOP)  # an earlier step of the run broke it
    args = {"namespaces": "argocd", "timeout": "10m", BASELINE_ARG: json.dumps(body)}
    job = AppHealthJob()
    progress = job.plan(cluster, args, now=T0 + timedelta(minutes=20))
    assert progress["baseline_from"] == "2026-11-29T14:02:00Z"
    tick = job.tick(cluster, progress, now=T0 + timedelta(minutes=21))
    assert (tick.done, tick.ok) == (True, False)
    assert tick.detail == "app-health: 1 app(s) unhealthy: Application argocd/shop"
    reported = next(p for p in tick.posts if p.key.startswith("app-health-baseline:"))
    assert reported.text.startswith(
        "app-health: already unhealthy at the baseline (the run's snapshot at 14:02 UTC; reported, not blocking):"
    )
    assert "elsewhere/old" not in reported.text
    background = AppHealthCheck()
    state = background.start(cluster, args, now=T0 + timedelta(minutes=20))
    failed = background.poll(cluster, state, now=T0 + timedelta(minutes=21))
    assert failed.verdict == "failed"
    assert "Application argocd/shop" in failed.reason
    assert failed.line == "Apps: 0/2 healthy · 1 unhealthy at the baseline"
