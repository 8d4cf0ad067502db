"""The `snapshot` action: take and store a snapshot of the run's cluster under a label, and with it
the evidence baseline (the alerts firing, the plan's analysis values: `bot.core.evidence.baseline`)
when the cluster names an Alertmanager or a Prometheus."""

from __future__ import annotations

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.core.snapshots.labels import new_label
from bot.errors import clip
from bot.records import ActionRequest

#: How many of a snapshot's gaps its step's line names (the others are counted), and how long each
#: one's reason may run: `/upgrade snapshots` and the snapshot's own reply have them all.
GAPS_NAMED = 3
GAP_REASON_CHARS = 100


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    snapshot_id, label, counts, gaps = ctx.take_snapshot(
        request.cluster, request.call.args["label"], f"run:{request.run_id}"
    )
    detail = (
        f"snapshot #{snapshot_id} `{label}`: {counts['nodes']} nodes, "
        f"{counts['pods']} pods, {counts['workloads']} workloads"
    )
    if gaps:
        # A snapshot that missed a list is still stored (a diff says what it cannot compare); the
        # line says so, or "0 pods" would read as a cluster without pods.
        named = [f"{resource} ({clip(reason, GAP_REASON_CHARS)})" for resource, reason in gaps[:GAPS_NAMED]]
        more = f" …and {len(gaps) - GAPS_NAMED} more" if len(gaps) > GAPS_NAMED else ""
        detail += f"; not captured: {', '.join(named)}{more}"
    baseline = ctx.record_baseline(request, snapshot_id) if ctx.record_baseline is not None else ""
    return ActionResult(ok=True, detail=f"{detail}; {baseline}" if baseline else detail)


SPEC = ActionSpec(
    name="snapshot",
    summary="take and store a snapshot of the cluster under a label",
    required=frozenset({"label"}),
    run=run,
    # A label `diff` could not find (a number, "#…") is refused when the plan is read.
    check=lambda args: new_label(str(args.get("label", ""))),
)
