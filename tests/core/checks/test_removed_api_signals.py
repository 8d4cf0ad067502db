"""The cluster signals of the removed-API check, on data: the apiserver metric, last-applied and
managedFields of live objects, and Helm v3 release Secrets."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from bot.core.checks.apis import (
    API_DEPRECATED,
    API_REMOVED,
    API_UNREADABLE,
    LAST_APPLIED,
    helm_findings,
    metric_findings,
    object_findings,
    process_start,
)
from bot.core.checks.findings import RECOMMENDED, REQUIRED

METRICS = """\
# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="policy",removed_release="1.25",resource="poddisruptionbudgets",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs",subresource="status",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="autoscaling",removed_release="1.26",resource="horizontalpodautoscalers",subresource="",version="v2beta2"} 1
apiserver_requested_deprecated_apis{group="",removed_release="",resource="componentstatuses",subresource="",version="v1"} 1
apiserver_requested_deprecated_apis{group="example.com",removed_release="1.30",resource="widgets",subresource="",version="v1alpha1"} 0
apiserver_requested_deprecated_apis_total_not_this{group="x"} 1
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
process_start_time_seconds 1.7e+09
"""


def test_the_metric_names_each_called_api_with_its_removal_and_how_old_the_count_is() -> None:
    findings = metric_findings(METRICS, "1.25.16", age="3h")
    by_title = {f.title: f for f in findings}
    pdb = by_title["policy/v1beta1 PodDisruptionBudget: removed in 1.25; use policy/v1 PodDisruptionBudget"]
    assert pdb.severity == REQUIRED
    assert pdb.objects == ("requests to poddisruptionbudgets.v1beta1.policy (apiserver metric)",)
    assert "counted since the apiserver started 3h ago" in pdb.source
    assert "reset when it restarts" in pdb.source
    cron = by_title["batch/v1beta1 CronJob: removed in 1.25; use batch/v1 CronJob"]
    assert cron.objects == ("requests to cronjobs.v1beta1.batch/status (apiserver metric)",)
    hpa = next(f for f in findings if f.title.startswith("autoscaling/v2beta2"))
    assert hpa.id == API_DEPRECATED
    assert hpa.severity == RECOMMENDED
    assert "unavailable from 1.26" in hpa.title
    assert "removed" not in hpa.title
    # Deprecated with no removal planned: the metric's empty removed_release.
    cs = next(f for f in findings if f.title.startswith("v1 ComponentStatus"))
    assert cs.id == API_DEPRECATED
    assert "no release announced" in cs.title
    # A zero sample was never requested; another metric with the same prefix is not this one.
    assert len(findings) == 4
    assert process_start(METRICS) == 1.7e9


def test_the_metric_judges_each_api_against_the_target() -> None:
    at_24 = metric_findings(METRICS, "1.24")
    assert {f.id for f in at_24} == {API_DEPRECATED}
    at_26 = metric_findings(METRICS, "1.26")
    assert [f.title.split(":")[0] for f in at_26 if f.id == API_REMOVED] == [
        "autoscaling/v2beta2 HorizontalPodAutoscaler",
        "batch/v1beta1 CronJob",
        "policy/v1beta1 PodDisruptionBudget",
    ]
    # A deprecated API the data does not know keeps the metric's own removal release.
    custom = (
        'apiserver_requested_deprecated_apis{group="example.com",removed_release="1.30",'
        'resource="widgets",subresource="",version="v1alpha1"} 1\n'
    )
    assert metric_findings(custom, "1.29")[0].id == API_DEPRECATED
    [removed] = metric_findings(custom, "1.30")
    assert removed.title.startswith("example.com/v1alpha1 widgets: removed in 1.30")


def _obj(kind: str, name: str, namespace: str = "", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "x", "kind": kind, "metadata": {"name": name, "namespace": namespace, **meta}}


def test_last_applied_and_managed_fields_each_name_the_object_and_the_signal() -> None:
    applied = json.dumps({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {}})
    objects = [
        _obj("PodDisruptionBudget", "api", "shop", annotations={LAST_APPLIED: applied, "other": "x"}),
        _obj(
            "HorizontalPodAutoscaler",
            "web",
            "shop",
            managedFields=[
                {"manager": "argocd-controller", "operation": "Apply", "apiVersion": "autoscaling/v2beta1"},
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "autoscaling/v2",
                    "subresource": "status",
                },
            ],
        ),
        _obj(
            "ClusterRole",
            "reader",
            managedFields=[
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "rbac.authorization.k8s.io/v1beta1",
                }
            ],
        ),
        _obj(
            "Deployment",
            "fine",
            "shop",
            annotations={LAST_APPLIED: '{"apiVersion":"apps/v1","kind":"Deployment"}'},
        ),
        _obj("Deployment", "garbled", "shop", annotations={LAST_APPLIED: "{not json"}),
    ]
    findings = object_findings(objects, "1.25")
    assert {f.title.split(";")[0]: f.objects for f in findings} == {
        "policy/v1beta1 PodDisruptionBudget: removed in 1.25": (
            "PodDisruptionBudget shop/api (last-applied-configuration)",
        ),
        "autoscaling/v2beta1 HorizontalPodAutoscaler: removed in 1.25": (
            "HorizontalPodAutoscaler shop/web (managedFields: argocd-controller Apply)",
        ),
        "rbac.authorization.k8s.io/v1beta1 ClusterRole: removed in 1.22": (
            "ClusterRole reader (managedFields: kubectl Update)",
        ),
    }
    assert all(f.severity == REQUIRED for f in findings)
    hpa = next(f for f in findings if "HorizontalPodAutoscaler" in f.title)
    assert "server-side apply" in hpa.source
    assert "Argo CD" in hpa.fix


def _release(
    name: str,
    namespace: str,
    revision: int,
    manifest: str,
    *,
    status: str = "deployed",
    compress: bool = True,
) -> dict[str, Any]:
    body = json.dumps(
        {"name": name, "namespace": namespace, "version": revision, "manifest": manifest}
    ).encode()
    helm = base64.b64encode(gzip.compress(body) if compress else body)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {
            "name": f"sh.helm.release.v1.{name}.v{revision}",
            "namespace": namespace,
            "labels": {"name": name, "owner": "helm", "status": status, "version": str(revision)},
        },
        "data": {"release": base64.b64encode(helm).decode()},
    }


OLD = """\
---
# Source: shop/templates/ingress.yaml
apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata:
  name: web
---
# Source: shop/templates/pdb.yaml
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata:
  name: web
"""
NEW = OLD.replace("networking.k8s.io/v1beta1", "networking.k8s.io/v1")


def test_helm_releases_are_read_at_their_latest_revision_with_each_template() -> None:
    secrets = [
        _release("shop", "apps", 1, OLD, status="superseded"),
        _release("shop", "apps", 2, NEW),
        _release("legacy", "apps", 7, OLD, compress=False),  # not gzipped: still read
        _release("gone", "apps", 3, OLD, status="uninstalled"),
        {"type": "Opaque", "metadata": {"name": "db", "namespace": "apps"}, "data": {"release": "x"}},
    ]
    findings = helm_findings(secrets, "1.25")
    by_title = {f.title.split(";")[0]: f.objects for f in findings}
    assert by_title == {
        "networking.k8s.io/v1beta1 Ingress: removed in 1.22": (
            "Helm release apps/legacy revision 7: Ingress web, shop/templates/ingress.yaml",
        ),
        "policy/v1beta1 PodDisruptionBudget: removed in 1.25": (
            "Helm release apps/legacy revision 7: PodDisruptionBudget web, shop/templates/pdb.yaml",
            "Helm release apps/shop revision 2: PodDisruptionBudget web, shop/templates/pdb.yaml",
        ),
    }
    assert all("helm-mapkubeapis" in f.fix for f in findings)


def test_an_unreadable_release_record_is_named_not_skipped() -> None:
    broken = _release("shop", "apps", 4, OLD)
    broken["data"]["release"] = base64.b64encode(b"!!not base64!!").decode()
    [finding] = helm_findings([broken], "1.25")
    assert finding.id == API_UNREADABLE
    assert finding.objects[0].startswith("Helm release apps/shop revision 4: release record not readable")


def test_a_deprecated_finding_never_says_removed_whatever_the_signal() -> None:
    applied = json.dumps({"apiVersion": "autoscaling/v2beta2", "kind": "HorizontalPodAutoscaler"})
    manifest = "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\n"
    findings = [
        *object_findings(
            [
                _obj(
                    "HorizontalPodAutoscaler",
                    "web",
                    "shop",
                    annotations={LAST_APPLIED: applied},
                    managedFields=[
                        {"manager": "argocd", "operation": "Apply", "apiVersion": "autoscaling/v2beta2"}
                    ],
                )
            ],
            "1.25",
        ),
        *helm_findings([_release("shop", "apps", 1, manifest)], "1.25"),
        *metric_findings(METRICS, "1.25"),
    ]
    deprecated = [f for f in findings if f.id == API_DEPRECATED]
    assert len(deprecated) == 4  # HPA from objects, from Helm, from the metric; ComponentStatus
    for finding in deprecated:
        for text in (finding.title, finding.why, finding.fix, finding.source, *finding.objects):
            assert "removed" not in text.lower(), text
