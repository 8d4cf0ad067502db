"""`/upgrade check`: the pre-flight checks and known-issue rules for the next upgrade step."""

from __future__ import annotations

import contextlib

from bot.core.checks import service as checks
from bot.core.checks.rules import load_rules
from bot.core.checks.waivers import active_waivers
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.core.snapshots import service as snapshots

#: Recommended lines (finding ids) listed in the chat summary; the attached report has them all.
SHOWN_RECOMMENDED = 10


def run(ctx: CommandContext, args: Args) -> Reply:
    """Check the cluster before an upgrade to `--to` (default: one minor above the control plane).

    Required findings block the upgrade (version skew now and after the step, NotReady nodes,
    budgets that allow no disruption, pods with no controller, fail-closed webhooks without
    endpoints, removed APIs); Recommended ones make it rougher (cordoned nodes, unhealthy pods,
    safe-to-evict "false", emptyDir, single replicas, stale Istio sidecars, known issues). The
    summary lists Required first; the full report, with why and how to fix each, is attached.
    Findings accepted by a waiver (`/upgrade waive`) or the configuration's `checks.ignore` list
    are shown in their own section, with who accepted them, why and until when; they do not fail
    the check.

    Example: `/upgrade check --to 1.25`
    """
    target = checks.check_target(args.to)
    cluster = snapshots.pick_cluster(ctx.settings.clusters, args.cluster)
    rules = load_rules(ctx.settings.rules_paths())
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        # The same function, waivers and ignore list as `upgrade-bot check` and a run's check step.
        report = checks.check_cluster(
            reader,
            target=target,
            waivers=active_waivers(ctx.store, cluster=cluster.name),
            now=ctx.clock(),
            ignores=ctx.settings.check_ignores,
            rules=rules,
            extras=checks.default_extras(
                now=ctx.clock().timestamp(), cluster=cluster, images=ctx.settings.image_checks
            ),
        )
    return Reply(
        template="check",
        ephemeral=False,
        context=checks.summary_context(
            report,
            shown_recommended=SHOWN_RECOMMENDED,
            # In Slack, a finding that names its gated fix gets a Fix… button (NODE002: uncordon).
            ref=ctx.correlation_id if ctx.source == "slack" else "",
        ),
        files=(checks.report_attachment(report),),
        found=report.failed,
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")
    parser.add_argument(
        "--to", metavar="VERSION", help="the target version, e.g. 1.25 (default: one minor above the cluster)"
    )


def register(registry: Registry) -> None:
    registry.add("check", run, arguments=_arguments, roles={ANY_ROLE})
