"""The `diff` action: compare two stored snapshots and report.

A diff that finds regressions is a failed step, so the run pauses there and people look before
the completion announcement goes out. So is one that could not compare the nodes, the pods or the
workloads (a list one of the snapshots could not read): "0 regressions" would say nothing of them.
`replaces: "others-1-25=others,…"` (NEW=OLD) names the node groups the runbook recreated under a
new name: the old group is reported "replaced by" the new one rather than gone (without it, the
one group new since the earlier snapshot is taken).
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec, fitting
from bot.core.jobs.common import label_value
from bot.core.snapshots.diff import ESSENTIAL
from bot.errors import UserError, clip
from bot.records import ActionRequest

#: About how long the list of regressions in the thread line may grow (whole entries are dropped
#: before the event line's 500 characters, with "…and N more").
LISTED_CHARS = 300


def replaces_arg(args: Mapping[str, str]) -> dict[str, str]:
    """`replaces: "NEW=OLD,…"` → {new group: old group}."""
    found: dict[str, str] = {}
    for part in str(args.get("replaces", "")).replace(",", " ").split():
        new, sep, old = (p.strip() for p in part.partition("="))
        if not sep or not new or not old:
            raise UserError(
                f"diff action: replaces: {clip(part, 60)!r} — say which group replaces which, NEW=OLD "
                "(like others-1-25=others)"
            )
        label_value("replaces", new)
        label_value("replaces", old)
        if new == old:
            raise UserError(f"diff action: replaces: {clip(part, 60)!r} names the same group twice")
        found[new] = old
    return found


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    args = request.call.args
    report = ctx.compare_snapshots(request.cluster, args["before"], args["after"], replaces_arg(args))
    summary = f"diff: {len(report.regressions)} regression(s), {len(report.expected)} expected change(s)"
    if report.regressions:
        # Every regression, as far as the thread line allows: the step's failure line is what the
        # run report keeps of a diff that was skipped past, so it names them all it can.
        entries = [f"{r.category} — {r.subject}" for r in report.regressions]
        listed = fitting(entries, LISTED_CHARS)
        more = len(entries) - len(listed)
        summary += ": " + "; ".join(listed) + (f"; …and {more} more" if more else "")
    # A list one of the snapshots could not read is not compared: said on the line, and without the
    # nodes, the pods or the workloads "0 regressions" says nothing, so the step fails and people decide.
    blind = report.not_compared
    essential = bool(ESSENTIAL.intersection(blind))
    if blind:
        said = "NOT COMPARED" if essential else "not compared"
        summary += f"; {said}: {', '.join(blind)} (not readable in one of the snapshots)"
    return ActionResult(ok=not report.has_regressions and not essential, detail=summary)


def check_args(args: Mapping[str, str]) -> dict[str, str]:
    """A plan's diff: its `replaces` (returned), and two different snapshots (a snapshot compared
    with itself finds nothing, whatever happened between)."""
    replaces = replaces_arg(args)
    before, after = str(args.get("before", "")).strip(), str(args.get("after", "")).strip()
    if before and before == after:
        raise UserError(
            f"diff action: before and after are both `{clip(before, 40)}`: a snapshot compared with itself "
            "finds nothing; name the snapshot taken after (like `post`)"
        )
    return replaces


SPEC = ActionSpec(
    name="diff",
    summary="compare two stored snapshots (by label or id) and post the report",
    required=frozenset({"before", "after"}),
    optional=frozenset({"replaces"}),
    run=run,
    check=check_args,
)
