"""`/upgrade handoff ROLE @user`: give a role in a run to someone else (audited)."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, parse_user
from bot.core.runs import machine as R
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Hand a role of a run over to another person, e.g. when the shadow goes off shift.

    Only this run's roster changes, not the plan. The new holder may approve from the next click
    on; approvals already given stay. A role is handed over by its holder or by the coordinator
    (by anyone in the roster when the plan names no coordinator), and never to someone who would
    then hold every role of a gate still to pass that needs different people (the shadow to the
    primary): four eyes stay four eyes.

    Example: `/upgrade handoff shadow @dana`
    """
    user = parse_user(args.user)
    out = _runs.change(
        ctx,
        args.run,
        "handoff",
        lambda r: R.handoff(r, role=args.role, user_id=user, by=ctx.user_id, now=ctx.clock()),
    )
    return Reply(
        template="runs/message",
        context={"message": f"The {args.role} of run `{out.run.id}` is now", "user": user},
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("role", help="a role of the run's roster")
    parser.add_argument("user", help="@someone")
    parser.add_argument("--run", metavar="RUN", help="a run id (default: the only active run)")


def register(registry: Registry) -> None:
    registry.add(
        "handoff",
        run,
        arguments=_arguments,
        who="the role's holder or the coordinator (anyone in the run's roster when the plan names none)",
    )
