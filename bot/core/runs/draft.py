"""`plan draft`: a commented upgrade plan written from what a snapshot of the cluster shows.

The draft follows the shape of `templates/plans/eks-nodegroups.yaml`: snapshot and checks first,
the control plane (a person's step: no action upgrades it), the restarts the cluster needs, the
node groups one at a time, a settle watch, snapshot and diff, and the announcements. Every
generated step has a YAML comment above it saying why it is there (the label that named a group,
the finding that asked for a restart).

Node groups are the snapshot's (`project_node` names a node's group from the configured labels).
Their order is the configuration's when it gives one; otherwise the runbook's heuristic:

1. the groups running the control components (most of their pods in kube-system),
2. the groups running the mesh's gateways (istio-system gateway pods),
3. the rest, the largest first (the shared pool), then by name,
4. observability last (most of their pods in logging/monitoring namespaces).
"""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bot.core import clusters, providers
from bot.core.checks import service as checks
from bot.core.checks.findings import REQUIRED, Cover, Finding
from bot.core.checks.gather import CheckReader
from bot.core.checks.rules import Rule
from bot.core.kube.versions import parse_version
from bot.core.providers import Provider, ProviderConfig
from bot.core.snapshots.projection import Progress, pods_as_dicts
from bot.core.windows import Policy
from bot.errors import ProviderError, ProviderUnavailable, UserError
from bot.records import ClusterConfig, WaiverRow

STYLES = ("pipeline", "eks-managed", "generic")
CONTROL_NAMESPACES = frozenset({"kube-system"})
MESH_NAMESPACES = frozenset({"istio-system"})
OBSERVABILITY_NAMESPACES = frozenset({"logging", "monitoring", "observability"})
#: Groups with no name of their own, never drained as a group.
NOT_A_GROUP = frozenset({"(none)", "fargate"})
_RANKS = {"control": 0, "mesh": 1, "other": 2, "observability": 3}
_RANK_WHY = {
    "control": "runs the control components",
    "mesh": "runs the mesh's ingress gateways",
    "other": "application workloads",
    "observability": "runs observability (logging/monitoring), last so it sees the whole upgrade",
}
_TAG = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)[^:/]*$")
#: A step id is lower-case letters, digits and '-', at most 63 characters (`plans.STEP_ID`); a node
#: group's steps are `<verb>-<key>`, the longest verb "launch-"/"update-".
STEP_ID_LENGTH = 63
_LONGEST_VERB = len("update-")
_NOT_ID = re.compile(r"[^a-z0-9]+")


def group_step_keys(names: Sequence[str], *, reserve: int = 0) -> dict[str, str]:
    """Each node group's part of its step ids (`wait-<key>`), valid and unique in order: a node
    group is named by a label value, which may hold capitals, '_' and '.' and run to 63
    characters. Lower-cased, every run of other characters one '-', cut to fit; a key taken
    already (`NG_1` and `ng.1` both make `ng-1`) gets `-2`, `-3`… The YAML says the real name."""
    keys: dict[str, str] = {}
    used: set[str] = set()
    # `reserve`: room for a catch-up step's suffix (`update-others-to-1-24`).
    room = STEP_ID_LENGTH - _LONGEST_VERB - reserve
    for name in names:
        if name in keys:
            continue
        base = _NOT_ID.sub("-", name.lower()).strip("-") or "group"
        key, n = base[:room].rstrip("-"), 1
        while key in used:
            n += 1
            suffix = f"-{n}"
            key = base[: room - len(suffix)].rstrip("-") + suffix
        used.add(key)
        keys[name] = key
    return keys


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


# ---- writing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftInputs:
    cluster: str
    target: str
    style: str
    roster: Mapping[str, Sequence[str]]
    channels: Mapping[str, str]
    window: tuple[str, str, str]  # start, end, timezone
    window_note: str
    group_labels: Sequence[str]
    order: Sequence[str] = ()
    #: The cluster names an Alertmanager / a Prometheus: the draft adds the evidence steps and
    #: the drains' `background:` checks (docs/evidence-gate.md).
    alerts: bool = False
    metrics: bool = False


#: The apiserver's 4xx rate, judged against its baseline (issue 39 item 7).
APISERVER_4XX = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
APISERVER_4XX_SUCCESS = "result < 1.2 * baseline + 5"
#: Alerts that fire all the time by design, never a sign of trouble.
ALWAYS_FIRING = "^(Watchdog|InfoInhibitor)$"


def evidence_lines(inputs: DraftInputs, indent: str = "") -> list[str]:
    """The `background:` of a disruptive step: alerts and the apiserver 4xx analysis, as the
    cluster's sources allow (none: no lines)."""
    items = []
    if inputs.alerts:
        items.append(f"  - alerts: {{ignore: {_q(ALWAYS_FIRING)}}}")
    if inputs.metrics:
        items.append(f"  - analysis: {{query: {_q(APISERVER_4XX)}, success: {_q(APISERVER_4XX_SUCCESS)}}}")
    return [f"{indent}background:", *(indent + i for i in items)] if items else []


def _q(value: object) -> str:
    """A YAML scalar: JSON strings are valid YAML and quote whatever a value holds."""
    return json.dumps(str(value), ensure_ascii=False)


def _comment(text: str, indent: str = "  ") -> list[str]:
    lines = [
        part
        for line in text.splitlines()
        for part in textwrap.wrap(line, 96, break_long_words=False, break_on_hyphens=False) or [""]
    ]
    return [f"{indent}# {line}".rstrip() for line in lines]


def _gate(roles: Sequence[str], kind: str = "any_of") -> str:
    return "{" + kind + ": [" + ", ".join(roles) + "]}"


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
#: The add-ons EKS's upgrade guide updates first, in its order; the rest follow by name.
ADDON_ORDER = ("vpc-cni", "coredns", "kube-proxy")
#: How many objects a migration step's description names per finding (the check's report has all).
NAMED_OBJECTS = 8
#: The longest suffix of a catch-up step's id (`-to-1-100`).
_CATCH_UP_SUFFIX = len("-to-1-100")


def kubelet_skew(minor: int) -> int:
    """How many minors a kubelet may lag the API server of 1.`minor`: 3 from 1.28 on, 2 before
    (the version skew policy, docs/shared KUBERNETES_FACTS)."""
    return 3 if minor >= 28 else 2


def _minor_of(version: str) -> int | None:
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
    if (to[0], to[1]) <= (now[0], now[1]):
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


def default_addon_version(versions: Sequence[Mapping[str, Any]], minor: str) -> str | None:
    """The version `DescribeAddonVersions` marks the default for Kubernetes `minor`."""
    for v in versions:
        for c in v.get("compatibilities") or []:
            if c.get("clusterVersion") == minor and c.get("defaultVersion"):
                return str(v.get("addonVersion") or "") or None
    return None


def provider_facts(provider: Provider, minors: Sequence[str]) -> ProviderFacts:
    """Read the managed node groups, the installed add-ons and the add-on versions the cloud offers
    for each of `minors` (the current one and every hop's)."""
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
    connect_provider: Callable[[ProviderConfig], Provider] = providers.connect,
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
    if cluster.eks is not None:
        minor = parse_version(current)
        minors = ([f"{minor[0]}.{minor[1]}"] if minor is not None and len(minor) > 1 else []) + hops
        try:
            provider = provider_facts(connect_provider(cluster.eks), minors)
        except (ProviderUnavailable, ProviderError) as exc:
            notes.append(f"the EKS provider's node groups and add-ons ({exc}): the draft has no EKS actions")
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


def _dash(minor: str) -> str:
    return minor.replace(".", "-")


def _named_objects(objects: Sequence[str], limit: int = NAMED_OBJECTS) -> str:
    shown = ", ".join(objects[:limit])
    return shown + (f" …and {len(objects) - limit} more" if len(objects) > limit else "")


def _action_args(action: str) -> tuple[str, dict[str, str]]:
    """`uncordon node=a,b` → ("uncordon", {"node": "a,b"}): a finding's Fix… as a plan action."""
    verb, *pairs = action.split()
    return verb, dict(p.split("=", 1) for p in pairs if "=" in p)


def _flow(args: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {_q(v)}" for k, v in args.items()) + "}"


def draft_plan(snap: Mapping[str, Any], inputs: DraftInputs, facts: DraftFacts | None = None) -> str:
    """The plan's YAML text, commented, ready for `plan validate` and `plan load`."""
    if inputs.style not in STYLES:
        raise ValueError(f"unknown style {inputs.style!r}")
    facts = facts or DraftFacts()
    target = inputs.target.lstrip("v")
    full = target if target.count(".") >= 2 else f"{target}.0"
    minor = ".".join(target.split(".")[:2])
    current_full = str((snap.get("version") or {}).get("gitVersion", "")).lstrip("v").split("-")[0]
    current = current_full or "unknown"
    hops = hop_targets(current, target)
    chained = len(hops) > 1
    groups = discover_groups(snap, inputs.order)
    istiod, lagging, sidecar_workloads = lagging_sidecars(snap)
    fargate = fargate_restarts(snap)
    provider = facts.provider
    eks = provider is not None and provider.kind == "eks"
    managed = set(provider.managed) if provider is not None else set()
    cloud = provider.kind.upper() if provider is not None else "EKS"
    sorted_findings = sort_findings(facts.findings, hops, addons=provider is not None)
    roles = list(inputs.roster)
    operators = [r for r in ("primary", "shadow") if r in inputs.roster] or roles[:2]
    lead = operators[:1]
    four_eyes = _gate(operators, "approve")
    anyone = _gate(operators)
    announcer = [r for r in ("coordinator",) if r in inputs.roster] or lead
    announce_done = list(dict.fromkeys([*announcer, *operators]))
    # Each group's oldest kubelet minor, followed as the catch-up steps move it.
    on: dict[str, int] = {}
    for g in groups:
        minors = [m for m in (_minor_of(v) for v in g.versions) if m is not None]
        on[g.name] = min(minors) if minors else 0
    catch_up_possible = chained or any(0 < m < (_minor_of(minor) or 0) - 1 for m in on.values())
    out: list[str] = []
    add = out.append
    add(f"# Drafted by `upgrade-bot plan draft --to {target} --style {inputs.style}` from what")
    add(f"# {snap.get('cluster', '')!s} showed at {str(snap.get('taken_at', ''))[:19]} UTC.")
    add("# Read every step before loading it: the order, the gates and the timeouts are a proposal.")
    if chained:
        add(
            f"# {current} to {target} is {len(hops)} control-plane hops, one minor at a time ({', '.join(hops)}):"
        )
        add("# each hop has its own check, its add-ons and its restarts; node groups move between hops")
        add("# only where the version skew policy (or the cloud) requires it, and all of them at the end.")
    if provider is not None:
        add(
            f"# The cloud's side from the {provider.kind.upper()} provider (cluster {provider.name}): managed node"
        )
        add(
            f"# groups {', '.join(sorted(managed)) or '(none)'}; add-ons {', '.join(sorted(provider.addons)) or '(none)'}."
        )
    add("# Node groups come from the first of these node labels present on a node:")
    for key in inputs.group_labels:
        add(f"#   {key}")
    if inputs.order:
        add(f"# In the configured order ({', '.join(inputs.order)}), the rest by the heuristic:")
    else:
        add("# Ordered by the heuristic (snapshot.node_group_order in the configuration fixes it):")
    add("# control components first, then the mesh's gateways, then the rest (largest first), then")
    add("# observability (logging/monitoring) last.")
    if sorted_findings.unsettled:
        add("# Required findings of the pre-flight check that no step of this plan settles: each needs a")
        add("# waiver (`/upgrade waive`, two people for a Required one) or work outside the plan:")
        for hop, f in sorted_findings.unsettled:
            objects = f" ({_named_objects(f.objects, 3)})" if f.objects else ""
            out.extend(_comment(f"  {f.id} (check for {hop}): {f.title}{objects}", indent=""))
    elif facts.findings:
        add(f"# The pre-flight check for {', '.join(hops)} found no Required finding that needs a waiver.")
    if sorted_findings.settled:
        add("# Required findings the catch-up and add-on steps below settle:")
        for hop, f in sorted_findings.settled:
            out.extend(_comment(f"  {f.id} (check for {hop}): {f.title}", indent=""))
    for note in facts.notes:
        out.extend(_comment(f"Not read: {note}", indent=""))
    add(f"name: {_q(f'{inputs.cluster}-{minor}'.replace('.', '-'))}")
    add(f"description: {_q(f'{inputs.cluster} from {current} to {target}, drafted from the cluster.')}")
    add(f"cluster: {_q(inputs.cluster)}")
    add(f"current_version: {_q(current)}")
    add(f"target_version: {_q(target)}")
    out.extend(_comment(inputs.window_note, indent=""))
    add("window:")
    add(f"  start: {_q(inputs.window[0])}")
    add(f"  end: {_q(inputs.window[1])}")
    add(f"  timezone: {_q(inputs.window[2])}")
    channels = {k: v for k, v in inputs.channels.items() if v}
    if channels:
        add("# From the configuration's channels and roster.")
        add("channels:")
        for key, channel in channels.items():
            add(f"  {key}: {channel}")
    else:
        add("# No channels in the configuration: the run posts where it is started. The roster is the")
        add("# configuration's.")
    add("roster:")
    for role, people in inputs.roster.items():
        add(f"  {role}: [{', '.join(people)}]")
    add("defaults:")
    add("  timeout: 2h")
    add("  escalate_after: 15m")
    add("  on_failure: pause")
    add("")
    add("steps:")
    add("  # -- preparation " + "-" * 80)

    def step(why: str, lines: Sequence[str]) -> None:
        out.extend(_comment(why))
        out.extend(f"  {line}" if i == 0 else f"    {line}" for i, line in enumerate(lines))

    def hop_id(base: str, hop: str) -> str:
        return f"{base}-{_dash(hop)}" if chained else base

    def check_step(hop: str, phase: str, why: str) -> None:
        step(
            why,
            [
                f"- id: {hop_id('checks', hop)}",
                f"phase: {phase}",
                f"title: Pre-flight checks for {hop}",
                f"gate: {_gate(lead)}",
                "actions:",
                f"  - check: {{to: {_q(hop)}}}",
            ],
        )

    step(
        "A record of the cluster before anything changes; the diff at the end compares against it.",
        [
            "- id: snapshot-pre",
            "phase: preparation",
            "title: Snapshot the cluster before the upgrade",
            f"gate: {anyone}",
            "actions:",
            "  - snapshot: {label: pre}",
        ],
    )
    check_step(
        hops[0],
        "preparation",
        f"Removed APIs, version skew, drain blockers and known issues for {hops[0]}"
        + (f" (the first of {len(hops)} hops; each hop has its own check)." if chained else "."),
    )
    step(
        "People outside the team hear about the window before it starts.",
        [
            "- id: announce-start",
            "phase: preparation",
            "title: Announce the maintenance window",
            "description: Post the start announcement in the announcement channel.",
            f"gate: {_gate(announcer)}",
            f"done: {_gate(announce_done)}",
        ],
    )
    how = {
        "pipeline": "Merge the infrastructure PR that bumps the cluster version",
        "eks-managed": "Start the EKS control-plane update (console, eksctl or the API)",
        "generic": "Upgrade the control plane the way this cluster's platform does it",
    }[inputs.style]
    step_keys = group_step_keys(
        [g.name for g in groups], reserve=_CATCH_UP_SUFFIX if catch_up_possible else 0
    )
    addons_on = dict(provider.addons) if provider is not None else {}

    def group_steps(group: NodeGroup, why: str, to: str, to_full: str, suffix: str) -> None:
        """One node group brought to `to`: EKS's update, a person's, or launch/drain/wait."""
        key = step_keys[group.name] + suffix
        g, sel = group.name, group.selector()
        if inputs.style == "eks-managed" and eks and g in managed:
            step(
                why + f"\n{cloud} lists {g} as a managed node group: "
                "the bot starts its update (UpdateNodegroupVersion); EKS replaces and drains the nodes.",
                [
                    f"- id: update-{key}",
                    "phase: roll out",
                    f"title: Update the managed node group {g} to {to}",
                    f"gate: {four_eyes}",
                    "actions:",
                    f"  - eks-update-nodegroup: {{nodegroup: {_q(g)}, version: {_q(to)}, timeout: 1h}}",
                    *evidence_lines(inputs),
                ],
            )
        elif inputs.style == "eks-managed" and not eks:
            step(
                why + "\nEKS replaces a managed group's nodes and drains them itself; the bot waits for it.",
                [
                    f"- id: update-{key}",
                    "phase: roll out",
                    f"title: Start the managed node group update of {g}",
                    f"gate: {_gate(lead)}",
                    f"done: {anyone}",
                    "rehearsal:",
                    f"  - replace_node_group: {{name: {_q(g)}, version: {_q(to_full)}}}",
                ],
            )
        else:
            verb = "Merge the node group PR for" if inputs.style == "pipeline" else "Add new nodes to"
            own = (
                f"\n{cloud} does not list {g} as a managed node group: it is self-managed."
                if eks and g not in managed
                else ""
            )
            step(
                why + own + "\nPeople launch the new nodes; the bot drains the old ones.",
                [
                    f"- id: launch-{key}",
                    "phase: roll out",
                    f"title: {verb} {g} (its new {to} nodes join)",
                    f"gate: {_gate(lead)}",
                    f"done: {anyone}",
                    "rehearsal:",
                    f"  - replace_node_group: {{name: {_q(g)}, version: {_q(to_full)}, drain: external}}",
                ],
            )
            step(
                f"Cordon and drain the {g} nodes (labelled {sel}) below {to} through the eviction API\n"
                "(budgets respected).",
                [
                    f"- id: drain-{key}",
                    "phase: roll out",
                    f"title: Cordon and drain the old {g} nodes",
                    f"gate: {four_eyes}",
                    "actions:",
                    f'  - drain: {{nodegroup: {_q(g)}, version: {_q(to)}, allow_local_storage: "true", timeout: 15m}}',
                    *evidence_lines(inputs),
                ],
            )
        step(
            f"{g} (nodes labelled {sel}) is done when every node is on {to} and Ready.",
            [
                f"- id: wait-{key}",
                "phase: roll out",
                f"title: Wait until {g} is entirely on {to} and Ready",
                f"gate: {anyone}",
                "actions:",
                f"  - wait-nodegroup: {{nodegroup: {_q(g)}, version: {_q(to)}, timeout: 30m}}",
            ],
        )

    def catch_up(hop: str) -> None:
        """The node groups a `hop` control plane would leave beyond the skew go to the minor below it
        first (EKS refuses the update otherwise; the skew policy forbids it)."""
        hop_minor = _minor_of(hop) or 0
        behind = f"1.{hop_minor - 1}"
        for group in groups:
            is_managed = eks and group.name in managed
            need = hop_minor - 1 if is_managed else hop_minor - kubelet_skew(hop_minor)
            if not 0 < on[group.name] < need:
                continue
            rule = (
                f"EKS updates the control plane only when its managed node groups are on its version ({behind})"
                if is_managed
                else f"the version skew policy lets a kubelet lag a {hop} API server by {kubelet_skew(hop_minor)} minors at most"
            )
            to_full = current_full if _minor_of(current_full) == hop_minor - 1 else f"{behind}.0"
            group_steps(
                group,
                f"Node group {group.name} (nodes labelled {group.selector()}) is on 1.{on[group.name]} "
                f"({group.why()}): {rule}, so it goes to {behind} before the control plane goes to {hop}.",
                behind,
                to_full,
                f"-to-{_dash(behind)}",
            )
            on[group.name] = hop_minor - 1

    for n, hop in enumerate(hops):
        hop_minor = _minor_of(hop) or 0
        last = n == len(hops) - 1
        hop_full = full if last else f"{hop}.0"
        behind = f"1.{hop_minor - 1}"
        if n > 0:
            # Workers first: the hop's check then sees the cluster as the hop will find it (a
            # check for 1.33 before the nodes left 1.29 finds the skew the plan is about to fix).
            catch_up(hop)
            check_step(
                hop,
                "roll out",
                f"Hop {n + 1} of {len(hops)}: the checks for {hop} on the cluster as it is now (on {behind}),\n"
                f"so an API that {hop} removes is caught before this hop, not at the end.",
            )
        fixes = sorted_findings.fixable.get(hop, ())
        removed = [f for f in fixes if f.id == API_REMOVED]
        if removed:
            moved = [o for f in removed for o in f.objects]
            listed = "; ".join(f"{f.title}: {_named_objects(f.objects)}" for f in removed)
            step(
                f"The check for {hop} found objects on APIs {hop} no longer serves (API001): {listed}.\n"
                "A person moves them to the replacement API (the manifests, the Helm chart, the client)\n"
                f"before the control plane goes to {hop}.",
                [
                    f"- id: {hop_id('migrate-apis', hop)}",
                    "phase: roll out" if n > 0 else "phase: preparation",
                    f"title: {_q(f'Move {len(moved)} object(s) off the APIs {hop} removes')}",
                    f"description: {_q('Apply each with its replacement API, then mark done: ' + listed)}",
                    f"gate: {_gate(lead)}",
                    f"done: {anyone}",
                ],
            )
        proxy = [f for f in fixes if f.id in KUBE_PROXY_FINDINGS]
        if proxy:
            why = "; ".join(f"{f.id}: {f.title} ({_named_objects(f.objects, 2)})" for f in proxy)
            current_minor = f"1.{hop_minor - 1}"
            offered = (provider.offered.get(current_minor, {}) if provider is not None else {}).get(
                "kube-proxy"
            )
            if eks and "kube-proxy" in addons_on and offered:
                addons_on["kube-proxy"] = offered
                step(
                    f"The check for {hop} found {why}. kube-proxy is an EKS add-on: its update to\n"
                    f"{offered} (EKS's default for {current_minor}) brings it within the skew before the control plane.",
                    [
                        f"- id: {hop_id('kube-proxy', hop)}",
                        "phase: preparation",
                        f"title: Update the kube-proxy add-on to {offered}",
                        f"gate: {four_eyes}",
                        "actions:",
                        f"  - eks-update-addon: {{addon: kube-proxy, version: {_q(offered)}}}",
                    ],
                )
            else:
                step(
                    f"The check for {hop} found {why}: the image EKS documents for the cluster's version\n"
                    "brings kube-proxy back before the control plane moves.",
                    [
                        f"- id: {hop_id('kube-proxy', hop)}",
                        "phase: preparation",
                        "title: Set kube-proxy's image to the documented one",
                        f"gate: {four_eyes}",
                        "actions:",
                        "  - set-image: {workload: daemonset/kube-system/kube-proxy, container: kube-proxy}",
                    ],
                )
        for f in (f for f in fixes if f.id == CORDONED):
            verb, args = _action_args(f.action)
            step(
                f"The check found cordoned nodes (NODE002): {_named_objects(f.objects, 4)}. Capacity is lower\n"
                "than it looks; ask why they were cordoned before approving (an uncordon may undo a reason).",
                [
                    f"- id: {hop_id('uncordon-nodes', hop)}",
                    "phase: preparation",
                    "title: Uncordon the nodes left cordoned",
                    f"gate: {four_eyes}",
                    "actions:",
                    f"  - {verb}: {_flow(args)}",
                ],
            )
        if n == 0:
            # What settles the first hop's findings is preparation; the roll out starts here.
            add("")
            add("  # -- roll out " + "-" * 83)
        if n == 0:
            catch_up(hop)
        control = hop_id("control-plane", hop)
        if eks and inputs.style == "eks-managed":
            step(
                f"The control plane goes first: kubelets may lag it, never lead it. The cluster is an EKS\n"
                f"cluster ({provider.name if provider else ''}): the bot calls UpdateClusterVersion to {hop} and follows it.",
                [
                    f"- id: {control}",
                    "phase: roll out",
                    f"title: Update the EKS control plane to {hop}",
                    f"gate: {four_eyes}",
                    "timeout: 1h",
                    "announce: step-complete",
                    "actions:",
                    f"  - eks-update-cluster: {{version: {_q(hop)}, timeout: 1h}}",
                ],
            )
        else:
            step(
                "The control plane goes first: kubelets may lag it, never lead it. No plan action upgrades it\n"
                "(the plan language has no control-plane action): a person does it and marks it done.",
                [
                    f"- id: {control}",
                    "phase: roll out",
                    f"title: Upgrade the control plane to {hop}",
                    f"description: {_q(how + '; mark the step done once the API server reports ' + hop + '.')}",
                    f"gate: {four_eyes}",
                    f"done: {anyone}",
                    "timeout: 1h",
                    "announce: step-complete",
                    "rehearsal:",
                    f"  - upgrade_control_plane: {{version: {_q(hop_full)}}}",
                ],
            )
        if provider is not None:
            step(
                f"An upgrading control plane runs old and new API servers behind one endpoint: the next\n"
                f"steps wait until /version says {hop} on several answers in a row.",
                [
                    f"- id: {hop_id('wait-controlplane', hop)}",
                    "phase: roll out",
                    f"title: Wait until every API server answers {hop}",
                    f"gate: {anyone}",
                    "actions:",
                    f"  - wait-controlplane: {{version: {_q(hop)}, timeout: 30m}}",
                ],
            )
        if provider is not None:
            ranked = sorted(
                provider.addons,
                key=lambda a: (ADDON_ORDER.index(a) if a in ADDON_ORDER else len(ADDON_ORDER), a),
            )
            for addon in ranked:
                offered = provider.offered.get(hop, {}).get(addon)
                if not offered or offered == addons_on.get(addon):
                    continue
                step(
                    f"The {addon} add-on is on {addons_on.get(addon) or 'an unknown version'}; "
                    f"{provider.kind.upper()} offers {offered} as its default for {hop}.",
                    [
                        f"- id: {hop_id('addon-' + _NOT_ID.sub('-', addon.lower()).strip('-'), hop)}",
                        "phase: roll out",
                        f"title: Update the {addon} add-on to {offered}",
                        f"gate: {four_eyes}",
                        "actions:",
                        f"  - eks-update-addon: {{addon: {_q(addon)}, version: {_q(offered)}}}",
                    ],
                )
                addons_on[addon] = offered
        if fargate:
            step(
                f"Fargate nodes (labelled eks.amazonaws.com/compute-type=fargate) run {', '.join(fargate)};\n"
                f"a Fargate pod keeps its kubelet version until it is restarted (now {hop}).",
                [
                    f"- id: {hop_id('restart-coredns' if any('coredns' in w for w in fargate) else 'restart-fargate', hop)}",
                    "phase: roll out",
                    f"title: Restart what runs on Fargate ({', '.join(w.rsplit('/', 1)[1] for w in fargate)})",
                    f"gate: {four_eyes}",
                    "actions:",
                    f"  - restart: {{workloads: {_q(', '.join(fargate))}, timeout: 15m}}",
                ],
            )
    final_minor = _minor_of(minor) or 0
    mesh_restarted = False
    for group in groups:
        label = _RANK_WHY[group.kind] if group.name not in inputs.order else "placed by the configuration"
        if on[group.name] >= final_minor:
            continue
        group_steps(
            group,
            f"Node group {group.name} (nodes labelled {group.selector()}; {label}): {group.why()}.",
            minor if inputs.style == "eks-managed" and eks and group.name in managed else target,
            full,
            "",
        )
        if group.kind == "mesh" and lagging:
            mesh_restarted = True
            found = ", ".join(f"{ns} ({v})" for ns, v in lagging.items())
            step(
                f"Sidecars behind istiod {istiod} in: {found}. Restarting after the gateways moved\n"
                "brings them to istiod's proxy.",
                [
                    "- id: restart-istio-data-plane",
                    "phase: roll out",
                    f"title: Restart the Istio data plane (sidecars behind istiod {istiod})",
                    f"gate: {four_eyes}",
                    "actions:",
                    f"  - restart: {{workloads: {_q(', '.join(sidecar_workloads))}, timeout: 20m}}",
                ],
            )
    if lagging and not mesh_restarted:
        step(
            f"Sidecars behind istiod {istiod} in: {', '.join(lagging)}.",
            [
                "- id: restart-istio-data-plane",
                "phase: roll out",
                "title: Restart the Istio data plane",
                f"gate: {four_eyes}",
                "actions:",
                f"  - restart: {{workloads: {_q(', '.join(sidecar_workloads))}, timeout: 20m}}",
            ],
        )
    names = ",".join(g.name for g in groups)
    watch = [f"      nodegroup: {_q(names)}"] if names else []
    labelled = f" (nodes labelled {', '.join(g.selector() for g in groups)})" if groups else ""
    step(
        f"The cluster settles: every group{labelled} on the target, no new unhealthy pod for 5\n"
        "minutes; a crash loop or an image pull that lasts 10 minutes stops the run.",
        [
            "- id: watch-settle",
            "phase: roll out",
            f"title: Watch the cluster settle on {minor}",
            f"gate: {anyone}",
            "actions:",
            "  - watch:",
            *watch,
            f"      version: {_q(target)}",
            "      settle: 5m",
            "      crashloop_after: 10m",
            "      imagepull_after: 10m",
            "      timeout: 1h",
        ],
    )
    if inputs.alerts:
        step(
            "No new alerts: none firing that was not at the baseline (the `pre` snapshot) for 10\n"
            "minutes; a critical one fails at once. No answer from Alertmanager asks people.",
            [
                "- id: settle-alerts",
                "phase: roll out",
                "title: No new alerts while the cluster settles",
                f"gate: {anyone}",
                "actions:",
                f"  - alerts: {{settle: 10m, ignore: {_q(ALWAYS_FIRING)}, timeout: 30m}}",
            ],
        )
    if inputs.metrics:
        step(
            "The apiserver's 4xx rate stays near its baseline (the `pre` snapshot's value): five\n"
            "measurements a minute apart; no data asks people, never passes.",
            [
                "- id: settle-apiserver-4xx",
                "phase: roll out",
                "title: The apiserver's 4xx rate stays near its baseline",
                f"gate: {anyone}",
                "actions:",
                f"  - analysis: {{query: {_q(APISERVER_4XX)}, success: {_q(APISERVER_4XX_SUCCESS)}, interval: 1m, count: 5}}",
            ],
        )
    add("")
    add("  # -- post " + "-" * 87)
    step(
        "The record after, for the diff.",
        [
            "- id: snapshot-post",
            "phase: post",
            "title: Snapshot the cluster after the upgrade",
            f"gate: {anyone}",
            "actions:",
            "  - snapshot: {label: post}",
        ],
    )
    step(
        "What changed between before and after: lost workloads, new crash loops, nodes gone.",
        [
            "- id: diff",
            "phase: post",
            "title: Compare before and after",
            f"gate: {anyone}",
            "actions:",
            "  - diff: {before: pre, after: post}",
        ],
    )
    step(
        "People outside the team hear that it is over.",
        [
            "- id: announce-done",
            "phase: post",
            "title: Announce completion",
            "description: Post the completion announcement with the diff's summary.",
            f"gate: {_gate(announcer)}",
            f"done: {_gate(announce_done)}",
        ],
    )
    return "\n".join(out) + "\n"


#: How long a drafted plan's window is at most (a node group takes about half an hour; the runbook's
#: five groups and the control plane fill an afternoon), shortened to what the windows allow.
DRAFT_DURATION = timedelta(hours=5)
#: The shortest window worth proposing; below it the draft says no window fits.
SHORTEST_WINDOW = timedelta(hours=1)
_WINDOW_STEP = timedelta(minutes=15)


def draft_window(policy: Policy, *, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime, str]:
    """The drafted plan's window, one that `schedule` accepts: the first slot from tomorrow on,
    inside the configured windows and outside every freeze, as long as the windows allow (up to
    DRAFT_DURATION: a 14:00–17:00 window gets 3 hours, not 5 that never fit). With no window that
    fits, a placeholder the note says `schedule` will refuse."""
    after = now + timedelta(days=1)
    if not policy.windows:
        # Any time is allowed: tomorrow night (22:00), or the first time after it clear of freezes.
        night = datetime.combine(after.astimezone(zone).date(), time(22, 0), tzinfo=zone)
        slots = policy.next_slots(night, DRAFT_DURATION, count=1)
        start = slots[0].start if slots else night
        frozen = (
            f", outside the freezes ({'; '.join(f.describe() for f in policy.freezes)})"
            if policy.freezes
            else ""
        )
        return (
            start.astimezone(zone),
            (start + DRAFT_DURATION).astimezone(zone),
            f"No windows in the configuration (any time is allowed): tomorrow night{frozen}. Set the real one.",
        )
    duration = DRAFT_DURATION
    while duration >= SHORTEST_WINDOW:
        slots = policy.next_slots(after, duration, count=1)
        if slots:
            hours = f"{duration.total_seconds() / 3600:g}h"
            frozen = (
                f", outside the freezes ({'; '.join(f.describe() for f in policy.freezes)})"
                if policy.freezes
                else ""
            )
            return (
                slots[0].start.astimezone(zone),
                slots[0].end.astimezone(zone),
                f"The first slot of {hours} from tomorrow in the configured windows ({policy.describe()}){frozen}.",
            )
        duration -= _WINDOW_STEP
    night = datetime.combine(after.astimezone(zone).date(), time(22, 0), tzinfo=zone)
    return (
        night,
        night + DRAFT_DURATION,
        f"No slot of {SHORTEST_WINDOW.total_seconds() / 3600:g}h or more in the configured windows "
        f"({policy.describe()}) outside the freezes within a year: a placeholder that `schedule` refuses; "
        "set the real one (or a coordinator overrides).",
    )


def draft_inputs(
    *,
    cluster: str,
    target: str,
    style: str,
    now: datetime,
    roster: Mapping[str, Sequence[str]],
    channels: Mapping[str, str | None],
    windows: Policy,
    timezone: str,
    group_labels: Sequence[str] | None,
    order: Sequence[str] = (),
    alerts: bool = False,
    metrics: bool = False,
) -> DraftInputs:
    """What the configuration gives the draft: roster, channels, the next allowed window, the order."""
    if not roster:
        raise UserError("the configuration has no roster: a plan's gates need people (add `roster:`)")
    zone = ZoneInfo(timezone)
    start, end, note = draft_window(windows, now=now, zone=zone)
    return DraftInputs(
        cluster=cluster,
        target=target,
        style=style,
        roster={role: list(people) for role, people in roster.items()},
        channels={k: v for k, v in channels.items() if v},
        window=(f"{start:%Y-%m-%dT%H:%M}", f"{end:%Y-%m-%dT%H:%M}", timezone),
        window_note=note,
        group_labels=clusters.group_labels(group_labels),
        order=tuple(order),
        alerts=alerts,
        metrics=metrics,
    )


@dataclass(frozen=True)
class Draft:
    text: str
    groups: list[str]
    steps: int
    current: str


def summarise(text: str) -> Draft:
    """What a reply says of a draft: its node groups in order, its step count, its current version."""
    doc = yaml.safe_load(text)
    steps = doc.get("steps") or []
    # The groups waited for on the target (a catch-up step's wait is for an earlier version).
    target = str(doc.get("target_version", ""))
    waits = [
        a["wait-nodegroup"]
        for s in steps
        for a in s.get("actions") or []
        if isinstance(a, dict) and isinstance(a.get("wait-nodegroup"), dict)
    ]
    groups = list(dict.fromkeys(str(w.get("nodegroup")) for w in waits if str(w.get("version")) == target))
    return Draft(text=text, groups=groups, steps=len(steps), current=str(doc.get("current_version", "")))
