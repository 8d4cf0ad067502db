"""The steps of a drafted plan, written as commented YAML: the preparation, each control-plane hop
(its catch-up, check, fixes, control plane and the cloud's add-ons), the node groups, the settle
watch and evidence, and the post steps.

`DraftWriter` holds one draft's lines and what its steps share; `bot.core.runs.draft.draft_plan`
calls its sections in the plan's order. The facts it writes from are `bot.core.runs.draftfacts`'.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.checks.findings import REQUIRED
from bot.core.runs import draftclouds
from bot.core.runs.draftclouds import yaml_scalar as _q
from bot.core.runs.draftfacts import (
    API_REMOVED,
    CORDONED,
    KUBE_PROXY_FINDINGS,
    MANAGED_STYLES,
    POOL_CLOUDS,
    POOL_WORDS,
    RANK_WHY,
    DraftFacts,
    NodeGroup,
    discover_groups,
    fargate_restarts,
    hop_targets,
    kubelet_skew,
    lagging_sidecars,
    minor_of,
    sort_findings,
)

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
    #: The cloud the cluster's `provider:` names (`eks`, `aks`, `gke`; "" for none).
    cloud: str = ""


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


def _comment(text: str, indent: str = "  ") -> list[str]:
    lines = [
        part
        for line in text.splitlines()
        for part in textwrap.wrap(line, 96, break_long_words=False, break_on_hyphens=False) or [""]
    ]
    return [f"{indent}# {line}".rstrip() for line in lines]


def _gate(roles: Sequence[str], kind: str = "any_of") -> str:
    return "{" + kind + ": [" + ", ".join(roles) + "]}"


#: The add-ons EKS's upgrade guide updates first, in its order; the rest follow by name.
ADDON_ORDER = ("vpc-cni", "coredns", "kube-proxy")
#: How many objects a migration step's description names per finding (the check's report has all).
NAMED_OBJECTS = 8
#: The longest suffix of a catch-up step's id (`-to-1-100`).
_CATCH_UP_SUFFIX = len("-to-1-100")


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


class DraftWriter:
    """One draft being written: its lines so far, and what its steps share (the hops, the node
    groups, each group's kubelet minor as the catch-up steps move it, the add-ons' versions).
    `bot.core.runs.draft.draft_plan` calls the sections in the plan's order. Each section binds the
    shared values it reads to local names first: the step texts are long f-strings, and bare names
    keep them readable."""

    def __init__(self, snap: Mapping[str, Any], inputs: DraftInputs, facts: DraftFacts) -> None:
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
        # AKS, GKE: the cloud's own actions, with its versions (placeholders where it named none).
        kind = MANAGED_STYLES.get(inputs.style, "")
        pools = None
        if kind in POOL_CLOUDS and (provider is None or provider.kind == kind):
            pools = draftclouds.pool_cloud(
                kind,
                provider,
                current=str((snap.get("version") or {}).get("gitVersion", "")).lstrip("v"),
                hops=hops,
                target=target,
                snapshot_groups=[g.name for g in groups],
            )
            managed = set(pools.pools)
        # A pool the cloud lists with no node in the snapshot (scaled to zero) is upgraded too.
        seen = {g.name for g in groups}
        unseen = [p for p in sorted(managed) if p not in seen] if pools is not None else []
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
            minors = [m for m in (minor_of(v) for v in g.versions) if m is not None]
            on[g.name] = min(minors) if minors else 0
        catch_up_possible = chained or any(0 < m < (minor_of(minor) or 0) - 1 for m in on.values())
        how = {
            "pipeline": "Merge the infrastructure PR that bumps the cluster version",
            "eks-managed": "Start the EKS control-plane update (console, eksctl or the API)",
            "aks-managed": "Start the AKS control-plane upgrade (az aks upgrade --control-plane-only)",
            "gke-managed": "Start the GKE master upgrade (gcloud container clusters upgrade --master)",
            "generic": "Upgrade the control plane the way this cluster's platform does it",
        }[inputs.style]
        step_keys = group_step_keys(
            [g.name for g in groups] + unseen, reserve=_CATCH_UP_SUFFIX if catch_up_possible else 0
        )
        addons_on = dict(provider.addons) if provider is not None else {}
        self.snap, self.inputs, self.facts = snap, inputs, facts
        self.target, self.full, self.minor = target, full, minor
        self.current_full, self.current, self.hops, self.chained = current_full, current, hops, chained
        self.groups, self.fargate = groups, fargate
        self.istiod, self.lagging, self.sidecar_workloads = istiod, lagging, sidecar_workloads
        self.provider, self.eks, self.managed, self.cloud = provider, eks, managed, cloud
        self.pools, self.unseen = pools, unseen
        #: What the draft calls a node group: the cloud's word when it drafts the cloud's pools.
        self.noun = pools.word.capitalize() if pools is not None else "Node group"
        self.sorted_findings = sorted_findings
        self.lead, self.four_eyes, self.anyone = lead, four_eyes, anyone
        self.announcer, self.announce_done = announcer, announce_done
        self.on, self.how, self.step_keys, self.addons_on = on, how, step_keys, addons_on
        self.out: list[str] = []
        self.add = self.out.append

    def header(self) -> None:
        """The comments above the plan: where it comes from, how the groups were found and ordered,
        and the findings of the pre-flight check that the steps settle or that need a waiver."""
        snap, inputs, facts, target, current = self.snap, self.inputs, self.facts, self.target, self.current
        hops, chained, provider, managed = self.hops, self.chained, self.provider, self.managed
        sorted_findings, out, add = self.sorted_findings, self.out, self.add
        add(f"# Drafted by `upgrade-bot plan draft --to {target} --style {inputs.style}` from what")
        add(f"# {snap.get('cluster', '')!s} showed at {str(snap.get('taken_at', ''))[:19]} UTC.")
        add("# Read every step before loading it: the order, the gates and the timeouts are a proposal.")
        if chained:
            add(
                f"# {current} to {target} is {len(hops)} control-plane hops, one minor at a time ({', '.join(hops)}):"
            )
            add("# each hop has its own check, its add-ons and its restarts; node groups move between hops")
            add(
                "# only where the version skew policy (or the cloud) requires it, and all of them at the end."
            )
        if self.pools is not None:
            for line in draftclouds.header(self.pools, inputs.cluster):
                out.extend(_comment(line, indent=""))
        elif provider is not None and provider.kind in POOL_CLOUDS:
            out.extend(
                _comment(
                    f"The cloud's side from the {provider.kind.upper()} provider (cluster {provider.name}): "
                    f"{POOL_WORDS[provider.kind]}s {', '.join(sorted(managed)) or '(none)'}.",
                    indent="",
                )
            )
        elif provider is not None:
            add(
                f"# The cloud's side from the {provider.kind.upper()} provider (cluster {provider.name}): managed node"
            )
            add(
                f"# groups {', '.join(sorted(managed)) or '(none)'}; add-ons {', '.join(sorted(provider.addons)) or '(none)'}."
            )
        if self.pools is not None:
            add(
                f"# The {self.pools.word}s' nodes are found by the first of these node labels present on a node:"
            )
        else:
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
            add(
                f"# The pre-flight check for {', '.join(hops)} found no Required finding that needs a waiver."
            )
        if sorted_findings.settled:
            add("# Required findings the catch-up and add-on steps below settle:")
            for hop, f in sorted_findings.settled:
                out.extend(_comment(f"  {f.id} (check for {hop}): {f.title}", indent=""))
        if inputs.cloud in POOL_CLOUDS and self.pools is None:
            out.extend(
                _comment(draftclouds.other_style(inputs.cloud, inputs.cluster, inputs.style), indent="")
            )
        for note in facts.notes:
            out.extend(_comment(f"Not read: {note}", indent=""))

    def metadata(self) -> None:
        """The plan's name, versions, window, channels, roster and defaults, up to `steps:`."""
        inputs, target, minor, current, out = self.inputs, self.target, self.minor, self.current, self.out
        add = self.add
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

    def step(self, why: str, lines: Sequence[str]) -> None:
        out = self.out
        out.extend(_comment(why))
        out.extend(f"  {line}" if i == 0 else f"    {line}" for i, line in enumerate(lines))

    def hop_id(self, base: str, hop: str) -> str:
        chained = self.chained
        return f"{base}-{_dash(hop)}" if chained else base

    def check_step(self, hop: str, phase: str, why: str) -> None:
        lead, step, hop_id, found = self.lead, self.step, self.hop_id, self.sorted_findings
        # What the steps after this check settle (its API migration, kube-proxy, the catch-up of
        # lagging groups, the add-ons): listed on its line, not failing it.
        later = [f.id for f in found.fixable.get(hop, ()) if f.severity == REQUIRED]
        later += [f.id for at, f in found.settled if at == hop]
        ids = ",".join(dict.fromkeys(later))
        settled = f", settled_later: {_q(ids)}" if ids else ""
        if ids:
            why += f"\nThe steps below settle {ids.replace(',', ', ')}: listed on its line, not failing it."
        step(
            why,
            [
                f"- id: {hop_id('checks', hop)}",
                f"phase: {phase}",
                f"title: Pre-flight checks for {hop}",
                f"gate: {_gate(lead)}",
                "actions:",
                f"  - check: {{to: {_q(hop)}{settled}}}",
            ],
        )

    def preparation(self) -> None:
        """The record before, the first check and the start announcement."""
        hops, chained, anyone, announcer = self.hops, self.chained, self.anyone, self.announcer
        announce_done, step, check_step = self.announce_done, self.step, self.check_step
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

    def group_steps(self, group: NodeGroup, why: str, to: str, to_full: str, suffix: str) -> None:
        inputs, eks, managed, cloud, lead = self.inputs, self.eks, self.managed, self.cloud, self.lead
        four_eyes, anyone, step_keys, step = self.four_eyes, self.anyone, self.step_keys, self.step
        """One node group brought to `to`: EKS's update, a person's, or launch/drain/wait."""
        key = step_keys[group.name] + suffix
        g, sel = group.name, group.selector()
        if self.pools is not None and g in managed:
            more, lines = draftclouds.pool_step(
                self.pools,
                g,
                to,
                step_id=f"update-{key}",
                gate=four_eyes,
                background=evidence_lines(inputs),
            )
            step(why + "\n" + more, lines)
            if not group.nodes:
                return  # no node to wait for: the cloud's operation is the pool's whole upgrade
        elif inputs.style == "eks-managed" and eks and g in managed:
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
                f"\n{cloud} does not list {g} as a {POOL_WORDS[provider.kind]}: it is self-managed."
                if (provider := self.provider) is not None and g not in managed
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

    def catch_up(self, hop: str) -> None:
        current_full, groups, eks, managed = self.current_full, self.groups, self.eks, self.managed
        on, group_steps = self.on, self.group_steps
        """The node groups a `hop` control plane would leave beyond the skew go to the minor below it
        first (EKS refuses the update otherwise; the skew policy forbids it)."""
        hop_minor = minor_of(hop) or 0
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
            to_full = current_full if minor_of(current_full) == hop_minor - 1 else f"{behind}.0"
            group_steps(
                group,
                f"{self.noun} {group.name} (nodes labelled {group.selector()}) is on 1.{on[group.name]} "
                f"({group.why()}): {rule}, so it goes to {behind} before the control plane goes to {hop}.",
                behind,
                to_full,
                f"-to-{_dash(behind)}",
            )
            on[group.name] = hop_minor - 1

    def hop(self, n: int, hop: str) -> None:
        """The `n`th control-plane hop: its catch-up and check (after the first), what settles its
        findings, the control plane, then the cloud's steps."""
        full, hops, add, check_step, catch_up = self.full, self.hops, self.add, self.check_step, self.catch_up
        hop_minor = minor_of(hop) or 0
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
        self.hop_fixes(n, hop)
        if n == 0:
            # What settles the first hop's findings is preparation; the roll out starts here.
            add("")
            add("  # -- roll out " + "-" * 83)
        if n == 0:
            catch_up(hop)
        self.control_plane(hop, hop_full)
        self.cloud_steps(hop)

    def hop_fixes(self, n: int, hop: str) -> None:
        """What settles a hop's findings before its control plane: API migrations, kube-proxy, uncordons."""
        provider, eks, sorted_findings, lead = self.provider, self.eks, self.sorted_findings, self.lead
        four_eyes, anyone, addons_on, step = self.four_eyes, self.anyone, self.addons_on, self.step
        hop_id = self.hop_id
        hop_minor = minor_of(hop) or 0
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

    def control_plane(self, hop: str, hop_full: str) -> None:
        """The control plane to `hop`: EKS's update, or a person's step."""
        inputs, provider, eks, four_eyes = self.inputs, self.provider, self.eks, self.four_eyes
        anyone, how, step, hop_id = self.anyone, self.how, self.step, self.hop_id
        control = hop_id("control-plane", hop)
        if self.pools is not None:
            step(*draftclouds.control_plane(self.pools, hop, step_id=control, gate=four_eyes))
        elif eks and inputs.style == "eks-managed":
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
                "The control plane goes first: kubelets may lag it, never lead it. No action of this draft\n"
                "upgrades it: a person does it and marks it done.",
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

    def cloud_steps(self, hop: str) -> None:
        """After a provider's control plane: wait for every API server, the add-ons, then Fargate's restarts."""
        fargate, provider, four_eyes, anyone = self.fargate, self.provider, self.four_eyes, self.anyone
        addons_on, step, hop_id = self.addons_on, self.step, self.hop_id
        if provider is not None or self.pools is not None:
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

    def node_groups(self) -> None:
        """Every node group to the target, with the Istio data plane's restart after the mesh's."""
        inputs, target, full, minor, groups = self.inputs, self.target, self.full, self.minor, self.groups
        istiod, lagging, sidecar_workloads, eks = self.istiod, self.lagging, self.sidecar_workloads, self.eks
        managed, four_eyes, on, step = self.managed, self.four_eyes, self.on, self.step
        group_steps = self.group_steps
        final_minor = minor_of(minor) or 0
        mesh_restarted = False
        for group in groups:
            label = RANK_WHY[group.kind] if group.name not in inputs.order else "placed by the configuration"
            if on[group.name] >= final_minor:
                continue
            group_steps(
                group,
                f"{self.noun} {group.name} (nodes labelled {group.selector()}; {label}): {group.why()}.",
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
        for name in self.unseen:
            group_steps(
                NodeGroup(name),
                f"{self.noun} {name} has no node in the snapshot (scaled to zero?): its version still moves "
                "with the cluster's.",
                target,
                full,
                "",
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

    def settle(self) -> None:
        """The watch that the cluster settles, and the evidence steps its sources allow."""
        inputs, target, minor, groups, anyone = self.inputs, self.target, self.minor, self.groups, self.anyone
        step = self.step
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

    def post(self) -> None:
        """The record after, the diff and the completion announcement."""
        anyone, announcer, announce_done, add = self.anyone, self.announcer, self.announce_done, self.add
        step = self.step
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
