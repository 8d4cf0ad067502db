"""The `check` action: the pre-flight checks and known-issue rules; a Required finding fails the step.

The step's thread gets one line: the verdict, the Required findings' ids and the counts; the full
report is `/upgrade check` (or `upgrade-bot check --format md`) on the same cluster.
"""

from __future__ import annotations

from collections import Counter

from bot.core.actions.base import ActionContext, ActionRequest, ActionResult, ActionSpec
from bot.core.checks.findings import REQUIRED
from bot.errors import UserError


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.run_check is None:
        raise UserError("this front door cannot run the pre-flight checks")
    report = ctx.run_check(request.cluster, request.call.args.get("to") or None)
    required = [f for f in report.findings if f.severity == REQUIRED]
    recommended = len(report.findings) - len(required)
    if not required:
        return ActionResult(
            ok=True,
            detail=f"pre-flight check for {report.target} passed: no Required findings, {recommended} Recommended",
        )
    counts = Counter(f.id for f in required)
    shown = ", ".join(f"{i} ×{n}" if n > 1 else i for i, n in sorted(counts.items()))
    return ActionResult(
        ok=False,
        detail=(
            f"pre-flight check for {report.target} FAILED: {len(required)} Required ({shown}), "
            f"{recommended} Recommended — `/upgrade check --to {report.target}` for the full report"
        ),
    )


SPEC = ActionSpec(
    name="check",
    summary="run the pre-flight checks and known-issue rules; a Required finding fails the step",
    optional=frozenset({"to"}),
    run=run,
)
