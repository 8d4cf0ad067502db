"""Who really owns an object (issue 40 item 7): a GitOps controller (Flux, Argo CD), a Helm
release, or an EKS managed add-on — read before any Fix… button or gated action changes it, so
the gate can say what will happen to the change and offer the owner's path instead.

Pure: no I/O. `controller_chain` walks `ownerReferences` (the `controller: true` one) up to the
object nobody controls, through a getter the caller gives (a pod → its ReplicaSet → its
Deployment); `owner_of` then reads that object's marks, the ones each tool writes itself:

| owner | mark | what a change meets |
|---|---|---|
| Flux Kustomization | labels `kustomize.toolkit.fluxcd.io/name` and `/namespace` | reverted at the next reconcile: `flux-suspend` first |
| Flux HelmRelease | labels `helm.toolkit.fluxcd.io/name` and `/namespace` | reverted at the next reconcile (drift detection or upgrade): `flux-suspend` first |
| Argo CD Application | label `argocd.argoproj.io/instance`, or annotation `argocd.argoproj.io/tracking-id` (`APP:GROUP/KIND:NS/NAME`) | reverted by self-heal, or shown OutOfSync and overwritten at the next sync: `argocd-pause` first |
| Helm release | label `app.kubernetes.io/managed-by: Helm` and annotation `meta.helm.sh/release-name` | overwritten at the next `helm upgrade`: change the chart's values |
| EKS managed add-on | a `managedFields` entry applied by field manager `eks` (EKS applies its add-ons server-side) on kube-proxy, coredns or aws-node | overwritten at the next add-on update: `eks-update-addon` instead of `set-image` |

A Flux HelmRelease's objects also carry Helm's marks: Flux is named, since it is the one that
reverts. The order of the table is the order of precedence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FLUX_KUSTOMIZATION = "flux-kustomization"
FLUX_HELMRELEASE = "flux-helmrelease"
ARGOCD = "argocd"
HELM = "helm"
EKS_ADDON = "eks-addon"

#: How deep `top_controller` follows ownerReferences (a pod → ReplicaSet → Deployment is 2; a
#: cycle or a very long chain stops here rather than looping).
MAX_DEPTH = 8

#: The EKS add-ons by the name of the object they install in kube-system.
EKS_ADDONS = {"kube-proxy": "kube-proxy", "coredns": "coredns", "aws-node": "vpc-cni"}

ARGOCD_INSTANCE = "argocd.argoproj.io/instance"
ARGOCD_TRACKING = "argocd.argoproj.io/tracking-id"

#: (apiVersion, kind, namespace, name) → the object, or None when it is gone or cannot be read.
Getter = Callable[[str, str, str, str], Mapping[str, Any] | None]


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Who owns `target` (the object a change lands on, after the ownerReferences walk)."""

    #: One of FLUX_KUSTOMIZATION, FLUX_HELMRELEASE, ARGOCD, HELM, EKS_ADDON.
    kind: str
    #: The owner's namespace ("" when the mark does not say: an Argo CD Application named only
    #: by its instance label) and name (the add-on's name for EKS).
    namespace: str
    name: str
    #: `deployment/apps/podinfo`: the object whose marks were read.
    target: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def title(self) -> str:
        """ "Flux Kustomization flux-system/apps"."""
        return {
            FLUX_KUSTOMIZATION: "Flux Kustomization",
            FLUX_HELMRELEASE: "Flux HelmRelease",
            ARGOCD: "Argo CD Application",
            HELM: "Helm release",
            EKS_ADDON: "EKS managed add-on",
        }[self.kind] + f" {self.ref}"

    @property
    def gitops(self) -> bool:
        """A controller that puts the change back by itself."""
        return self.kind in (FLUX_KUSTOMIZATION, FLUX_HELMRELEASE, ARGOCD)

    @property
    def consequence(self) -> str:
        """What will happen to a change made behind the owner's back, in one sentence."""
        if self.kind in (FLUX_KUSTOMIZATION, FLUX_HELMRELEASE):
            return f"{self.title} will revert this change at its next reconcile"
        if self.kind == ARGOCD:
            return f"{self.title} will revert this change (self-heal) or overwrite it at its next sync"
        if self.kind == HELM:
            return f"the next `helm upgrade` of {self.title} will overwrite this change"
        return f"the next update of the {self.title} will overwrite this change"

    def path_on(self, cluster: str) -> str:
        """The owner's path: the gated action (or the step) that changes it the owner's way, each
        command its own code span, whole as people type it (`action`: on `cluster`, the name of the
        configured cluster the object was read from — with several configured, a command without
        it only asks "which cluster?"), the words outside them."""
        if self.kind in (FLUX_KUSTOMIZATION, FLUX_HELMRELEASE):
            obj = f"object={'kustomization' if self.kind == FLUX_KUSTOMIZATION else 'helmrelease'}/{self.ref}"
            return (
                f"{action(f'flux-suspend {obj}', cluster=cluster)} first, "
                f"then {action(f'flux-resume {obj}', cluster=cluster)} once the fix is in Git"
            )
        if self.kind == ARGOCD:
            # The instance label names the Application only; such Applications live in Argo CD's
            # own namespace, `argocd` in its install manifests.
            app = f"application={self.ref if self.namespace else f'argocd/{self.name}'}"
            where = "" if self.namespace else " (Argo CD's namespace, if not argocd)"
            return (
                f"{action(f'argocd-pause {app}', cluster=cluster)} first{where}, "
                f"then {action(f'argocd-resume {app}', cluster=cluster)} once the fix is in Git"
            )
        if self.kind == HELM:
            return f"change the values of release {self.ref} and run `helm upgrade`"
        return f"{action(f'eks-update-addon addon={self.name} version=…', cluster=cluster)} instead of `set-image`"

    def as_dict(self, cluster: str = "") -> dict[str, str]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "target": self.target,
            "title": self.title,
            "consequence": self.consequence,
            "path": self.path_on(cluster),
        }


#: Where a copied `/upgrade action` says why: the person replaces it, and the command refuses it
#: unchanged, saying so (`commands._runs.reason`), rather than putting "…" on record as a reason.
REASON_PLACEHOLDER = "…"


def action(command: str, *, cluster: str = "", reason: str = REASON_PLACEHOLDER) -> str:
    """A gated action as people type it, in a code span of its own so it can be copied whole, and
    complete: `/upgrade action` refuses one without `--reason`, and one without `--cluster` where
    several clusters are configured. `--cluster` names `cluster` when it is known (a run's: it is
    accepted with one cluster configured as well); `--reason "…"` is the placeholder for why,
    unless the bot knows it (`reason`: a check's own words for a node it found cordoned)."""
    where = f" --cluster {cluster}" if cluster else ""
    return f'`/upgrade action {command}{where} --reason "{reason}"`'


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind", "")).lower() or "object"
    ns = str(meta.get("namespace", ""))
    return f"{kind}/{ns}/{meta.get('name', '')}" if ns else f"{kind}/{meta.get('name', '')}"


def controller_chain(obj: Mapping[str, Any], get: Getter) -> list[Mapping[str, Any]]:
    """`obj` and the objects above it through their `controller: true` ownerReferences, the top
    controller last; the walk stops at an object that cannot be read, at one seen before (a
    cycle) and after `MAX_DEPTH` steps."""
    chain = [obj]
    seen = {_identity(obj)}
    for _ in range(MAX_DEPTH):
        meta = chain[-1].get("metadata") or {}
        ref = next(
            (r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping) and r.get("controller")),
            None,
        )
        if ref is None:
            break
        parent = get(
            str(ref.get("apiVersion", "")),
            str(ref.get("kind", "")),
            str(meta.get("namespace", "")),
            str(ref.get("name", "")),
        )
        if parent is None or _identity(parent) in seen:
            break
        seen.add(_identity(parent))
        chain.append(parent)
    return chain


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def owner_of(obj: Mapping[str, Any]) -> Owner | None:
    """Who owns `obj` by its own marks (see the module docstring); None for nobody known."""
    meta = obj.get("metadata") or {}
    labels: Mapping[str, Any] = meta.get("labels") or {}
    annotations: Mapping[str, Any] = meta.get("annotations") or {}
    target = describe(obj)
    for kind, prefix in (
        (FLUX_KUSTOMIZATION, "kustomize.toolkit.fluxcd.io"),
        (FLUX_HELMRELEASE, "helm.toolkit.fluxcd.io"),
    ):
        name = str(labels.get(f"{prefix}/name") or "")
        if name:
            return Owner(
                kind=kind, namespace=str(labels.get(f"{prefix}/namespace") or ""), name=name, target=target
            )
    tracking = str(annotations.get(ARGOCD_TRACKING) or "")
    instance = str(labels.get(ARGOCD_INSTANCE) or "")
    if tracking or instance:
        # The tracking id's app part is `NAMESPACE_NAME` when Applications live outside Argo CD's
        # own namespace ("apps in any namespace"), else the bare name.
        app = tracking.split(":", 1)[0] if tracking else instance
        ns, _, name = app.rpartition("_")
        return Owner(kind=ARGOCD, namespace=ns, name=name, target=target)
    addon = EKS_ADDONS.get(str(meta.get("name", "")))
    if addon and str(meta.get("namespace", "")) == "kube-system" and _applied_by_eks(meta):
        return Owner(kind=EKS_ADDON, namespace="", name=addon, target=target)
    if str(labels.get("app.kubernetes.io/managed-by") or "") == "Helm":
        release = str(
            annotations.get("meta.helm.sh/release-name") or labels.get("app.kubernetes.io/instance") or ""
        )
        if release:
            ns = str(annotations.get("meta.helm.sh/release-namespace") or meta.get("namespace") or "")
            return Owner(kind=HELM, namespace=ns, name=release, target=target)
    return None


def _applied_by_eks(meta: Mapping[str, Any]) -> bool:
    return any(
        isinstance(e, Mapping) and e.get("manager") == "eks" and e.get("operation") == "Apply"
        for e in meta.get("managedFields") or []
    )


def find_owner(obj: Mapping[str, Any], get: Getter) -> Owner | None:
    """The owner of `obj`'s top controller; else of the first object below it that has marks (a
    Flux-applied Pod with no controller carries them itself)."""
    for item in reversed(controller_chain(obj, get)):
        owner = owner_of(item)
        if owner is not None:
            return owner
    return None
