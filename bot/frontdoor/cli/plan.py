"""`upgrade-bot plan validate FILE [--check-slack] [--check-cluster]` (exit 2: problems; needs no
configuration file unless Slack or the cluster is asked) and `upgrade-bot plan draft --to V`: a
commented plan written from what the cluster shows (read-only)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.core.checks import service as checks
from bot.core.clusters import group_labels, pick_cluster
from bot.core.jobs.preflight import check_plan, order_warnings, sdk_warnings, step_version_warnings
from bot.core.rules import load_rules
from bot.core.runs.draft import STYLES, DraftFacts, cloud_of, draft_inputs, draft_plan, gather_facts
from bot.core.runs.plans import PeopleLookup, parse_plan, read_plan_file, window_warnings
from bot.core.snapshots.projection import Progress, take_snapshot
from bot.errors import (
    BotError,
    ConfigError,
    PlanInvalid,
    UsageError,
    UserError,
)
from bot.frontdoor.assemble import cluster_jobs
from bot.frontdoor.cli.check import stored_waivers
from bot.frontdoor.cli.config import configured, settings_for
from bot.frontdoor.cli.connect import connect, slack_directory
from bot.frontdoor.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    Subparsers,
    cluster_flag,
    common_options,
    kube_flags,
    refused,
    terminal_user,
    verb_parser,
)
from bot.frontdoor.cli.progress import progress_bar
from bot.logsetup import configure_logging
from bot.records import ClusterConfig
from bot.resources import BUILTIN_PLANS
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.adapters.kube import Cluster


def register(subparsers: Subparsers) -> Handler:
    plan = subparsers.add_parser("plan", help="upgrade plans: `plan validate FILE`, `plan draft --to V`")
    actions = plan.add_subparsers(dest="plan_command", required=True, metavar="ACTION")
    validate = actions.add_parser(
        "validate", parents=[common_options()], help="check a plan; exit 2 listing every problem"
    )
    validate.add_argument("file", help="the plan's YAML file, or a built-in plan's name (eks-nodegroups)")
    validate.add_argument(
        "--check-slack",
        action="store_true",
        help="also ask Slack (SLACK_BOT_TOKEN from --config's environment) that every roster ID exists",
    )
    validate.add_argument(
        "--check-cluster",
        action="store_true",
        help="also check on the plan's cluster (from --config) that its actions' nodes, groups and "
        "workloads exist now (warnings: the cluster may change before the window)",
    )
    draft = verb_parser(
        actions,
        "draft",
        "write a commented plan from what the cluster, its pre-flight check and its provider show "
        "(read-only)",
    )
    cluster_flag(draft)
    draft.add_argument(
        "--to",
        required=True,
        help="the target version, e.g. 1.25 or 1.25.16; several minors above the cluster draft one "
        "control-plane hop per minor, each with its own check",
    )
    draft.add_argument(
        "--style",
        choices=list(STYLES),
        help="pipeline: people launch new nodes, the bot drains the old (the default, but for an AKS "
        "or GKE cluster); eks-managed: EKS replaces the nodes, the bot waits; aks-managed, gke-managed "
        "(the default for such a cluster): the cloud's actions upgrade the control plane and each pool "
        "at versions it offers; generic: as pipeline, worded for any platform",
    )
    draft.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    kube_flags(draft)
    drafting = configured(_draft, read_only=True)

    def handle(args: argparse.Namespace) -> int:
        # Validating a plan needs no configuration file unless Slack is asked about the roster.
        return _validate(args) if args.plan_command == "validate" else drafting(args)

    return handle


def _validate(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file)
    if not path.exists() and (BUILTIN_PLANS / f"{args.file}.yaml").is_file():
        # A built-in plan by its name, as `rehearse` takes it: an installed copy has no templates/.
        path = BUILTIN_PLANS / f"{args.file}.yaml"
    people: PeopleLookup | None = None
    try:
        text = read_plan_file(path)
        if args.check_slack:
            people = slack_directory(settings_for(args))
        plan = parse_plan(text, source=str(path), people=people, now=datetime.now(UTC))
    except PlanInvalid as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    except BotError as exc:
        return refused(exc)
    for warning in step_version_warnings(plan) + window_warnings(plan, datetime.now(UTC)):
        print(f"{path}: warning: {warning}", file=sys.stderr)
    for warning in sdk_warnings(plan):
        print(f"{path}: warning: {warning}: it cannot run until that is installed", file=sys.stderr)
    if args.check_cluster:
        try:
            settings = settings_for(args)
        except ConfigError as exc:
            return refused(exc)
        for warning in check_plan(
            plan,
            clusters=settings.clusters,
            connect=connect,
            node_group_labels=group_labels(settings.node_group_labels),
            now=datetime.now(UTC),
            jobs=cluster_jobs(settings),
        ) + order_warnings(plan, settings.node_group_order):
            print(f"{path}: warning: {warning}", file=sys.stderr)
    checked = " (Slack users checked)" if people is not None else ""
    print(
        f"{path}: plan {plan.name} is valid{checked}: {plan.cluster} {plan.current_version} → "
        f"{plan.target_version}, {len(plan.steps)} steps, roles {', '.join(sorted(plan.roster))}"
    )
    return EXIT_OK


def _facts(
    settings: Settings,
    cluster: ClusterConfig,
    reader: Cluster,
    snap: Mapping[str, Any],
    target: str,
    now: datetime,
) -> DraftFacts:
    """Each hop's check, as `check --to HOP` gives it, and the provider's side (`gather_facts`)."""

    def checking(hop: str) -> AbstractContextManager[Progress | None]:
        print(f"checking for {hop} (read-only) …", file=sys.stderr)
        return progress_bar()

    try:
        return gather_facts(
            reader,
            snap,
            target,
            cluster=cluster,
            rules=load_rules(settings.rules_paths()),
            waivers=stored_waivers(settings, cluster.name),
            ignores=settings.check_ignores,
            now=now,
            progress=checking,
        )
    except UserError as exc:
        raise UsageError(exc.user_message) from None


def _draft(settings: Settings, args: argparse.Namespace) -> int:
    if settings.source is None:
        # Read-only, so it came this far on the kube context; but a draft's roster, channels and
        # window come from the configuration, and there is none ("no roster" would mislead).
        raise UsageError(
            "plan draft needs the configuration file (upgrade-bot.yaml): `upgrade-bot init` writes one"
        )
    try:
        checks.check_target(args.to)
        cluster = pick_cluster(settings.clusters, args.cluster)
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    now = datetime.now(UTC)
    try:
        # From the configuration, before the cluster is read: a missing roster fails at once.
        inputs = draft_inputs(
            cluster=cluster.name,
            target=args.to,
            style=args.style or "",
            now=now,
            roster=settings.roster,
            channels={
                "operations": settings.channels.operations,
                "announcements": settings.channels.announcements,
            },
            windows=settings.windows,
            timezone=settings.timezone,
            group_labels=settings.node_group_labels,
            order=settings.node_group_order,
            alerts=cluster.alertmanager is not None,
            metrics=cluster.prometheus is not None,
            cloud=cloud_of(cluster),
        )
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    labels = group_labels(settings.node_group_labels)
    reader = connect(cluster)
    try:
        print(f"reading {reader.describe()} (read-only) …", file=sys.stderr)
        with progress_bar() as progress:
            snap = take_snapshot(
                reader,
                label="draft",
                taken_by=terminal_user(),
                now=now,
                node_group_labels=labels,
                progress=progress,
            )
        facts = _facts(settings, cluster, reader, snap, args.to, now)
    finally:
        reader.close()
    text = draft_plan(snap, inputs, facts)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"plan draft written to {args.out}; check it with `upgrade-bot plan validate {args.out}`")
    else:
        sys.stdout.write(text)
    return EXIT_OK
