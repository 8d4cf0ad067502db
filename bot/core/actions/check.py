"""The `check` action: the pre-flight checks and known-issue rules; a Required finding fails the step.

The step's thread gets one line: the verdict, the Required findings' ids and the counts; the full
report is `/upgrade check` (or `upgrade-bot check --format md`) on the same cluster.
"""

from __future__ import annotations

from bot.core.actions.base import ActionContext, ActionRequest, ActionResult, ActionSpec
from bot.core.checks.findings import REQUIRED
from bot.errors import UserError

#: Required finding ids named in the step's line; more are counted.
SHOWN_IDS = 8


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
    ids = list(dict.fromkeys(f"{f.id} {f.objects[0]}" if f.objects else f.id for f in required))
    shown = "; ".join(ids[:SHOWN_IDS]) + (
        f"; and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
    )
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
