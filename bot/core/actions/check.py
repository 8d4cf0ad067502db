"""The `check` action: the pre-flight checks and known-issue rules; a Required finding fails the step.

The step's thread gets one line: the verdict, the Required findings' ids and the counts, and the
waivers and ignore-list entries it relied on (a Required finding accepted by one does not fail the
step: it passes when every Required finding is fixed, waived or ignored); the full report is
`/upgrade check` (or `upgrade-bot check --format md`) on the same cluster.
"""

from __future__ import annotations

from collections import Counter

from bot.core.actions.base import ActionContext, ActionRequest, ActionResult, ActionSpec
from bot.core.checks.findings import REQUIRED
from bot.core.checks.waivers import cover_labels
from bot.errors import UserError


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.run_check is None:
        raise UserError("this front door cannot run the pre-flight checks")
    report = ctx.run_check(request.cluster, request.call.args.get("to") or None)
    required = [f for f in report.findings if f.severity == REQUIRED]
    recommended = len(report.findings) - len(required)
    relied = cover_labels(report, severity=REQUIRED)
    accepted = f"; relied on {'; '.join(relied)}" if relied else ""
    if not required:
        unfixed = "no Required findings left unaccepted" if relied else "no Required findings"
        return ActionResult(
            ok=True,
            detail=f"pre-flight check for {report.target} passed: {unfixed}, {recommended} Recommended{accepted}",
        )
    counts = Counter(f.id for f in required)
    shown = ", ".join(f"{i} ×{n}" if n > 1 else i for i, n in sorted(counts.items()))
    return ActionResult(
        ok=False,
        detail=(
            f"pre-flight check for {report.target} FAILED: {len(required)} Required ({shown}), "
            f"{recommended} Recommended — `/upgrade check --to {report.target}` for the full report{accepted}"
        ),
    )


SPEC = ActionSpec(
    name="check",
    summary="run the pre-flight checks and known-issue rules; a Required finding fails the step",
    optional=frozenset({"to"}),
    run=run,
)
