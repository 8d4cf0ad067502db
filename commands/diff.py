"""`/upgrade diff`: compare two snapshots — expected changes versus regressions."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot.core.clusters import group_labels, pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, FileAttachment, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.diff import Finding
from bot.core.snapshots.projection import take_snapshot

TOP = 10
# The summary goes in the channel and the full report is attached. Slack renders a message's text
# as one section, which holds at most 3,000 characters: the bullets get this much, each detail at
# most DETAIL_MAX, and whatever does not fit is only in the report ("first N" says so).
BULLET_BUDGET = 2000
DETAIL_MAX = 200


def _fit(*lists: Sequence[Finding]) -> list[list[Finding]]:
    """The top findings of each list, in order, that fit the summary's budget together."""
    budget = BULLET_BUDGET
    shown: list[list[Finding]] = []
    for findings in lists:
        out: list[Finding] = []
        for f in findings[:TOP] if budget > 0 else ():
            detail = f.detail if len(f.detail) <= DETAIL_MAX else f.detail[: DETAIL_MAX - 1] + "…"
            cost = len(f.category) + len(f.subject) + len(detail) + 8
            if cost > budget:
                budget = 0
                break
            budget -= cost
            out.append(replace(f, detail=detail))
        shown.append(out)
    return shown


def run(ctx: CommandContext, args: Args) -> Reply:
    """Compare snapshot A with B, keyed by node group, node and workload (not pod names).

    A and B are snapshot ids (`12`) or labels (`pre`, the latest so labelled). With neither, the
    latest `pre` is compared with the latest `post`, or else the latest snapshot with the live
    cluster; with only A, A is compared with the live cluster. The summary lists regressions first
    (kube-system first); the full report is attached as Markdown.

    Example: `/upgrade diff pre post`
    """
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)

    def live() -> dict[str, Any]:
        reader = ctx.connect_cluster(cluster)
        with contextlib.closing(reader):
            snap = take_snapshot(
                reader,
                label="live",
                taken_by=ctx.user_id,
                now=ctx.clock(),
                node_group_labels=group_labels(ctx.settings.node_group_labels),
            )
        snap["id"] = "live"
        return snap

    report = snapshots.compare(
        ctx.store,
        args.a,
        args.b,
        cluster=cluster,
        live=live,
        restart_threshold=ctx.settings.restart_threshold,
    )
    before, after = report.before, report.after
    regressions, expected = _fit(report.regressions, report.expected)
    name = f"diff-{before.get('id')}-{after.get('id')}.md"
    return Reply(
        template="diff",
        ephemeral=False,
        context={
            "before": {k: before.get(k) for k in ("id", "label", "taken_at")},
            "after": {k: after.get(k) for k in ("id", "label", "taken_at")},
            "regressions": regressions,
            "regression_count": len(report.regressions),
            "regression_categories": report.categories("regression").most_common(),
            "expected": expected,
            "expected_count": len(report.expected),
            "skipped": report.skipped,
        },
        files=(
            FileAttachment(
                filename=name,
                content=report.to_markdown().encode(),
                title="Cluster diff",
                filetype="markdown",
            ),
        ),
        found=report.has_regressions,
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("a", nargs="?", help="the earlier snapshot: id or label")
    parser.add_argument("b", nargs="?", help="the later snapshot: id or label (default: live cluster)")
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")


def register(registry: Registry) -> None:
    registry.add("diff", run, arguments=_arguments, roles={ANY_ROLE})
