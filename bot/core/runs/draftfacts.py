"""What `plan draft` reads before it writes: the node groups and their order, the sidecars and
Fargate pods to restart, the control-plane hops, the cloud provider's node groups and add-ons, and
the pre-flight check's findings sorted into what a step settles and what needs a waiver.

`bot.core.runs.draft` turns these facts into the plan's text (`bot.core.runs.draftsteps` writes
the steps). Node groups are ordered by the configuration, else by the heuristic its docstring gives.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.core import providers
from bot.core.checks import service as checks
from bot.core.checks.findings import REQUIRED, Cover, Finding
from bot.core.checks.gather import CheckReader
from bot.core.durations import format_duration
from bot.core.kube.versions import older_minor, parse_version
from bot.core.providers import Provider, ProviderConfig
from bot.core.rules import Rule
from bot.core.snapshots.projection import Progress, pods_as_dicts
from bot.errors import ProviderError, ProviderUnavailable, UserError
from bot.records import ClusterConfig, WaiverRow

STYLES = ("pipeline", "eks-managed", "aks-managed", "gke-managed", "generic")
#: The styles that draft a cloud's own actions → that cloud (its provider must be the cluster's).
MANAGED_STYLES = {"eks-managed": "eks", "aks-managed": "aks", "gke-managed": "gke"}
#: The clouds whose node pools are upgraded in place by the cloud → its actions (the control
#: plane's, a pool's), as their example plans (`templates/plans/<cloud>-managed.yaml`) use them.
POOL_CLOUDS = {
    "aks": ("aks-upgrade-control-plane", "aks-upgrade-nodepool"),
    "gke": ("gke-update-master", "gke-update-nodepool"),
}
#: What each cloud calls a node group it manages.
POOL_WORDS = {"eks": "managed node group", "aks": "agent pool", "gke": "node pool"}
#: The command that lists the versions a cloud offers (said where the draft could not ask).
VERSIONS_HOW = {"aks": "az aks get-upgrades", "gke": "gcloud container get-server-config"}


def default_style(cloud: str) -> str:
    """The style `plan draft` uses without `--style`: the cloud's own for an AKS or GKE cluster
    (its pools are upgraded in place by the cloud), else `pipeline`."""
    return f"{cloud}-managed" if cloud in POOL_CLOUDS else "pipeline"


def cloud_of(cluster: ClusterConfig) -> str:
    """The cloud the cluster's `provider:` names (`eks`, `aks`, `gke`), or "" without one."""
    return "eks" if cluster.eks else "aks" if cluster.aks else "gke" if cluster.gke else ""


CONTROL_NAMESPACES = frozenset({"kube-system"})
MESH_NAMESPACES = frozenset({"istio-system"})
OBSERVABILITY_NAMESPACES = frozenset({"logging", "monitoring", "observability"})
#: Groups with no name of their own, never drained as a group.
NOT_A_GROUP = frozenset({"(none)", "fargate"})
_RANKS = {"control": 0, "mesh": 1, "other": 2, "observability": 3}
RANK_WHY = {
    "control": "runs the control components",
    "mesh": "runs the mesh's ingress gateways",
    "other": "application workloads",
    "observability": "runs observability (logging/monitoring), last so it sees the whole upgrade",
}
_TAG = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)[^:/]*$")


@dataclass
class NodeGroup:
    name: str
    nodes: list[str] = field(default_factory=list)
    versions: Counter[str] = field(default_factory=Counter)
    namespaces: Counter[str] = field(default_factory=Counter)
    gateways: list[str] = field(default_factory=list)
    kind: str = "other"
    #: The node label keys that named it (the snapshot's `group_label`), by how many nodes.
    label_keys: Counter[str] = field(default_factory=Counter)

    def selector(self) -> str:
        """The node label it groups by, `key=value` (the key most of its nodes carry); a snapshot
        taken before the key was recorded says only that it is one of the draft's group labels."""
        key = next((k for k, _ in self.label_keys.most_common() if k), "")
        return f"{key}={self.name}" if key else f"<one of the node group labels above>={self.name}"

    @property
    def pods(self) -> int:
        return sum(self.namespaces.values())

    def why(self) -> str:
        top = ", ".join(f"{ns} ({n})" for ns, n in self.namespaces.most_common(3)) or "no pods"
        versions = ", ".join(f"{v} ×{n}" for v, n in sorted(self.versions.items()))
        text = f"{len(self.nodes)} node(s) on {versions}; pods by namespace: {top}"
        if self.kind == "mesh" and self.gateways:
            text += f"; gateways: {', '.join(sorted(set(self.gateways))[:3])}"
        return text


def is_fargate(node: Mapping[str, Any]) -> bool:
    return node.get("group") == "fargate" or str(node.get("name", "")).startswith("fargate-")


def discover_groups(snap: Mapping[str, Any], order: Sequence[str] = ()) -> list[NodeGroup]:
    """The snapshot's node groups (Fargate and unlabelled nodes left out), in upgrade order."""
    groups: dict[str, NodeGroup] = {}
    node_group: dict[str, str] = {}
    for node in snap.get("nodes") or []:
        name = str(node.get("group") or "(none)")
        if name in NOT_A_GROUP or is_fargate(node):
            continue
        group = groups.setdefault(name, NodeGroup(name))
        group.nodes.append(str(node.get("name", "")))
        group.versions[str(node.get("kubelet", "?"))] += 1
        group.label_keys[str(node.get("group_label") or "")] += 1
        node_group[str(node.get("name", ""))] = name
    for pod in pods_as_dicts(snap):
        group_name = node_group.get(str(pod.get("node", "")))
        if group_name is None or pod.get("workload_kind") == "DaemonSet":
            continue
        ns = str(pod.get("namespace", ""))
        groups[group_name].namespaces[ns] += 1
        if ns in MESH_NAMESPACES and "gateway" in str(pod.get("workload", "")):
            groups[group_name].gateways.append(str(pod.get("workload")))
    for group in groups.values():
        group.kind = _kind(group)
    fixed = {name: i for i, name in enumerate(order)}

    def key(g: NodeGroup) -> tuple[int, int, int, str]:
        if g.name in fixed:
            return (0, fixed[g.name], 0, g.name)
        return (1, _RANKS[g.kind], -len(g.nodes), g.name)

    return sorted(groups.values(), key=key)


def _kind(group: NodeGroup) -> str:
    total = group.pods
    if total == 0:
        return "other"

    def share(namespaces: frozenset[str]) -> float:
        return sum(n for ns, n in group.namespaces.items() if ns in namespaces) / total

    if share(CONTROL_NAMESPACES) > 0.5:
        return "control"
    if group.gateways:
        return "mesh"
    if share(OBSERVABILITY_NAMESPACES) > 0.5:
        return "observability"
    return "other"


def _version_of(image: str) -> str | None:
    m = _TAG.search(image)
    return m.group(1) if m else None


def lagging_sidecars(snap: Mapping[str, Any]) -> tuple[str | None, dict[str, str], list[str]]:
    """istiod's version; the namespaces whose pods carry an older proxy (namespace → its version);
    and their workloads (`kind/namespace/name`), what a restart brings to istiod's proxy."""
    istiod = None
    for w in snap.get("workloads") or []:
        if w.get("namespace") in MESH_NAMESPACES and w.get("name") == "istiod":
            istiod = next((v for v in map(_version_of, w.get("images") or []) if v), None)
    if istiod is None:
        return None, {}, []
    lagging: dict[str, str] = {}
    workloads: set[str] = set()
    for pod in pods_as_dicts(snap):
        ns = str(pod.get("namespace", ""))
        kind = str(pod.get("workload_kind", ""))
        if ns in MESH_NAMESPACES or kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            continue
        for image in str(pod.get("images", "")).split(","):
            version = _version_of(image) if "proxyv2" in image else None
            if version and version != istiod:
                lagging[ns] = version
                workloads.add(f"{kind.lower()}/{ns}/{pod.get('workload', '')}")
    return istiod, dict(sorted(lagging.items())), sorted(workloads)


def fargate_restarts(snap: Mapping[str, Any]) -> list[str]:
    """kube-system Deployments with pods on Fargate nodes (they keep the old kubelet until restarted)."""
    fargate = {str(n.get("name")) for n in snap.get("nodes") or [] if is_fargate(n)}
    if not fargate:
        return []
    found = {
        f"deployment/{p['namespace']}/{p['workload']}"
        for p in pods_as_dicts(snap)
        if p.get("node") in fargate
        and p.get("workload_kind") == "Deployment"
        and p.get("namespace") == "kube-system"
    }
    return sorted(found)


#: The finding a removed API in use is reported as (`bot.core.checks.apis.API_REMOVED`).
API_REMOVED = "API001"
#: kube-proxy findings a step settles: out of the skew (SKEW005), an image that cannot be pulled (KI005).
KUBE_PROXY_FINDINGS = frozenset({"SKEW005", "KI005"})
#: Kubelets (or EKS's managed node groups) out of skew: the draft's catch-up steps settle them.
KUBELET_SKEW_FINDINGS = frozenset({"SKEW003", "SKEW004", "EKS008"})
#: An add-on version the cloud does not offer for the target: the add-on steps settle it.
ADDON_FINDINGS = frozenset({"EKS005"})
#: Cordoned nodes (Recommended, with an `uncordon` Fix…): a step before the control plane.
CORDONED = "NODE002"


def kubelet_skew(minor: int) -> int:
    """How many minors a kubelet may lag the API server of 1.`minor`: 3 from 1.28 on, 2 before
    (the version skew policy, docs/shared KUBERNETES_FACTS)."""
    return 3 if minor >= 28 else 2


def minor_of(version: str) -> int | None:
    parsed = parse_version(version)
    return parsed[1] if parsed is not None and len(parsed) >= 2 else None


def hop_targets(current: str, target: str) -> list[str]:
    """The control plane's hops, one minor at a time (no cloud skips one): 1.29 → 1.33 is
    1.30, 1.31, 1.32, 1.33. A current version that cannot be read gives the one hop asked for."""
    now, to = parse_version(current), parse_version(target)
    if to is None:
        raise UserError(f"--to {target!r} is not a Kubernetes version")
    if now is None or len(now) < 2:
        return [f"{to[0]}.{to[1]}"]
    if older_minor(current, target, or_same=True):
        raise UserError(f"the cluster is on {current} already: --to {target} is not a newer minor")
    if to[0] != now[0]:
        raise UserError(f"--to {target}: only upgrades within one major version are drafted")
    return [f"{to[0]}.{m}" for m in range(now[1] + 1, to[1] + 1)]


@dataclass(frozen=True, kw_only=True)
class ProviderFacts:
    """What the cloud says of the cluster, as the draft reads it (the provider port's answers)."""

    kind: str
    name: str
    #: The cloud's managed node groups → their Kubernetes version (a group the snapshot shows and
    #: the cloud does not list is self-managed).
    managed: Mapping[str, str] = field(default_factory=dict)
    #: The installed add-ons → their version.
    addons: Mapping[str, str] = field(default_factory=dict)
    #: Kubernetes minor → add-on → the version the cloud offers by default for it.
    offered: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: AKS, GKE: each node pool's own upgrade settings, as people read them ("max surge 33%").
    pool_settings: Mapping[str, str] = field(default_factory=dict)
    #: AKS, GKE: the control plane's version as the cloud writes it (`1.29.8-gke.1031000`), the
    #: versions it offers to move to and its own pick among them (`Provider.versions`).
    version: str = ""
    offered_versions: Sequence[str] = ()
    default_version: str = ""

    def hop_version(self, minor: str) -> str:
        """The version of `minor` the cloud offers to upgrade to: its own pick when it is of that
        minor, else the newest it offers of it; "" when it offers none (AKS offers only the next
        minor's patches: a later hop is asked once the cluster is on the one before)."""
        want = _minor_key(minor)
        if self.default_version and _minor_key(self.default_version) == want:
            return self.default_version
        same = [v for v in self.offered_versions if _minor_key(v) == want]
        return max(same, key=_version_key) if same else ""


def default_addon_version(versions: Sequence[Mapping[str, Any]], minor: str) -> str | None:
    """The version `DescribeAddonVersions` marks the default for Kubernetes `minor`."""
    for v in versions:
        for c in v.get("compatibilities") or []:
            if c.get("clusterVersion") == minor and c.get("defaultVersion"):
                return str(v.get("addonVersion") or "") or None
    return None


def _minor_key(version: str) -> tuple[int, ...]:
    return (parse_version(version) or ())[:2]


def _version_key(version: str) -> tuple[int, ...]:
    """Every number of a cloud's version, in order: `1.30.4-gke.1348000` → (1, 30, 4, 1348000)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def pool_settings(kind: str, pool: Mapping[str, Any]) -> str:
    """A node pool's own upgrade settings in people's words, as the cloud's job uses them when the
    plan names none (`bot.core.jobs.aks`, `bot.core.jobs.gke`)."""
    if kind == "aks":
        surge = ((pool.get("properties") or {}).get("upgradeSettings") or {}).get("maxSurge")
        return f"max surge {surge}" if surge else "AKS's default max surge (10%)"
    own = pool.get("upgradeSettings") or {}
    if own.get("strategy") == "BLUE_GREEN":
        soak = str((own.get("blueGreenSettings") or {}).get("nodePoolSoakDuration") or "")
        seconds = soak.removesuffix("s")
        span = format_duration(timedelta(seconds=float(seconds))) if _is_number(seconds) else "GKE's default"
        return f"blue-green, soak {span}"
    # GKE's REST JSON leaves a 0 out; the job reads an absent max_surge as 1 (GKE's default).
    return f"surge, max_surge {own.get('maxSurge', 1)}, max_unavailable {own.get('maxUnavailable', 0)}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def pool_facts(provider: Provider) -> ProviderFacts:
    """An AKS or GKE cluster's node pools (their versions and own upgrade settings) and the
    versions the cloud offers its control plane (`Provider.versions`)."""
    pools = provider.node_pools()
    versions = provider.versions()

    def version_of(pool: Mapping[str, Any]) -> str:
        if provider.kind == "aks":
            props = pool.get("properties") or {}
            return str(props.get("currentOrchestratorVersion") or props.get("orchestratorVersion") or "")
        return str(pool.get("version", ""))

    return ProviderFacts(
        kind=provider.kind,
        name=provider.name,
        managed={str(p.get("name", "")): version_of(p) for p in pools},
        pool_settings={str(p.get("name", "")): pool_settings(provider.kind, p) for p in pools},
        version=versions.current,
        offered_versions=tuple(versions.offered),
        default_version=versions.default,
    )


def provider_facts(provider: Provider, minors: Sequence[str]) -> ProviderFacts:
    """Read the managed node groups, the installed add-ons and the add-on versions the cloud offers
    for each of `minors` (the current one and every hop's); for AKS and GKE, `pool_facts`."""
    if provider.kind in POOL_CLOUDS:
        return pool_facts(provider)
    managed = {str(g.get("nodegroupName", "")): str(g.get("version", "")) for g in provider.node_pools()}
    addons = {str(a.get("addonName", "")): str(a.get("addonVersion", "")) for a in provider.addons()}
    offered: dict[str, dict[str, str]] = {}
    for minor in minors:
        offered[minor] = {}
        for name in addons:
            version = default_addon_version(provider.addon_versions(name, minor), minor)
            if version:
                offered[minor][name] = version
    return ProviderFacts(
        kind=provider.kind, name=provider.name, managed=managed, addons=addons, offered=offered
    )


@dataclass(frozen=True, kw_only=True)
class DraftFacts:
    """What the draft knows beyond the snapshot: the cloud's side and each hop's pre-flight check."""

    provider: ProviderFacts | None = None
    #: A hop's target (`1.25`) → the Required (and NODE002) findings its check reported.
    findings: Mapping[str, Sequence[Finding]] = field(default_factory=dict)
    #: What could not be read (said in the header).
    notes: Sequence[str] = ()


def gather_facts(
    reader: CheckReader,
    snap: Mapping[str, Any],
    target: str,
    *,
    cluster: ClusterConfig,
    rules: Sequence[Rule],
    waivers: Sequence[WaiverRow] | None,
    ignores: Sequence[Cover],
    now: datetime,
    connect_provider: Callable[[ProviderConfig], Provider] = providers.reading,
    progress: Callable[[str], AbstractContextManager[Progress | None]] | None = None,
) -> DraftFacts:
    """What the draft knows beyond the snapshot, all of it read: each hop's pre-flight check (as
    `check --to HOP` gives it: rules, the removed-API and EKS extras, waivers and the ignore list)
    and, when the cluster names a provider, its managed node groups and add-ons (a provider that
    cannot be read is a note, and the draft has no EKS actions). `progress(hop)` wraps each check."""
    current = str((snap.get("version") or {}).get("gitVersion", ""))
    hops = hop_targets(current, target)
    extras = checks.default_extras(now=now.timestamp(), cluster=cluster)
    findings: dict[str, tuple[Finding, ...]] = {}
    for hop in hops:
        with progress(hop) if progress is not None else contextlib.nullcontext() as bar:
            report = checks.check_cluster(
                reader,
                target=hop,
                waivers=waivers,
                now=now,
                ignores=ignores,
                rules=rules,
                extras=extras,
                progress=bar,
            )
        findings[hop] = report.findings
    notes: list[str] = []
    provider = None
    config = cluster.eks or cluster.aks or cluster.gke
    if config is not None:
        cloud = cloud_of(cluster)
        minor = parse_version(current)
        minors = ([f"{minor[0]}.{minor[1]}"] if minor is not None and len(minor) > 1 else []) + hops
        try:
            provider = provider_facts(connect_provider(config), minors)
        except (ProviderUnavailable, ProviderError) as exc:
            notes.append(
                f"the EKS provider's node groups and add-ons ({exc}): the draft has no EKS actions"
                if cloud == "eks"
                else f"the {cloud.upper()} provider's {POOL_WORDS[cloud]}s and the versions it offers ({exc})"
            )
    return DraftFacts(provider=provider, findings=findings, notes=notes)


@dataclass(frozen=True, kw_only=True)
class SortedFindings:
    #: Hop → the findings a step before its control plane settles.
    fixable: Mapping[str, Sequence[Finding]]
    #: (hop, finding) that no step settles: a waiver, or work outside the plan.
    unsettled: Sequence[tuple[str, Finding]]
    #: (hop, finding) that the catch-up or add-on steps settle.
    settled: Sequence[tuple[str, Finding]] = ()


def sort_findings(
    findings: Mapping[str, Sequence[Finding]], hops: Sequence[str], *, addons: bool = False
) -> SortedFindings:
    """Each hop's findings, each once, at the first hop whose check reports it. A later hop's
    check reads today's cluster (on the first hop's side of the chain): its skew and node findings
    are about the chain, not that hop, so only the APIs it removes are its own. `addons`: the
    draft updates the cloud's add-ons (a provider), which settles EKS005."""
    fixable: dict[str, list[Finding]] = {hop: [] for hop in hops}
    unsettled: list[tuple[str, Finding]] = []
    settled: list[tuple[str, Finding]] = []
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    for i, hop in enumerate(hops):
        for f in findings.get(hop, ()):
            if f.severity != REQUIRED and not (f.id == CORDONED and f.action):
                continue
            if i > 0 and f.id != API_REMOVED:
                continue
            key = (f.id, f.title, f.objects)
            if key in seen:
                continue
            seen.add(key)
            if f.id in KUBELET_SKEW_FINDINGS or (addons and f.id in ADDON_FINDINGS):
                settled.append((hop, f))
            elif f.id == API_REMOVED or f.id in KUBE_PROXY_FINDINGS or f.id == CORDONED:
                fixable[hop].append(f)
            else:
                unsettled.append((hop, f))
    return SortedFindings(fixable=fixable, unsettled=unsettled, settled=settled)
