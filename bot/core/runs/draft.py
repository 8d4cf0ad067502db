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

import json
import re
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, pods_as_dicts
from bot.core.windows import Policy
from bot.errors import UserError

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


def group_step_keys(names: Sequence[str]) -> dict[str, str]:
    """Each node group's part of its step ids (`wait-<key>`), valid and unique in order: a node
    group is named by a label value, which may hold capitals, '_' and '.' and run to 63
    characters. Lower-cased, every run of other characters one '-', cut to fit; a key taken
    already (`NG_1` and `ng.1` both make `ng-1`) gets `-2`, `-3`… The YAML says the real name."""
    keys: dict[str, str] = {}
    used: set[str] = set()
    room = STEP_ID_LENGTH - _LONGEST_VERB
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


def draft_plan(snap: Mapping[str, Any], inputs: DraftInputs) -> str:
    """The plan's YAML text, commented, ready for `plan validate` and `plan load`."""
    if inputs.style not in STYLES:
        raise ValueError(f"unknown style {inputs.style!r}")
    target = inputs.target.lstrip("v")
    full = target if target.count(".") >= 2 else f"{target}.0"
    minor = ".".join(target.split(".")[:2])
    current = str((snap.get("version") or {}).get("gitVersion", "")).lstrip("v").split("-")[0] or "unknown"
    groups = discover_groups(snap, inputs.order)
    istiod, lagging, sidecar_workloads = lagging_sidecars(snap)
    fargate = fargate_restarts(snap)
    roles = list(inputs.roster)
    operators = [r for r in ("primary", "shadow") if r in inputs.roster] or roles[:2]
    lead = operators[:1]
    four_eyes = _gate(operators, "approve")
    anyone = _gate(operators)
    announcer = [r for r in ("coordinator",) if r in inputs.roster] or lead
    announce_done = list(dict.fromkeys([*announcer, *operators]))
    out: list[str] = []
    add = out.append
    add(f"# Drafted by `upgrade-bot plan draft --to {target} --style {inputs.style}` from what")
    add(f"# {snap.get('cluster', '')!s} showed at {str(snap.get('taken_at', ''))[:19]} UTC.")
    add("# Read every step before loading it: the order, the gates and the timeouts are a proposal.")
    add("# Node groups come from the first of these node labels present on a node:")
    for key in inputs.group_labels:
        add(f"#   {key}")
    if inputs.order:
        add(f"# In the configured order ({', '.join(inputs.order)}), the rest by the heuristic:")
    else:
        add("# Ordered by the heuristic (snapshot.node_group_order in the configuration fixes it):")
    add("# control components first, then the mesh's gateways, then the rest (largest first), then")
    add("# observability (logging/monitoring) last.")
    add(f"name: {_q(f'{inputs.cluster}-{minor}'.replace('.', '-'))}")
    add(f"description: {_q(f'{inputs.cluster} from {current} to {target}, drafted from the cluster.')}")
    add(f"cluster: {_q(inputs.cluster)}")
    add(f"current_version: {_q(current)}")
    add(f"target_version: {_q(target)}")
    add(f"# {inputs.window_note}")
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
    step(
        "Removed APIs, version skew, drain blockers and known issues for the target version.",
        [
            "- id: checks",
            "phase: preparation",
            f"title: Pre-flight checks for {minor}",
            f"gate: {_gate(lead)}",
            "actions:",
            f"  - check: {{to: {_q(minor)}}}",
        ],
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
    add("")
    add("  # -- roll out " + "-" * 83)
    how = {
        "pipeline": "Merge the infrastructure PR that bumps the cluster version",
        "eks-managed": "Start the EKS control-plane update (console, eksctl or the API)",
        "generic": "Upgrade the control plane the way this cluster's platform does it",
    }[inputs.style]
    step(
        "The control plane goes first: kubelets may lag it, never lead it. No plan action upgrades it\n"
        "(the plan language has no control-plane action): a person does it and marks it done.",
        [
            "- id: control-plane",
            "phase: roll out",
            f"title: Upgrade the control plane to {minor}",
            f"description: {_q(how + '; mark the step done once the API server reports ' + minor + '.')}",
            f"gate: {four_eyes}",
            f"done: {anyone}",
            "timeout: 1h",
            "announce: step-complete",
            "rehearsal:",
            f"  - upgrade_control_plane: {{version: {_q(full)}}}",
        ],
    )
    if fargate:
        step(
            f"Fargate nodes (labelled eks.amazonaws.com/compute-type=fargate) run {', '.join(fargate)};\n"
            "a Fargate pod keeps its kubelet version until it is restarted.",
            [
                "- id: restart-coredns" if any("coredns" in w for w in fargate) else "- id: restart-fargate",
                "phase: roll out",
                f"title: Restart what runs on Fargate ({', '.join(w.rsplit('/', 1)[1] for w in fargate)})",
                f"gate: {four_eyes}",
                "actions:",
                f"  - restart: {{workloads: {_q(', '.join(fargate))}, timeout: 15m}}",
            ],
        )
    step_keys = group_step_keys([g.name for g in groups])
    for group in groups:
        key = step_keys[group.name]
        label = _RANK_WHY[group.kind] if group.name not in inputs.order else "placed by the configuration"
        g, sel = group.name, group.selector()
        why = f"Node group {g} (nodes labelled {sel}; {label}): {group.why()}."
        if inputs.style == "eks-managed":
            step(
                why + "\nEKS replaces a managed group's nodes and drains them itself; the bot waits for it.",
                [
                    f"- id: update-{key}",
                    "phase: roll out",
                    f"title: Start the managed node group update of {g}",
                    f"gate: {_gate(lead)}",
                    f"done: {anyone}",
                    "rehearsal:",
                    f"  - replace_node_group: {{name: {_q(g)}, version: {_q(full)}}}",
                ],
            )
        else:
            verb = "Merge the node group PR for" if inputs.style == "pipeline" else "Add new nodes to"
            step(
                why + "\nPeople launch the new nodes; the bot drains the old ones.",
                [
                    f"- id: launch-{key}",
                    "phase: roll out",
                    f"title: {verb} {g} (its new {minor} nodes join)",
                    f"gate: {_gate(lead)}",
                    f"done: {anyone}",
                    "rehearsal:",
                    f"  - replace_node_group: {{name: {_q(g)}, version: {_q(full)}, drain: external}}",
                ],
            )
            step(
                f"Cordon and drain the {g} nodes (labelled {sel}) below {minor} through the eviction API\n"
                "(budgets respected).",
                [
                    f"- id: drain-{key}",
                    "phase: roll out",
                    f"title: Cordon and drain the old {g} nodes",
                    f"gate: {four_eyes}",
                    "actions:",
                    f'  - drain: {{nodegroup: {_q(g)}, version: {_q(target)}, allow_local_storage: "true", timeout: 15m}}',
                    *evidence_lines(inputs),
                ],
            )
        step(
            f"{g} (nodes labelled {sel}) is done when every node is on {minor} and Ready.",
            [
                f"- id: wait-{key}",
                "phase: roll out",
                f"title: Wait until {g} is entirely on {minor} and Ready",
                f"gate: {anyone}",
                "actions:",
                f"  - wait-nodegroup: {{nodegroup: {_q(g)}, version: {_q(target)}, timeout: 30m}}",
            ],
        )
        if group.kind == "mesh" and lagging:
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
    if lagging and not any(g.kind == "mesh" for g in groups):
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
    duration = timedelta(hours=5)
    slots = windows.next_slots(now + timedelta(days=1), duration) if windows.windows else []
    if slots:
        start, end = slots[0].start.astimezone(zone), slots[0].end.astimezone(zone)
        note = (
            f"The first slot of {duration.seconds // 3600}h in the configured windows ({windows.describe()})."
        )
    else:
        day = (now.astimezone(zone) + timedelta(days=1)).date()
        start = datetime.combine(day, time(22, 0), tzinfo=zone)
        end = start + duration
        note = "No windows in the configuration: a placeholder (tomorrow night), set the real one."
    return DraftInputs(
        cluster=cluster,
        target=target,
        style=style,
        roster={role: list(people) for role, people in roster.items()},
        channels={k: v for k, v in channels.items() if v},
        window=(f"{start:%Y-%m-%dT%H:%M}", f"{end:%Y-%m-%dT%H:%M}", timezone),
        window_note=note,
        group_labels=group_labels or DEFAULT_NODE_GROUP_LABELS,
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
    groups = [str(s["id"]).split("-", 1)[1] for s in steps if str(s["id"]).startswith("wait-")]
    return Draft(text=text, groups=groups, steps=len(steps), current=str(doc.get("current_version", "")))
