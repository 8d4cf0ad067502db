"""Who owns an object (bot/core/kube/owners.py), read from the marks each tool writes itself,
after walking ownerReferences up to the top controller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.kube.owners import (
    ARGOCD,
    EKS_ADDON,
    FLUX_HELMRELEASE,
    FLUX_KUSTOMIZATION,
    HELM,
    find_owner,
    owner_of,
)


def _obj(kind: str, ns: str, name: str, *, labels: Mapping[str, str] | None = None,
         annotations: Mapping[str, str] | None = None, **meta: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "kind": kind,
        "metadata": {"namespace": ns, "name": name, "labels": dict(labels or {}),
                     "annotations": dict(annotations or {}), **meta},
    }  # fmt: skip


def _ref(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": True, "uid": "u"}


def test_a_pod_of_a_flux_applied_deployment_is_owned_by_its_kustomization() -> None:
    deploy = _obj("Deployment", "apps", "podinfo", labels={
        "kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})  # fmt: skip
    rs = _obj("ReplicaSet", "apps", "podinfo-5d9", ownerReferences=[_ref("Deployment", "podinfo")])
    pod = _obj("Pod", "apps", "podinfo-5d9-x", ownerReferences=[_ref("ReplicaSet", "podinfo-5d9")])
    objects = {("ReplicaSet", "podinfo-5d9"): rs, ("Deployment", "podinfo"): deploy}
    owner = find_owner(pod, lambda _v, kind, _ns, name: objects.get((kind, name)))
    assert owner is not None
    assert (owner.kind, owner.ref, owner.target) == (
        FLUX_KUSTOMIZATION,
        "flux-system/apps",
        "deployment/apps/podinfo",
    )
    assert (
        owner.consequence
        == "Flux Kustomization flux-system/apps will revert this change at its next reconcile"
    )
    # Each command its own code span, whole as typed (on the cluster the object was read from:
    # with several configured, one without `--cluster` only asks which); the words between outside.
    assert owner.path_on("prod") == (
        '`/upgrade action flux-suspend object=kustomization/flux-system/apps --cluster prod --reason "…"` first, '
        'then `/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"` '
        "once the fix is in Git"
    )


def test_a_flux_helmrelease_wins_over_the_helm_marks_it_also_writes() -> None:
    owner = owner_of(_obj("Deployment", "cache", "redis",
        labels={"app.kubernetes.io/managed-by": "Helm", "helm.toolkit.fluxcd.io/name": "redis",
                "helm.toolkit.fluxcd.io/namespace": "cache"},
        annotations={"meta.helm.sh/release-name": "redis"}))  # fmt: skip
    assert owner is not None
    assert (owner.kind, owner.ref) == (FLUX_HELMRELEASE, "cache/redis")


def test_argo_cd_by_its_instance_label_or_its_tracking_annotation() -> None:
    by_label = owner_of(_obj("Deployment", "shop", "web", labels={"argocd.argoproj.io/instance": "shop"}))
    assert by_label is not None
    assert (by_label.kind, by_label.ref) == (ARGOCD, "shop")
    by_tracking = owner_of(_obj("Deployment", "shop", "web", annotations={
        "argocd.argoproj.io/tracking-id": "team-a_shop:apps/Deployment:shop/web"}))  # fmt: skip
    assert by_tracking is not None
    assert (by_tracking.namespace, by_tracking.name) == ("team-a", "shop")
    assert "self-heal" in by_tracking.consequence


def test_a_plain_helm_release() -> None:
    owner = owner_of(_obj("Deployment", "monitoring", "grafana", labels={"app.kubernetes.io/managed-by": "Helm"},
                          annotations={"meta.helm.sh/release-name": "grafana",
                                       "meta.helm.sh/release-namespace": "monitoring"}))  # fmt: skip
    assert owner is not None
    assert (owner.kind, owner.ref) == (HELM, "monitoring/grafana")
    assert "helm upgrade" in owner.consequence


def test_kube_proxy_applied_by_eks_is_the_managed_add_on_and_a_self_managed_one_is_nobodys() -> None:
    eks = [{"manager": "eks", "operation": "Apply", "apiVersion": "apps/v1"}]
    managed = owner_of(_obj("DaemonSet", "kube-system", "kube-proxy", managedFields=eks))
    assert managed is not None
    assert (managed.kind, managed.name) == (EKS_ADDON, "kube-proxy")
    assert managed.path_on("prod") == (
        '`/upgrade action eks-update-addon addon=kube-proxy version=… --cluster prod --reason "…"` instead of '
        "`set-image`"
    )
    vpc = owner_of(_obj("DaemonSet", "kube-system", "aws-node", managedFields=eks))
    assert vpc is not None
    assert vpc.name == "vpc-cni"
    kubectl = [{"manager": "kubectl-client-side-apply", "operation": "Update"}]
    assert owner_of(_obj("DaemonSet", "kube-system", "kube-proxy", managedFields=kubectl)) is None


def test_an_owner_chain_that_loops_or_breaks_stops_and_reads_what_it_reached() -> None:
    a = _obj("ReplicaSet", "x", "a", ownerReferences=[_ref("ReplicaSet", "b")])
    b = _obj("ReplicaSet", "x", "b", ownerReferences=[_ref("ReplicaSet", "a")],
             labels={"argocd.argoproj.io/instance": "loop"})  # fmt: skip
    objects = {"a": a, "b": b}
    assert find_owner(a, lambda _v, _k, _ns, name: objects.get(name)) is not None
    orphan = _obj("Pod", "x", "p", ownerReferences=[_ref("ReplicaSet", "gone")], labels={})
    assert find_owner(orphan, lambda *_: None) is None
