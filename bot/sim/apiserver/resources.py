"""The resource types the simulated API server knows, and which group-versions it serves.

A `Kind` is what is stored once (pods, deployments.apps, poddisruptionbudgets.policy); a `Served`
is one group-version through which clients reach it. Deprecated group-versions (policy/v1beta1,
batch/v1beta1, autoscaling/v2beta2, …) are served only when a scenario asks for them and only
while the simulated control plane's version is older than their removal release, the way the real
API server drops them on upgrade. Requests through them carry the `Warning: 299` header.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

#: Fields every kind accepts in a fieldSelector.
META_FIELDS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Kind:
    """One stored resource type."""

    group: str
    resource: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: Subresources served under each version; "status" means spec and status are written separately.
    subresources: tuple[str, ...] = ()
    #: Selectable fields beyond metadata.name/namespace, as dotted paths into the object.
    fields: tuple[str, ...] = ()
    #: Whether spec changes bump metadata.generation (workloads, PDBs, pods).
    generation: bool = False
    #: Kubernetes minor version that introduced the GA version (None = always served).
    introduced: int | None = None
    #: A custom resource of a well-known extension (cert-manager's Certificate): served only when
    #: the scenario lists it under `cluster.custom_resources`, as if its CRD's controller ran.
    extension: bool = False

    @functools.cached_property
    def key(self) -> str:
        """The storage key: `pods`, `deployments.apps` (kept: every write and change reads it)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def selectable(self) -> tuple[str, ...]:
        return META_FIELDS + self.fields


@dataclass(frozen=True)
class Deprecation:
    deprecated_in: str  # "1.21"
    removed_in: str  # "1.25"
    replacement: str  # "policy/v1 PodDisruptionBudget"


@dataclass(frozen=True)
class Served:
    """A Kind as seen through one group-version."""

    kind: Kind
    version: str
    deprecation: Deprecation | None = None
    preferred: bool = True

    @property
    def group(self) -> str:
        return self.kind.group

    @property
    def group_version(self) -> str:
        return f"{self.kind.group}/{self.version}" if self.kind.group else self.version

    @property
    def type_prefix(self) -> bytes:
        """The JSON head that turns a stored body (`{"metadata":…}`) into a full object of this version."""
        return f'{{"kind":"{self.kind.kind}","apiVersion":"{self.group_version}",'.encode()

    def warning(self) -> str | None:
        d = self.deprecation
        if d is None:
            return None
        return (
            f"{self.group_version} {self.kind.kind} is deprecated in v{d.deprecated_in}+, "
            f"unavailable in v{d.removed_in}+; use {d.replacement}"
        )


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)

KINDS: tuple[Kind, ...] = (
    Kind(
        "",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status", "finalize"),
        fields=("status.phase",),
    ),
    Kind(
        "",
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
        fields=("spec.unschedulable",),
    ),
    Kind(
        "",
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "log", "eviction", "binding"),
        fields=_POD_FIELDS,
        generation=True,
    ),
    Kind("", "events", "Event", short_names=("ev",), fields=_EVENT_FIELDS),
    Kind("", "services", "Service", short_names=("svc",), categories=("all",), subresources=("status",)),
    Kind("", "endpoints", "Endpoints", short_names=("ep",)),
    Kind("", "configmaps", "ConfigMap", short_names=("cm",)),
    Kind("", "secrets", "Secret", fields=("type",)),
    Kind("", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    Kind(
        "", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), subresources=("status",)
    ),
    Kind(
        "",
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        short_names=("pv",),
        subresources=("status",),
    ),
    Kind(
        "apps",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
        generation=True,
    ),
    Kind(
        "apps",
        "replicasets",
        "ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
        fields=("status.replicas",),
        generation=True,
    ),
    Kind(
        "apps",
        "daemonsets",
        "DaemonSet",
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
        generation=True,
    ),
    Kind(
        "apps",
        "statefulsets",
        "StatefulSet",
        short_names=("sts",),
        categories=("all",),
        subresources=("status", "scale"),
        generation=True,
    ),
    Kind("apps", "controllerrevisions", "ControllerRevision"),
    Kind(
        "batch",
        "jobs",
        "Job",
        categories=("all",),
        subresources=("status",),
        fields=("status.successful",),
        generation=True,
    ),
    Kind(
        "batch",
        "cronjobs",
        "CronJob",
        short_names=("cj",),
        categories=("all",),
        subresources=("status",),
        generation=True,
    ),
    Kind(
        "policy",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        subresources=("status",),
        generation=True,
    ),
    Kind("coordination.k8s.io", "leases", "Lease"),
    Kind(
        "autoscaling",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
        categories=("all",),
        subresources=("status",),
        generation=True,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
        generation=True,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
        generation=True,
    ),
    Kind(
        "networking.k8s.io",
        "ingresses",
        "Ingress",
        short_names=("ing",),
        subresources=("status",),
        generation=True,
    ),
    Kind(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
        generation=True,
    ),
    Kind(
        "cert-manager.io",
        "certificates",
        "Certificate",
        short_names=("cert", "certs"),
        categories=("cert-manager",),
        subresources=("status",),
        generation=True,
        extension=True,
    ),
    # GitOps controllers' objects (issue 39 item 8, issue 40 item 7): served like cert-manager's
    # Certificates, only when a scenario lists them; no controller runs, so their status is what
    # the scenario, a fault (`app_status`) or a test writes through the status subresource.
    Kind(
        "argoproj.io",
        "applications",
        "Application",
        short_names=("app", "apps"),
        # Argo CD's CRD declares no status subresource (`subresources: {}`): its controller writes
        # status with the object, and so must a test.
        generation=True,
        extension=True,
    ),
    Kind(
        "kustomize.toolkit.fluxcd.io",
        "kustomizations",
        "Kustomization",
        short_names=("ks",),
        categories=("all", "fluxcd", "fluxcd-appliers"),
        subresources=("status",),
        generation=True,
        extension=True,
    ),
    Kind(
        "helm.toolkit.fluxcd.io",
        "helmreleases",
        "HelmRelease",
        short_names=("hr",),
        categories=("all", "fluxcd", "fluxcd-appliers"),
        subresources=("status",),
        generation=True,
        extension=True,
    ),
    Kind(
        "resource.k8s.io",
        "resourceslices",
        "ResourceSlice",
        namespaced=False,
        fields=("spec.nodeName", "spec.driver"),
        introduced=34,
    ),
)

KINDS_BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS}

#: The GA version each group serves (core is "v1"); autoscaling also serves v1 for HPAs.
GA_VERSIONS: dict[str, tuple[str, ...]] = {
    "": ("v1",),
    "apps": ("v1",),
    "batch": ("v1",),
    "policy": ("v1",),
    "coordination.k8s.io": ("v1",),
    "autoscaling": ("v2", "v1"),
    "admissionregistration.k8s.io": ("v1",),
    "networking.k8s.io": ("v1",),
    "apiextensions.k8s.io": ("v1",),
    "resource.k8s.io": ("v1",),
    "cert-manager.io": ("v1",),
    "argoproj.io": ("v1alpha1",),
    "kustomize.toolkit.fluxcd.io": ("v1",),
    "helm.toolkit.fluxcd.io": ("v2",),
}
#: The extension kinds a scenario may serve (`cluster.custom_resources`), by their key.
EXTENSIONS: tuple[str, ...] = tuple(k.key for k in KINDS if k.extension)


@dataclass(frozen=True)
class DeprecatedVersion:
    group: str
    version: str
    resources: tuple[str, ...]
    deprecation: Deprecation
    #: First minor release that served it (so a 1.19 scenario cannot ask for autoscaling/v2beta2 early).
    introduced: int = 0

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KNOWN_DEPRECATED: tuple[DeprecatedVersion, ...] = (
    DeprecatedVersion(
        "policy",
        "v1beta1",
        ("poddisruptionbudgets",),
        Deprecation("1.21", "1.25", "policy/v1 PodDisruptionBudget"),
    ),
    DeprecatedVersion("batch", "v1beta1", ("cronjobs",), Deprecation("1.21", "1.25", "batch/v1 CronJob")),
    DeprecatedVersion(
        "autoscaling",
        "v2beta1",
        ("horizontalpodautoscalers",),
        Deprecation("1.22", "1.25", "autoscaling/v2 HorizontalPodAutoscaler"),
    ),
    DeprecatedVersion(
        "autoscaling",
        "v2beta2",
        ("horizontalpodautoscalers",),
        Deprecation("1.23", "1.26", "autoscaling/v2 HorizontalPodAutoscaler"),
        introduced=12,
    ),
    DeprecatedVersion(
        "networking.k8s.io",
        "v1beta1",
        ("ingresses",),
        Deprecation("1.19", "1.22", "networking.k8s.io/v1 Ingress"),
    ),
    DeprecatedVersion(
        "admissionregistration.k8s.io",
        "v1beta1",
        ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
        Deprecation("1.16", "1.22", "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration"),
    ),
)

KNOWN_DEPRECATED_BY_GV: dict[str, DeprecatedVersion] = {d.group_version: d for d in KNOWN_DEPRECATED}


def minor_of(version: str) -> int:
    """`v1.24.17-eks-…` or `1.24` → 24."""
    text = version.lstrip("v")
    parts = text.split(".")
    if len(parts) < 2:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    digits = "".join(ch for ch in parts[1] if ch.isdigit())
    return int(digits)


def release_minor(release: str) -> int:
    return int(release.split(".")[1])


@dataclass
class Catalog:
    """What one simulated API server serves at its current version."""

    version: str
    deprecated: tuple[str, ...] = ()
    #: The extension kinds served (`EXTENSIONS`), e.g. "certificates.cert-manager.io".
    custom: tuple[str, ...] = ()
    served: list[Served] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.custom) - set(EXTENSIONS))
        if unknown:
            raise ValueError(f"unknown custom resource {', '.join(unknown)}; known: {', '.join(EXTENSIONS)}")
        self.rebuild()

    def rebuild(self) -> None:
        minor = minor_of(self.version)
        served: list[Served] = []
        for kind in KINDS:
            if kind.introduced is not None and minor < kind.introduced:
                continue
            if kind.extension and kind.key not in self.custom:
                continue
            versions = GA_VERSIONS[kind.group]
            if kind.group == "autoscaling":
                served.extend(Served(kind, v, preferred=(i == 0)) for i, v in enumerate(versions))
            else:
                served.append(Served(kind, versions[0]))
        for gv in self.deprecated:
            dep = KNOWN_DEPRECATED_BY_GV.get(gv)
            if dep is None:
                raise ValueError(
                    f"unknown deprecated API {gv!r}; known: {', '.join(sorted(KNOWN_DEPRECATED_BY_GV))}"
                )
            if minor >= release_minor(dep.deprecation.removed_in) or minor < dep.introduced:
                continue
            for resource in dep.resources:
                kind = KINDS_BY_KEY[f"{resource}.{dep.group}" if dep.group else resource]
                served.append(Served(kind, dep.version, deprecation=dep.deprecation, preferred=False))
        self.served = served

    def set_version(self, version: str) -> None:
        self.version = version
        self.rebuild()

    def lookup(self, group: str, version: str, resource: str) -> Served | None:
        for s in self.served:
            if s.kind.group == group and s.version == version and s.kind.resource == resource:
                return s
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Group → versions served, the preferred (GA) version first."""
        out: dict[str, list[str]] = {}
        for s in sorted(self.served, key=lambda s: (not s.preferred, s.version)):
            versions = out.setdefault(s.kind.group, [])
            if s.version not in versions:
                versions.append(s.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[Served]:
        return [s for s in self.served if s.kind.group == group and s.version == version]

    def preferred(self, kind_key: str) -> Served:
        for s in self.served:
            if s.kind.key == kind_key and s.preferred:
                return s
        raise KeyError(kind_key)

    def by_kind(self, api_version: str, kind: str) -> Served | None:
        """The served view for a manifest's apiVersion and kind (scenario files, creates)."""
        group, _, version = api_version.rpartition("/")
        for s in self.served:
            if s.kind.group == group and s.version == version and s.kind.kind == kind:
                return s
        return None


def field_value(obj: dict[str, Any], path: str) -> str:
    """A selectable field's value as the API server compares it: strings, `true`/`false`, numbers."""
    if path == "source":
        # An Event's `source` field selector compares the reporting component.
        src = obj.get("source") or {}
        return str(src.get("component", "")) if isinstance(src, dict) else ""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            cur = None
            break
        cur = cur.get(part)
    if cur is None:
        return "false" if path in ("spec.unschedulable", "spec.hostNetwork") else ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)
