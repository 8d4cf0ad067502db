"""The removed-API check on the sim's `eks-nodegroups` (1.24 → 1.25): each signal finds what the
scenario planted, read with the real kubectl and through the bot's kube adapter, and together they
report exactly those objects."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bot.adapters.kube import Cluster
from bot.core.checks.apis import (
    API_DEPRECATED,
    API_REMOVED,
    cluster_api_findings,
    helm_findings,
    metric_findings,
    object_findings,
)
from bot.records import ClusterConfig
from bot.sim import SimCluster

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

PDB = "policy/v1beta1 PodDisruptionBudget: removed in 1.25; use policy/v1 PodDisruptionBudget"
CRON = "batch/v1beta1 CronJob: removed in 1.25; use batch/v1 CronJob"
HPA_V2BETA1 = (
    "autoscaling/v2beta1 HorizontalPodAutoscaler: removed in 1.25; use autoscaling/v2 HorizontalPodAutoscaler"
)
HPA_V2BETA2 = (
    "autoscaling/v2beta2 HorizontalPodAutoscaler: deprecated, still served in 1.25, unavailable from 1.26; "
    "use autoscaling/v2 HorizontalPodAutoscaler"
)


def _items(kubectl: Kubectl, sim: SimCluster, *args: str) -> list[dict[str, object]]:
    # kubectl hides managedFields unless asked.
    result = kubectl(sim, "get", *args, "-o", "json", "--show-managed-fields")
    assert result.returncode == 0, result.stderr
    items: list[dict[str, object]] = json.loads(result.stdout)["items"]
    return items


def test_the_metric_shows_the_in_cluster_callers_of_removed_apis(sim_eks: SimCluster) -> None:
    with urllib.request.urlopen(sim_eks.url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    findings = metric_findings(text, "1.25")
    assert {f.title: f.objects for f in findings} == {
        CRON: ("requests to cronjobs.v1beta1.batch (apiserver metric)",),
        PDB: ("requests to poddisruptionbudgets.v1beta1.policy (apiserver metric)",),
    }


def test_the_metric_is_dated_by_its_apiserver_and_starts_afresh_when_the_control_plane_is_replaced(
    sim_eks: SimCluster, tmp_path: Path
) -> None:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_eks.write_kubeconfig(tmp_path / "kc")))
    try:
        before = cluster_api_findings(cluster, "1.25", now=sim_eks.core.clock.now())
        pdb = next(f for f in before if f.title == PDB)
        # The scenario's cluster is 30 days old: so is the apiserver that has been counting.
        assert "counted since the apiserver started 30d ago" in pdb.source
        sim_eks.control.run_upgrade()
        sim_eks.control.advance("16m")  # the control plane is 1.25 now: a new apiserver process
        after = cluster_api_findings(cluster, "1.25", now=sim_eks.core.clock.now())
    finally:
        cluster.close()
    pdb = next(f for f in after if f.title == PDB)
    # The callers now get 404s, which the metric does not count: only what was applied remains.
    assert not any("apiserver metric" in o for o in pdb.objects)
    assert "PodDisruptionBudget reporting/reporting-api (last-applied-configuration)" in pdb.objects


def test_last_applied_and_managed_fields_name_the_objects_applied_on_old_apis(
    sim_eks: SimCluster, kubectl: Kubectl
) -> None:
    objects = _items(kubectl, sim_eks, "pdb,cronjobs,hpa,deployments", "-A")
    findings = object_findings(objects, "1.25")
    assert {f.title: f.objects for f in findings} == {
        HPA_V2BETA1: (
            "HorizontalPodAutoscaler payments/payments-api (managedFields: argocd-controller Apply)",
        ),
        CRON: ("CronJob reporting/nightly-report (last-applied-configuration)",),
        PDB: ("PodDisruptionBudget reporting/reporting-api (last-applied-configuration)",),
        HPA_V2BETA2: ("HorizontalPodAutoscaler checkout/checkout (last-applied-configuration)",),
    }
    # The managedFields-only object has no last-applied annotation: only that signal sees it.
    hpa = next(
        o
        for o in objects
        if o["metadata"]["name"] == "payments-api" and o["kind"] == "HorizontalPodAutoscaler"
    )  # type: ignore[index]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (
        hpa["metadata"].get("annotations") or {}
    )  # type: ignore[attr-defined]


def test_the_sim_keeps_managed_fields_across_writes_that_leave_them_out(
    sim_eks: SimCluster, kubectl: Kubectl
) -> None:
    result = kubectl(sim_eks, "label", "hpa", "payments-api", "-n", "payments", "team=payments")
    assert result.returncode == 0, result.stderr
    [hpa] = [
        o
        for o in _items(kubectl, sim_eks, "hpa", "-n", "payments")
        if o["metadata"]["name"] == "payments-api"
    ]  # type: ignore[index]
    assert hpa["metadata"]["labels"]["team"] == "payments"  # type: ignore[index]
    assert [e["apiVersion"] for e in hpa["metadata"]["managedFields"]] == ["autoscaling/v2beta1"]  # type: ignore[index]


def test_the_helm_release_names_its_templates_on_removed_apis(sim_eks: SimCluster, kubectl: Kubectl) -> None:
    secrets = _items(kubectl, sim_eks, "secrets", "-A", "-l", "owner=helm")
    findings = helm_findings(secrets, "1.25")
    assert {f.title: f.objects for f in findings} == {
        CRON: (
            "Helm release reporting/reporting revision 3: CronJob nightly-report, reporting/templates/cronjob.yaml",
        ),
        PDB: (
            "Helm release reporting/reporting revision 3: PodDisruptionBudget reporting-api, reporting/templates/pdb.yaml",
        ),
    }


def test_the_cluster_check_reports_exactly_what_was_planted(sim_eks: SimCluster, tmp_path: Path) -> None:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_eks.write_kubeconfig(tmp_path / "kc")))
    try:
        notes: list[str] = []
        findings = cluster_api_findings(cluster, "1.25.16", now=time.time(), notes=notes)
    finally:
        cluster.close()
    assert [(f.id, f.title) for f in findings] == [
        (API_REMOVED, HPA_V2BETA1),
        (API_REMOVED, CRON),
        (API_REMOVED, PDB),
        (API_DEPRECATED, HPA_V2BETA2),
    ]
    by_title = {f.title: f for f in findings}
    assert by_title[PDB].objects == (
        "requests to poddisruptionbudgets.v1beta1.policy (apiserver metric)",
        "PodDisruptionBudget reporting/reporting-api (last-applied-configuration)",
        "Helm release reporting/reporting revision 3: PodDisruptionBudget reporting-api, reporting/templates/pdb.yaml",
    )
    source = by_title[PDB].source
    assert source.index("apiserver metric") < source.index("last-applied") < source.index("Helm")
    assert "reset when it restarts" in source
    assert by_title[HPA_V2BETA1].objects == (
        "HorizontalPodAutoscaler payments/payments-api (managedFields: argocd-controller Apply)",
    )
    assert notes[0].startswith("API data: kubernetes-validate ")
    assert len(notes) == 1, notes  # everything was read
