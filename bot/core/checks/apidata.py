"""Is group/version/kind served in Kubernetes 1.N? The data behind the removed-API check.

Two sources, one answer (`served`):

- **`served_kinds.json`** beside this module: the served group/version/kinds of every Kubernetes
  release from 1.25 on, generated at development time by `scripts/gen_apidata.py` from the JSON
  schemas of PyPI's `kubernetes-validate` (a dev dependency only: its 108 MB of schemas stay out
  of the bot's install). The file records the package and version it came from; it is read once
  per process (about 1 ms). A kind served in 1.N and absent from a later release was removed
  there; the replacement is the best other version of the same group and kind.
- **`REMOVALS`**, a small table for what the schemas cannot say: every removal from 1.16 to 1.25,
  beta and alpha group-versions alike (the data starts at 1.25, so it cannot see what 1.25 itself
  removed, nor tell an alpha gone in 1.22 from one that never existed), each with the release
  that deprecated it and its replacement, after the Kubernetes "Deprecated API Migration Guide"
  and the apiserver's own `deprecated in v1.X+, unavailable in v1.Y+` warnings; and `RENAMED`,
  replacements the data cannot infer (kinds renamed between alpha versions).

"Deprecated" here means: still served, gone in a later release the data or the table knows of,
and a replacement is already served — so the user can act now. Deprecations without a scheduled
removal (v1 ComponentStatus, v1 Endpoints) are seen by the apiserver metric, not by this data.
Targets before 1.25 are answered from the table alone; targets after the newest schemas are
answered as that release (the data cannot know later removals: the report says so).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import msgspec

#: The package the shipped data was generated from (scripts/gen_apidata.py).
DATA_DISTRIBUTION = "kubernetes-validate"

SERVED = "served"
DEPRECATED = "deprecated"
REMOVED = "removed"
UNKNOWN = "unknown"  # not a built-in group (a CRD), or a release the data does not cover

GVK = tuple[str, str, str]  # (group, version, kind); the core group is ""


@dataclass(frozen=True, kw_only=True)
class ApiStatus:
    """What Kubernetes 1.`minor` does with `group_version` `kind`."""

    group_version: str
    kind: str
    minor: int
    state: str  # SERVED | DEPRECATED | REMOVED | UNKNOWN
    #: The release (minor) that stops serving it: past for REMOVED, future for DEPRECATED; None
    #: when it is not served and the data has no record of when it went (an alpha long gone).
    removed_in: int | None = None
    deprecated_in: int | None = None
    #: What to use instead, "apiVersion Kind" ("policy/v1 PodDisruptionBudget"), or advice when
    #: nothing replaces it; "" when unknown.
    replacement: str = ""
    source: str = ""  # "kubernetes-validate 1.37.0" or "removals table"


@dataclass(frozen=True, kw_only=True)
class Removal:
    group_version: str
    kind: str
    deprecated_in: int
    removed_in: int
    replacement: str


def _r(gv: str, kinds: str, deprecated: int, removed: int, replacement: str) -> list[Removal]:
    """One row per kind. `replacement` is a group-version (the same kind there) or, when it holds
    a space, the advice itself."""
    return [
        Removal(
            group_version=gv,
            kind=kind,
            deprecated_in=deprecated,
            removed_in=removed,
            replacement=replacement if " " in replacement else f"{replacement} {kind}",
        )
        for kind in kinds.split()
    ]


#: Removals the schemas cannot express: 1.16 to 1.25 (the first release in the data). Minor
#: numbers of the 1.x line. Sources: the Kubernetes Deprecated API Migration Guide and the
#: deprecation warnings the apiserver sends for each of these versions.
REMOVALS: tuple[Removal, ...] = tuple(
    # 1.16: the pre-apps/v1 workload APIs and the extensions group's policy kinds.
    _r("extensions/v1beta1", "Deployment DaemonSet ReplicaSet", 9, 16, "apps/v1")
    + _r("apps/v1beta1", "Deployment StatefulSet ControllerRevision", 9, 16, "apps/v1")
    + _r("apps/v1beta2", "Deployment StatefulSet DaemonSet ReplicaSet ControllerRevision", 9, 16, "apps/v1")
    + _r("extensions/v1beta1", "NetworkPolicy", 9, 16, "networking.k8s.io/v1")
    + _r("extensions/v1beta1", "PodSecurityPolicy", 11, 16, "policy/v1beta1")
    # 1.22: the v1beta1 generation of most groups.
    + _r(
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration ValidatingWebhookConfiguration",
        16,
        22,
        "admissionregistration.k8s.io/v1",
    )
    + _r("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", 16, 22, "apiextensions.k8s.io/v1")
    + _r("apiregistration.k8s.io/v1beta1", "APIService", 19, 22, "apiregistration.k8s.io/v1")
    + _r("authentication.k8s.io/v1beta1", "TokenReview", 19, 22, "authentication.k8s.io/v1")
    + _r(
        "authorization.k8s.io/v1beta1",
        "SubjectAccessReview LocalSubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview",
        19,
        22,
        "authorization.k8s.io/v1",
    )
    + _r("certificates.k8s.io/v1beta1", "CertificateSigningRequest", 19, 22, "certificates.k8s.io/v1")
    + _r("coordination.k8s.io/v1beta1", "Lease", 19, 22, "coordination.k8s.io/v1")
    + _r("extensions/v1beta1", "Ingress", 14, 22, "networking.k8s.io/v1")
    + _r("networking.k8s.io/v1beta1", "Ingress IngressClass", 19, 22, "networking.k8s.io/v1")
    + _r(
        "rbac.authorization.k8s.io/v1beta1",
        "ClusterRole ClusterRoleBinding Role RoleBinding",
        17,
        22,
        "rbac.authorization.k8s.io/v1",
    )
    + _r("scheduling.k8s.io/v1beta1", "PriorityClass", 14, 22, "scheduling.k8s.io/v1")
    + _r(
        "storage.k8s.io/v1beta1",
        "CSIDriver CSINode StorageClass VolumeAttachment",
        19,
        22,
        "storage.k8s.io/v1",
    )
    # 1.25: the first release in the schemas, so its removals have to be written down.
    + _r("batch/v1beta1", "CronJob", 21, 25, "batch/v1")
    + _r("discovery.k8s.io/v1beta1", "EndpointSlice", 21, 25, "discovery.k8s.io/v1")
    + _r("events.k8s.io/v1beta1", "Event", 19, 25, "events.k8s.io/v1")
    + _r("autoscaling/v2beta1", "HorizontalPodAutoscaler", 22, 25, "autoscaling/v2")
    + _r("policy/v1beta1", "PodDisruptionBudget", 21, 25, "policy/v1")
    + _r(
        "policy/v1beta1",
        "PodSecurityPolicy",
        21,
        25,
        "nothing: Pod Security Admission (pod-security.kubernetes.io/* namespace labels) or a policy engine",
    )
    + _r("node.k8s.io/v1beta1", "RuntimeClass", 20, 25, "node.k8s.io/v1")
    # Alpha group-versions removed from 1.16 to 1.25 (off by default while served, but a cluster
    # could enable them, and manifests and Helm releases still name them). Deprecated from the
    # release their successor arrived (or, for RBAC, the release that marked them, #84758).
    + _r(
        "auditregistration.k8s.io/v1alpha1",
        "AuditSink",
        18,
        19,
        "nothing: the apiserver's audit policy and webhook backend (--audit-policy-file, --audit-webhook-config-file)",
    )
    + _r(
        "settings.k8s.io/v1alpha1",
        "PodPreset",
        19,
        20,
        "nothing: a mutating admission webhook, or the settings in the workloads' own templates",
    )
    + _r("batch/v2alpha1", "CronJob", 8, 21, "batch/v1")
    + _r("discovery.k8s.io/v1alpha1", "EndpointSlice", 17, 21, "discovery.k8s.io/v1")
    + _r(
        "flowcontrol.apiserver.k8s.io/v1alpha1",
        "FlowSchema PriorityLevelConfiguration",
        20,
        21,
        "flowcontrol.apiserver.k8s.io/v1beta1",
    )
    + _r(
        "rbac.authorization.k8s.io/v1alpha1",
        "ClusterRole ClusterRoleBinding Role RoleBinding",
        17,
        22,
        "rbac.authorization.k8s.io/v1",
    )
    + _r("scheduling.k8s.io/v1alpha1", "PriorityClass", 14, 22, "scheduling.k8s.io/v1")
    + _r("node.k8s.io/v1alpha1", "RuntimeClass", 20, 22, "node.k8s.io/v1")
    + _r("storage.k8s.io/v1alpha1", "VolumeAttachment", 13, 24, "storage.k8s.io/v1")
    + _r("storage.k8s.io/v1alpha1", "CSIStorageCapacity", 21, 24, "storage.k8s.io/v1beta1")
)

#: What the schemas cannot infer about replacements: kinds renamed while in alpha (the new kind's
#: best version served at the target is used), and alpha kinds that nothing replaced.
RENAMED: Mapping[tuple[str, str], str] = {
    ("resource.k8s.io", "PodScheduling"): "PodSchedulingContext",
    ("resource.k8s.io", "ResourceClass"): "DeviceClass",
}
NO_SUCCESSOR: Mapping[tuple[str, str], str] = {
    (
        "networking.k8s.io",
        "ClusterCIDR",
    ): "nothing (the MultiCIDRRangeAllocator was dropped; see ServiceCIDR)",
    (
        "resource.k8s.io",
        "PodSchedulingContext",
    ): "nothing (classic DRA was dropped for structured parameters)",
}

_BY_GVK = {(r.group_version, r.kind): r for r in REMOVALS}


def split_group_version(group_version: str) -> tuple[str, str]:
    """ "apps/v1" → ("apps", "v1"); "v1" → ("", "v1") (the core group)."""
    group, _, version = group_version.rpartition("/")
    return group, version


def join_group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' order of API versions: GA above beta above alpha, then by number (bigger is
    newer); anything else sorts last."""
    m = _VERSION.match(version)
    if m is None:
        return (-1, 0, 0)
    level = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (level, int(m.group(1)), int(m.group(3) or 0))


def minor_of(version: str) -> int:
    """ "1.25", "v1.25.16", "1.25.16-eks-abc" → 25."""
    m = re.match(r"^v?1\.(\d+)", version.strip(), re.ASCII)
    if m is None:
        raise ValueError(f"not a Kubernetes 1.x version: {version!r}")
    return int(m.group(1))


# ---- the served kinds of each release (served_kinds.json) -----------------------------------------

DATA_FILE = Path(__file__).with_name("served_kinds.json")


class _ServedKinds(msgspec.Struct):
    """The file scripts/gen_apidata.py writes: release minor → group-version → kinds (spaced)."""

    source: str
    version: str
    releases: dict[int, dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class SchemaData:
    """The served group/version/kinds of each release the data covers."""

    package_version: str  # of the package the data was generated from; "" when there is no data
    served: Mapping[int, frozenset[GVK]]
    source: str = DATA_DISTRIBUTION

    @property
    def first(self) -> int | None:
        return min(self.served) if self.served else None

    @property
    def last(self) -> int | None:
        return max(self.served) if self.served else None

    @property
    def groups(self) -> frozenset[str]:
        return frozenset(g for kinds in self.served.values() for g, _, _ in kinds)

    def describe(self) -> str:
        if not self.served:
            return f"{DATA_FILE.name} missing: removals table 1.16–1.25 only"
        return (
            f"API data: {self.source} {self.package_version} (schemas 1.{self.first}–1.{self.last})"
            " + removals table 1.16–1.25"
        )


def read_served_kinds(path: Path) -> SchemaData:
    """The generated file, as SchemaData."""
    doc = msgspec.json.decode(path.read_bytes(), type=_ServedKinds)
    served = {
        minor: frozenset(
            (*split_group_version(gv), kind) for gv, kinds in by_gv.items() for kind in kinds.split()
        )
        for minor, by_gv in doc.releases.items()
    }
    return SchemaData(package_version=doc.version, served=served, source=doc.source)


@cache
def schema_data() -> SchemaData:
    """The shipped data, read once per process."""
    if not DATA_FILE.is_file():
        return SchemaData(package_version="", served={})
    return read_served_kinds(DATA_FILE)


def describe_data() -> str:
    """The line a report carries to say which data answered."""
    return schema_data().describe()


# ---- the question --------------------------------------------------------------------------------


def served(group_version: str, kind: str, minor: int, *, data: SchemaData | None = None) -> ApiStatus:
    """What Kubernetes 1.`minor` does with objects of `kind` in `group_version`."""
    data = data if data is not None else schema_data()
    row = _BY_GVK.get((group_version, kind))
    if row is not None:
        if minor >= row.removed_in:
            state = REMOVED
        elif minor >= row.deprecated_in:
            state = DEPRECATED
        else:
            state = SERVED
        return ApiStatus(
            group_version=group_version,
            kind=kind,
            minor=minor,
            state=state,
            removed_in=row.removed_in,
            deprecated_in=row.deprecated_in,
            replacement=_still_served(row.replacement, minor, data),
            source="removals table",
        )
    status = _from_schemas(group_version, kind, minor, data)
    if status.state == UNKNOWN and _table_group_version_gone(group_version, minor, data):
        # A kind the table does not list in a group-version whose every listed kind is gone.
        return ApiStatus(
            group_version=group_version, kind=kind, minor=minor, state=REMOVED, source="removals table"
        )
    return status


def _still_served(replacement: str, minor: int, data: SchemaData, depth: int = 3) -> str:
    """Follow a replacement that is itself gone by 1.`minor` (extensions/v1beta1 PodSecurityPolicy
    → policy/v1beta1, itself removed in 1.25) to what replaces it then."""
    group_version, _, kind = replacement.partition(" ")
    if depth == 0 or not kind or " " in kind:
        return replacement
    status = served(group_version, kind, minor, data=data)
    if status.state == REMOVED and status.replacement:
        return _still_served(status.replacement, minor, data, depth - 1)
    return replacement


def _table_group_version_gone(group_version: str, minor: int, data: SchemaData) -> bool:
    rows = [r for r in REMOVALS if r.group_version == group_version]
    return (
        bool(rows) and all(minor >= r.removed_in for r in rows) and not _served_anywhere(group_version, data)
    )


def _served_anywhere(group_version: str, data: SchemaData) -> bool:
    group, version = split_group_version(group_version)
    return any(g == group and v == version for kinds in data.served.values() for g, v, _ in kinds)


def _from_schemas(group_version: str, kind: str, minor: int, data: SchemaData) -> ApiStatus:
    unknown = ApiStatus(group_version=group_version, kind=kind, minor=minor, state=UNKNOWN)
    first, last = data.first, data.last
    if first is None or last is None or minor < first:
        return unknown
    group, version = split_group_version(group_version)
    if group not in data.groups:
        return unknown  # a custom resource or an aggregated API: not Kubernetes' to remove
    source = f"{DATA_DISTRIBUTION} {data.package_version}"
    at = min(minor, last)
    gvk = (group, version, kind)
    if gvk in data.served[at]:
        gone = next((m for m in range(at + 1, last + 1) if gvk not in data.served[m]), None)
        if gone is None:
            return ApiStatus(group_version=group_version, kind=kind, minor=minor, state=SERVED, source=source)
        # Deprecated only once its replacement can be used: served now and still after the removal.
        replacement = _replacement(data, group, version, kind, at, also=gone)
        return ApiStatus(
            group_version=group_version,
            kind=kind,
            minor=minor,
            state=DEPRECATED if replacement and not replacement.startswith("nothing") else SERVED,
            removed_in=gone,
            replacement=replacement,
            source=source,
        )
    if any(gvk in data.served[m] for m in data.served if m > at):
        return unknown  # not served yet: an object too new for the target is another problem
    seen = [m for m in sorted(data.served) if m <= at and gvk in data.served[m]]
    if seen:
        removed_in = seen[-1] + 1
    elif any(g == group and v == version for g, v, _ in data.served[at]):
        return unknown  # the group-version is served; this kind never was
    else:
        removed_in = None  # gone before the data starts, and not in the table
    replacement = _replacement(data, group, version, kind, at)
    return ApiStatus(
        group_version=group_version,
        kind=kind,
        minor=minor,
        state=REMOVED,
        removed_in=removed_in,
        replacement=replacement,
        source=source,
    )


def _replacement(
    data: SchemaData, group: str, version: str, kind: str, at: int, *, also: int | None = None
) -> str:
    """The same kind in another version, else the kind it was renamed to, else what the table says."""
    found = _best_other(data, group, version, kind, at, also=also)
    renamed = RENAMED.get((group, kind))
    if not found and renamed:
        found = _best_other(data, group, "", renamed, at, also=also)
        if not found:
            return NO_SUCCESSOR.get((group, renamed), "")
    return found or NO_SUCCESSOR.get((group, kind), "")


def _best_other(
    data: SchemaData, group: str, version: str, kind: str, at: int, *, also: int | None = None
) -> str:
    """The highest-priority other version of the same group and kind served in 1.`at` (and in
    1.`also` when given), as "apiVersion Kind"; "" when there is none."""
    candidates = [
        v
        for g, v, k in data.served[at]
        if g == group and k == kind and v != version and (also is None or (g, v, k) in data.served[also])
    ]
    if not candidates:
        return ""
    best = max(candidates, key=version_priority)
    return f"{join_group_version(group, best)} {kind}"


def removals_known(data: SchemaData | None = None) -> list[ApiStatus]:
    """Every removal the data and the table know of, as ApiStatus at its removal release: what the
    tests walk to prove each one is classified."""
    data = data if data is not None else schema_data()
    out = [served(r.group_version, r.kind, r.removed_in, data=data) for r in REMOVALS]
    ordered = sorted(data.served)
    for before, after in itertools.pairwise(ordered):
        for group, version, kind in sorted(data.served[before] - data.served[after]):
            out.append(served(join_group_version(group, version), kind, after, data=data))
    return out
