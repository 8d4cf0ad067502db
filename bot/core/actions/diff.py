"""The `diff` action: compare two stored snapshots and report.

A diff that finds regressions is a failed step, so the run pauses there and people look before
the completion announcement goes out.
"""

from __future__ import annotations

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.records import ActionRequest


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    report = ctx.compare_snapshots(request.cluster, request.call.args["before"], request.call.args["after"])
    summary = f"diff: {len(report.regressions)} regression(s), {len(report.expected)} expected change(s)"
    if report.regressions:
        first = report.regressions[0]
        summary += f"; first: {first.category} — {first.subject}"
    return ActionResult(ok=not report.has_regressions, detail=summary)


SPEC = ActionSpec(
    name="diff",
    summary="compare two stored snapshots (by label or id) and post the report",
    required=frozenset({"before", "after"}),
    run=run,
)
