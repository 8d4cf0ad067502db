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

For an AKS or GKE cluster the default style is the cloud's own (`aks-managed`, `gke-managed`): the
shape of `templates/plans/<cloud>-managed.yaml`, the control plane and each pool through the cloud's
actions at versions it offers (`draftclouds`).

The facts are gathered in `draftfacts` and the steps written by `draftsteps.DraftWriter`; the
names callers use are re-exported here, where they have always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bot.core import clusters
from bot.core.providers import PROVIDER_KEYS
from bot.core.runs.draftfacts import MANAGED_STYLES, POOL_CLOUDS, POOL_WORDS
from bot.core.runs.draftfacts import STYLES as STYLES
from bot.core.runs.draftfacts import DraftFacts as DraftFacts
from bot.core.runs.draftfacts import ProviderFacts as ProviderFacts
from bot.core.runs.draftfacts import cloud_of as cloud_of
from bot.core.runs.draftfacts import default_style as default_style
from bot.core.runs.draftfacts import discover_groups as discover_groups
from bot.core.runs.draftfacts import fargate_restarts as fargate_restarts
from bot.core.runs.draftfacts import gather_facts as gather_facts
from bot.core.runs.draftfacts import hop_targets as hop_targets
from bot.core.runs.draftfacts import kubelet_skew as kubelet_skew
from bot.core.runs.draftfacts import lagging_sidecars as lagging_sidecars
from bot.core.runs.draftsteps import DraftInputs as DraftInputs
from bot.core.runs.draftsteps import DraftWriter
from bot.core.runs.draftsteps import group_step_keys as group_step_keys
from bot.core.windows import Policy
from bot.errors import UserError


def draft_plan(snap: Mapping[str, Any], inputs: DraftInputs, facts: DraftFacts | None = None) -> str:
    """The plan's YAML text, commented, ready for `plan validate` and `plan load`."""
    if inputs.style not in STYLES:
        raise ValueError(f"unknown style {inputs.style!r}")
    writer = DraftWriter(snap, inputs, facts or DraftFacts())
    writer.header()
    writer.metadata()
    writer.preparation()
    for n, hop in enumerate(writer.hops):
        writer.hop(n, hop)
    writer.node_groups()
    writer.settle()
    writer.post()
    return "\n".join(writer.out) + "\n"


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
    cloud: str = "",
) -> DraftInputs:
    """What the configuration gives the draft: roster, channels, the next allowed window, the order.
    `cloud`: the cluster's provider (`cloud_of`). `style` "" is the cloud's own for an AKS or GKE
    cluster (`default_style`); a cloud's style is refused for a cluster whose provider is another
    cloud's (EKS does not replace an AKS pool), and `aks-managed`/`gke-managed` for a cluster that
    names no such provider (their actions need it)."""
    if not roster:
        raise UserError("the configuration has no roster: a plan's gates need people (add `roster:`)")
    style = style or default_style(cloud)
    wanted = MANAGED_STYLES.get(style, "")
    if wanted and cloud and cloud != wanted:
        own = (
            f", or --style {cloud}-managed for {cloud.upper()}'s own"
            if f"{cloud}-managed" in MANAGED_STYLES
            else ""
        )
        raise UserError(
            f"--style {style} drafts {wanted.upper()}'s steps, and {cluster}'s provider is {cloud.upper()}: "
            f"draft with --style pipeline or generic{own}"
        )
    if wanted in POOL_CLOUDS and not cloud:
        raise UserError(
            f"--style {style} drafts {wanted.upper()}'s actions, which need the cluster's provider: add "
            f"`provider: {{{wanted}: {{{PROVIDER_KEYS[wanted]}}}}}` to {cluster} in the configuration, "
            "or draft with --style pipeline or generic"
        )
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
        cloud=cloud,
    )


@dataclass(frozen=True)
class Draft:
    text: str
    groups: list[str]
    steps: int
    current: str
    #: What the cluster's cloud calls its node groups ("agent pools" on AKS).
    pools: str = "node groups"


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
    verbs = {str(k) for s in steps for a in s.get("actions") or [] if isinstance(a, dict) for k in a}
    pools = next(
        (f"{POOL_WORDS[c]}s" for c, (_, pool) in POOL_CLOUDS.items() if pool in verbs), "node groups"
    )
    return Draft(
        text=text,
        groups=groups,
        steps=len(steps),
        current=str(doc.get("current_version", "")),
        pools=pools,
    )
