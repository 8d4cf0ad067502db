"""`/upgrade handoff ROLE @user`: give a role in a run to someone else (audited)."""

from __future__ import annotations

from bot.core import runs as R
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, parse_user
from bot.core.run_service import Actor, require_member
from bot.errors import UserError


def run(ctx: CommandContext, args: Args) -> Reply:
    """Hand a role of a run over to another person, e.g. when the shadow goes off shift.

    Only this run's roster changes, not the plan. The new holder may approve from the next click
    on; approvals already given stay. Only people in the run's roster may hand off.
    """
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    user = parse_user(args.user)
    target = ctx.runs.resolve(args.run)
    require_member(target, ctx.user_id, ctx.directory, action="`/upgrade handoff`")
    actor = Actor(
        user_id=ctx.user_id, source=ctx.source, channel_id=ctx.channel_id, correlation_id=ctx.correlation_id
    )
    out = ctx.runs.apply(
        target.id,
        lambda r: R.handoff(r, role=args.role, user_id=user, by=ctx.user_id, now=ctx.clock()),
        actor,
    )
    return Reply(
        template="runs/message",
        context={"message": f"The {args.role} of run `{out.run.id}` is now", "user": user},
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("role", help="a role of the run's roster")
    parser.add_argument("user", help="@someone")
    parser.add_argument("--run", help="a run id (default: the only active run)")


def register(registry: Registry) -> None:
    registry.add("handoff", run, arguments=_arguments)
