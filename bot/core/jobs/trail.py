"""What the bot leaves on a node it cordons, so a person at the node can tell who did it and why.

A cordon, and the cordon a drain begins with, writes two annotations in the same patch as
`spec.unschedulable` (so the node can never be cordoned by the bot without saying so):

    upgrade-bot.io/cordoned-by: run=R step=S job=J approved-by=U1,U2
    upgrade-bot.io/cordoned-at: 2026-11-26T10:00:00Z

and records a core/v1 Event about the Node (`kubectl describe node` lists it): reason
`UpgradeBotCordon` or `UpgradeBotDrain`, its message naming the same run, step and approvers.
An uncordon removes both annotations in its patch and records `UpgradeBotUncordon`.

The run, step, job and approvers (`trail`) are stored in the job's progress when the job service
plans it, so a tick re-run after a crash writes the same words. The Event's name is derived from
them and the node, so recording it again after a crash answers "already exists" instead of making
a second one. An Event the API refuses (the act role without `create events`) is logged and
skipped: the annotation, written with the cordon itself, is the record that cannot be lost.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from bot.core.checks.preflight import CORDONED_BY as CORDONED_BY  # one name for both
from bot.errors import ClusterError

log = logging.getLogger(__name__)

#: The progress key of the trail (set by `JobService` when it plans a job).
TRAIL = "trail"
CORDONED_AT = "upgrade-bot.io/cordoned-at"
ANNOTATIONS = (CORDONED_BY, CORDONED_AT)  # CORDONED_BY: NODE002 tells the bot's cordons by it

CORDON_REASON = "UpgradeBotCordon"
DRAIN_REASON = "UpgradeBotDrain"
UNCORDON_REASON = "UpgradeBotUncordon"


class EventCluster(Protocol):
    """The adapter method that records an Event about a node (`bot.adapters.kube.Cluster`)."""

    def node_event(
        self, node: str, *, uid: str, name: str, reason: str, message: str, action: str, at: datetime
    ) -> bool: ...


def make_trail(*, run_id: str, step_id: str, job_id: int, approved_by: Sequence[str]) -> dict[str, Any]:
    """The trail a job stores in its progress (JSON-able)."""
    return {"run": run_id, "step": step_id, "job": job_id, "approved_by": list(dict.fromkeys(approved_by))}


def describe(trail: Mapping[str, Any] | None) -> str:
    """`run=R step=S job=J approved-by=U1,U2` (the annotation's value); what is unknown is left out."""
    trail = trail or {}
    parts = [f"{key}={trail[key]}" for key in ("run", "step", "job") if trail.get(key) not in (None, "")]
    approvers = [str(a) for a in trail.get("approved_by") or []]
    if approvers:
        parts.append(f"approved-by={','.join(approvers)}")
    return " ".join(parts) or "upgrade-bot"


def cordon_annotations(trail: Mapping[str, Any] | None, now: datetime) -> dict[str, str]:
    return {
        CORDONED_BY: describe(trail),
        CORDONED_AT: now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def message(verb: str, trail: Mapping[str, Any] | None) -> str:
    """The Event's message: "cordoned by upgrade-bot: run R, step S (job J), approved by U1, U2"."""
    trail = trail or {}
    text = f"{verb} by upgrade-bot"
    where = []
    if trail.get("run"):
        where.append(f"run {trail['run']}")
    if trail.get("step"):
        step = f"step {trail['step']}"
        if trail.get("job") not in (None, ""):
            step += f" (job {trail['job']})"
        where.append(step)
    approvers = [str(a) for a in trail.get("approved_by") or []]
    if approvers:
        where.append(f"approved by {', '.join(approvers)}")
    return f"{text}: {', '.join(where)}" if where else text


def event_name(node: str, reason: str, trail: Mapping[str, Any] | None) -> str:
    """Deterministic per (node, reason, run, step, job): the same Event after a crash, not another."""
    trail = trail or {}
    key = "/".join(str(trail.get(k, "")) for k in ("run", "step", "job"))
    digest = hashlib.sha256(f"{node}/{reason}/{key}".encode()).hexdigest()[:12]
    return f"{node}.upgrade-bot-{digest}"


def leave_event(
    cluster: EventCluster,
    node: Mapping[str, Any],
    *,
    reason: str,
    verb: str,
    trail: Mapping[str, Any] | None,
    now: datetime,
) -> None:
    """Record the Event on `node` (raw Node JSON); a refusal is logged, never raised."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    try:
        cluster.node_event(
            name,
            uid=str(meta.get("uid", "")),
            name=event_name(name, reason, trail),
            reason=reason,
            message=message(verb, trail),
            action=reason.removeprefix("UpgradeBot"),
            at=now,
        )
    except ClusterError as exc:
        log.warning("node %s: the %s event was not recorded: %s", name, reason, exc.user_message)
