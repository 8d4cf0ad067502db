"""The `snapshot` action: take and store a snapshot of the run's cluster under a label, and with it
the evidence baseline (the alerts firing, the plan's analysis values: `bot.core.evidence.baseline`)
when the cluster names an Alertmanager or a Prometheus."""

from __future__ import annotations

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.records import ActionRequest


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    snapshot_id, label, counts = ctx.take_snapshot(
        request.cluster, request.call.args["label"], f"run:{request.run_id}"
    )
    detail = (
        f"snapshot #{snapshot_id} `{label}`: {counts['nodes']} nodes, "
        f"{counts['pods']} pods, {counts['workloads']} workloads"
    )
    baseline = ctx.record_baseline(request, snapshot_id) if ctx.record_baseline is not None else ""
    return ActionResult(ok=True, detail=f"{detail}; {baseline}" if baseline else detail)


SPEC = ActionSpec(
    name="snapshot",
    summary="take and store a snapshot of the cluster under a label",
    required=frozenset({"label"}),
    run=run,
)
