"""`/upgrade plan load|show|draft`: store an upgrade plan after validating it, show a stored one, or
draft one from what the cluster shows."""

from __future__ import annotations

import contextlib
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.core.checks.service import check_target
from bot.core.checks.waivers import active_waivers
from bot.core.clusters import group_labels, pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, FileAttachment, Registry, Reply, file_name
from bot.core.jobs.preflight import check_plan, order_warnings, sdk_warnings, step_version_warnings
from bot.core.people import ANY_ROLE
from bot.core.rules import load_rules
from bot.core.runs.draft import STYLES, cloud_of, draft_inputs, draft_plan, gather_facts, summarise
from bot.core.runs.library import find_plan
from bot.core.runs.plans import (
    PeopleLookup,
    Plan,
    decode_plan,
    parse_plan,
    read_plan_file,
    to_document,
    window_warnings,
)
from bot.core.snapshots.projection import take_snapshot
from bot.errors import ConfigError, UsageError, UserError, clip


def _plan_file(ctx: CommandContext, name: str) -> tuple[str, str]:
    """A plan by name from the templates' `plans/` directories (team's first), or a Slack file URL."""
    # Slack sends a pasted link as `<https://…>` or `<https://…|label>`.
    url = name.strip("<>").split("|", 1)[0]
    if url.startswith(("https://", "http://")):
        if ctx.fetch_file is None:
            raise UserError("this front door cannot download files from Slack; pass a plan name")
        body = ctx.fetch_file(url)
        filename = url.rsplit("/", 1)[-1]
        try:
            return decode_plan(body, label=filename), filename
        except ConfigError as exc:
            raise UserError(f"{exc}; a plan is a YAML file") from None
    if _is_path(name):
        return _local_plan(ctx, name)
    file_name("plan name", name)
    if not name.replace("-", "").replace("_", "").isalnum():
        raise UsageError(f"{name!r} is not a plan name (letters, digits, - and _) or a file link")
    for directory in ctx.settings.template_dirs():
        path = Path(directory) / "plans" / f"{name}.yaml"
        if path.exists():
            try:
                # Named by file name only: chat has no business seeing the server's paths.
                return read_plan_file(path, label=path.name), path.name
            except ConfigError as exc:
                raise UserError(str(exc)) from None
    raise UserError(
        f"there is no plan file `{name}.yaml` in the plans directory; upload it and pass its link"
    )


def _is_path(name: str) -> bool:
    """A file's path as people type one (`plan.yaml`, `./plan.yaml`, `/tmp/plan.yaml`, `~/p.yml`),
    not a plan's name."""
    return "/" in name or name.startswith("~") or name.lower().endswith((".yaml", ".yml"))


def _local_plan(ctx: CommandContext, name: str) -> tuple[str, str]:
    """A plan file on this machine, read only for the person at its terminal (`upgrade-bot exec`):
    they own its files. From Slack a path would read files on the bot's host: refused, with the
    ways a plan gets there."""
    path = Path(name).expanduser()
    if ctx.source != "terminal":
        stem = path.stem if path.stem.replace("-", "").replace("_", "").isalnum() else "NAME"
        raise UsageError(
            f"{clip(name)!r} is a file path, and Slack does not read files on the bot's host: put it in the "
            f"templates directory as `plans/{stem}.yaml` and pass `{stem}`, or upload it to Slack and pass "
            "its link"
        )
    try:
        return read_plan_file(path, label=clip(name)), clip(name)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def run(ctx: CommandContext, args: Args) -> Reply:
    """Load an upgrade plan (validated, every problem listed), show a loaded one, or draft one.

    `/upgrade plan load NAME` reads `plans/NAME.yaml` from the templates directory;
    `/upgrade plan load https://files.slack.com/…` reads a plan file uploaded to Slack; from the
    terminal, `upgrade-bot exec "plan load ./plan.yaml"` reads a local file (`plan draft`'s). The plan
    is checked completely — roles, step ids, actions, durations, the window, and that every Slack
    user and group in the roster exists — and stored under its `name`.
    `/upgrade plan show NAME` shows the steps and gates of the newest plan stored under NAME.
    `/upgrade plan draft --to 1.25 [--cluster C] [--style pipeline|eks-managed|aks-managed|gke-managed|generic]`
    reads the cluster (read-only), runs the check for each control-plane hop (`--to 1.33` on 1.29:
    four, one minor at a time) and, with a provider, asks the cloud; it attaches a commented plan:
    lagging node groups brought within the skew first, the control plane and add-ons through the
    EKS API (or AKS's and GKE's actions at versions the cloud offers: the default style for such a
    cluster), the node groups in the runbook's order, a step for what the check found that a step
    can fix (the rest listed in its header), the roster, channels and a window `schedule` accepts.

    Example: `/upgrade plan load eks-nodegroups`
    """
    if args.action == "draft":
        return _draft(ctx, args)
    if not args.target:
        raise UsageError(
            f"`plan {args.action}` needs a plan name{' or a file link' if args.action == 'load' else ''}"
        )
    if args.action == "show":
        row, plan = find_plan(ctx.store, file_name("plan name", args.target))
        return Reply(
            template="runs/plan",
            context={"plan": to_document(plan), "row": row, "loaded": False, "window": plan.window},
        )
    text, source = _plan_file(ctx, args.target)
    # The Slack directory can say whether each roster ID exists; the terminal's static one cannot.
    people = ctx.directory if isinstance(ctx.directory, PeopleLookup) else None
    plan = parse_plan(text, source=source, people=people, now=ctx.clock())
    clusters = ctx.settings.clusters
    if clusters and plan.cluster not in clusters:
        # `start` would refuse it: a typo of the configuration, not a cluster that may change.
        raise UserError(
            f"`{plan.name}` is for cluster `{plan.cluster}`, which this bot does not know (configured: "
            f"{', '.join(sorted(clusters))}); fix the plan's `cluster:` or add it under `clusters:`, then load it again"
        )
    warnings = _load_warnings(ctx, plan)
    plan_id = ctx.store.save_plan(name=plan.name, text=text, loaded_by=ctx.user_id, loaded_at=ctx.clock())
    saved = ctx.store.plan_by_id(plan_id)
    # A plan reloaded while scheduled: its announcements say this version now (what `start` runs).
    scheduled = ctx.store.schedules(states=["scheduled"], plan_name=plan.name)
    return Reply(
        template="runs/plan",
        ephemeral=False,
        context={
            "plan": to_document(plan),
            # Its window as Slack dates (each reader's zone, the plan's as fallback), not ISO text.
            "window": plan.window,
            "row": saved,
            "loaded": True,
            "warnings": warnings,
            "scheduled": scheduled,
        },
    )


def _load_warnings(ctx: CommandContext, plan: Plan) -> list[str]:
    """What `plan load` warns of: the plan's cluster actions checked against its cluster now (it may
    change), the node groups' order, steps' versions against the plan's, cloud actions whose SDK
    this bot lacks (they would fail at their step, after its gate), a window read in UTC by a team
    in another zone, and a window that is not what it seems (`window_warnings`)."""
    return (
        check_plan(
            plan,
            clusters=ctx.settings.clusters,
            connect=ctx.connect_cluster,
            node_group_labels=group_labels(ctx.settings.node_group_labels),
            now=ctx.clock(),
            # The bot's own registry: its actions with the clusters' cloud providers.
            jobs=ctx.jobs.registry if ctx.jobs is not None else None,
        )
        + order_warnings(plan, ctx.settings.node_group_order)
        + step_version_warnings(plan)
        + sdk_warnings(plan)
        + _zone_warning(ctx, plan)
        + window_warnings(plan, ctx.clock())
    )


def _zone_warning(ctx: CommandContext, plan: Plan) -> list[str]:
    """A window read in UTC (no `window.timezone`) by a team whose configured zone is another: 14:00
    meant in Berlin would open at 15:00 there, and nothing else would say so."""
    team = ctx.settings.timezone
    if plan.window.timezone != "UTC" or team == "UTC":
        return []
    local = plan.window.start.astimezone(ZoneInfo(team))
    return [
        f"the window is read in UTC ({plan.window.start:%Y-%m-%d %H:%M} UTC is {local:%H:%M} {team}, the "
        f"configured `timezone`); if {plan.window.start:%H:%M} was meant in {team}, set `window.timezone: {team}`"
    ]


def _draft(ctx: CommandContext, args: Args) -> Reply:
    if not args.to:
        raise UsageError("`plan draft` needs the target version: `--to 1.25`")
    target = check_target(args.to) or args.to
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)
    now = ctx.clock()
    inputs = draft_inputs(
        cluster=cluster.name,
        target=target,
        style=args.style or "",
        now=now,
        roster=ctx.settings.roster,
        channels={
            "operations": ctx.settings.channels.operations,
            "announcements": ctx.settings.channels.announcements,
        },
        windows=ctx.settings.windows,
        timezone=ctx.settings.timezone,
        group_labels=ctx.settings.node_group_labels,
        order=ctx.settings.node_group_order,
        alerts=cluster.alertmanager is not None,
        metrics=cluster.prometheus is not None,
        cloud=cloud_of(cluster),
    )
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        snap = take_snapshot(
            reader,
            label="draft",
            taken_by=ctx.user_id,
            now=now,
            node_group_labels=group_labels(ctx.settings.node_group_labels),
        )
        # The same reads as `upgrade-bot plan draft`: each hop's check, the provider's side.
        facts = gather_facts(
            reader,
            snap,
            target,
            cluster=cluster,
            rules=load_rules(ctx.settings.rules_paths()),
            waivers=active_waivers(ctx.store, cluster=cluster.name),
            ignores=ctx.settings.check_ignores,
            now=now,
        )
    text = draft_plan(snap, inputs, facts)
    draft = summarise(text)
    filename = f"{cluster.name}-{target}-draft.yaml".replace("/", "-")
    return Reply(
        template="runs/plan_draft",
        context={"draft": draft, "cluster": cluster.name, "target": target, "style": inputs.style},
        files=(
            FileAttachment(
                filename=filename,
                content=text.encode(),
                title=f"Plan draft: {cluster.name} to {target}",
                filetype="yaml",
            ),
        ),
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "action",
        choices=["load", "show", "draft"],
        help="`load` a plan (validated), `show` a loaded one, or `draft` one from the cluster",
    )
    parser.add_argument(
        "target", nargs="?", help="a plan name, or (for load) the link of an uploaded plan file"
    )
    parser.add_argument(
        "--to",
        help="draft: the target version, e.g. 1.25 (several minors up: one control-plane hop per minor)",
    )
    parser.add_argument("--cluster", help="draft: a configured cluster (default: the only one)")
    parser.add_argument(
        "--style",
        choices=list(STYLES),
        help="draft: how the control plane and node groups are upgraded (default: the cloud's own for an "
        "AKS or GKE cluster, else pipeline)",
    )


def register(registry: Registry) -> None:
    registry.add("plan", run, arguments=_arguments, roles={ANY_ROLE})
