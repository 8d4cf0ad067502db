"""`/upgrade plan load|show`: store an upgrade plan after validating it, or show a stored one."""

from __future__ import annotations

from pathlib import Path

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, file_name
from bot.core.jobs.preflight import check_plan
from bot.core.people import ANY_ROLE
from bot.core.runs.library import find_plan
from bot.core.runs.plans import PeopleLookup, Plan, decode_plan, parse_plan, read_plan_file, to_document
from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS
from bot.errors import ConfigError, UsageError, UserError


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


def run(ctx: CommandContext, args: Args) -> Reply:
    """Load an upgrade plan (validated, every problem listed) or show a loaded one.

    `/upgrade plan load NAME` reads `plans/NAME.yaml` from the templates directory;
    `/upgrade plan load https://files.slack.com/…` reads a plan file uploaded to Slack. The plan
    is checked completely — roles, step ids, actions, durations, the window, and that every Slack
    user and group in the roster exists — and stored under its `name`.
    `/upgrade plan show NAME` shows the steps and gates of the newest plan stored under NAME.

    Example: `/upgrade plan load eks-nodegroups`
    """
    if args.action == "show":
        row, plan = find_plan(ctx.store, file_name("plan name", args.target))
        return Reply(template="runs/plan", context={"plan": to_document(plan), "row": row, "loaded": False})
    text, source = _plan_file(ctx, args.target)
    # The Slack directory can say whether each roster ID exists; the terminal's static one cannot.
    people = ctx.directory if isinstance(ctx.directory, PeopleLookup) else None
    plan = parse_plan(text, source=source, people=people, now=ctx.clock())
    warnings = _cluster_warnings(ctx, plan)
    plan_id = ctx.store.save_plan(name=plan.name, text=text, loaded_by=ctx.user_id, loaded_at=ctx.clock())
    saved = ctx.store.plan_by_id(plan_id)
    return Reply(
        template="runs/plan",
        ephemeral=False,
        context={"plan": to_document(plan), "row": saved, "loaded": True, "warnings": warnings},
    )


def _cluster_warnings(ctx: CommandContext, plan: Plan) -> list[str]:
    """The plan's cluster actions checked against its cluster now (warnings: it may change)."""
    return check_plan(
        plan,
        clusters=ctx.settings.clusters,
        connect=ctx.connect_cluster,
        node_group_labels=ctx.settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
        now=ctx.clock(),
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "action", choices=["load", "show"], help="`load` a plan (validated) or `show` a loaded one"
    )
    parser.add_argument("target", help="a plan name, or (for load) the link of an uploaded plan file")


def register(registry: Registry) -> None:
    registry.add("plan", run, arguments=_arguments, roles={ANY_ROLE})
