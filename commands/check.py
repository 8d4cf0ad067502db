"""`/upgrade check`: the pre-flight checks and known-issue rules for the next upgrade step."""

from __future__ import annotations

import contextlib

from bot.core.checks import fleet as fleet_checks
from bot.core.checks import service as checks
from bot.core.checks.findings import Report
from bot.core.checks.waivers import active_waivers, seen_of
from bot.core.clusters import pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.core.rules import load_rules
from bot.errors import UserError

#: `--fleet` without a name: every configured cluster.
EVERY_CLUSTER = "*"
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

    With `--fleet` every configured cluster is checked at once (`--fleet NAME`: the clusters of
    that fleet plan, in stage order); the reply has a line per cluster and the clusters × findings
    matrix (Required / Recommended / waived) attached as CSV and Markdown.

    Example: `/upgrade check --to 1.25`, `/upgrade check --fleet example --to 1.25`
    """
    target = checks.check_target(args.to)
    if args.fleet:
        return _fleet(ctx, args, target)
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)
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
            asked=True,
        )
    # The cluster's last check: a waiver asked after it is compared with what it found.
    ctx.store.save_check_seen(seen_of(report, cluster=cluster.name, at=ctx.clock()))
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


def _fleet(ctx: CommandContext, args: Args, target: str | None) -> Reply:
    """`--fleet [NAME]`: every cluster's check, concurrently, as a matrix."""
    clusters = list(ctx.settings.clusters)
    if args.fleet != EVERY_CLUSTER:
        if ctx.fleets is None:
            raise UserError("fleets are not available here")
        _, stages, _ = ctx.fleets.validate(args.fleet)
        clusters = [c for s in stages for c in s.clusters]
    if not clusters:
        raise UserError("no cluster is configured")
    rules = load_rules(ctx.settings.rules_paths())
    now = ctx.clock()

    def one(name: str) -> Report:
        cluster = ctx.settings.clusters[name]
        with contextlib.closing(ctx.connect_cluster(cluster)) as reader:
            report = checks.check_cluster(
                reader,
                target=target,
                waivers=active_waivers(ctx.store, cluster=name),
                now=now,
                ignores=ctx.settings.check_ignores,
                rules=rules,
                extras=checks.default_extras(
                    now=now.timestamp(), cluster=cluster, images=ctx.settings.image_checks
                ),
                # A cluster already past `--to` is not checked, as `check --cluster` refuses it.
                asked=True,
            )
        ctx.store.save_check_seen(seen_of(report, cluster=name, at=now))
        return report

    matrix = fleet_checks.check_fleet(clusters, one, target=target or "")
    return Reply(
        template="check_fleet",
        ephemeral=False,
        context=fleet_checks.summary_context(matrix),
        files=fleet_checks.attachments(matrix),
        found=matrix.failed,
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")
    parser.add_argument(
        "--to", metavar="VERSION", help="the target version, e.g. 1.25 (default: one minor above the cluster)"
    )
    parser.add_argument(
        "--fleet",
        nargs="?",
        const=EVERY_CLUSTER,
        metavar="FLEET",
        help="check every configured cluster at once (or the clusters of fleet FLEET): a clusters × findings matrix",
    )


def register(registry: Registry) -> None:
    registry.add("check", run, arguments=_arguments, roles={ANY_ROLE})
