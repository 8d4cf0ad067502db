"""`/upgrade start PLAN`: start a run of a loaded plan; its card appears in the operations channel."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE, roles_of
from bot.core.plans import parse_plan
from bot.core.run_service import Actor
from bot.errors import PermissionDenied, UserError


def run(ctx: CommandContext, args: Args) -> Reply:
    """Start a run of a loaded plan: a card in the operations channel, a thread for the steps.

    Only someone in the plan's roster may start it. The first step's gate opens at once; every
    step then waits for the people its gate names.
    """
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    row = ctx.store.plan(args.plan)
    if row is None:
        raise UserError(f"no plan `{args.plan}` is loaded; `/upgrade plan load {args.plan}` loads it")
    plan = parse_plan(row.text, source=row.name)
    if not roles_of(ctx.user_id, plan.roster, ctx.directory):
        raise PermissionDenied(f"starting `{plan.name}` is for the people in its roster; you are not in it")
    if not (plan.operations_channel or ctx.settings.channels.operations):
        raise UserError("no operations channel: set `channels.operations` in the plan or the configuration")
    out = ctx.runs.start(
        args.plan,
        Actor(
            user_id=ctx.user_id,
            source=ctx.source,
            channel_id=ctx.channel_id,
            correlation_id=ctx.correlation_id,
        ),
    )
    return Reply(
        template="runs/message", context={"message": f"Run `{out.run.id}` of `{plan.name}` started."}
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("plan", help="the name of a loaded plan")


def register(registry: Registry) -> None:
    registry.add("start", run, arguments=_arguments, roles={ANY_ROLE})
