"""`/upgrade handoff ROLE @user`: give a role in a run to someone else (audited)."""

from __future__ import annotations

import logging

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, parse_user
from bot.core.runs.handoffs import handoff
from bot.core.runs.machine import Run
from bot.errors import BotError, UserError
from commands import _runs

log = logging.getLogger(__name__)


def run(ctx: CommandContext, args: Args) -> Reply:
    """Hand a role of a run over to another person, e.g. when the shadow goes off shift.

    Only this run's roster changes, not the plan. The new holder may approve from the next click
    on; approvals already given stay. A role is handed over by its holder (their own part: the
    role's other holders keep it) or by the coordinator, who replaces its holders (by anyone in the
    roster when the plan names no coordinator). Refused when it would leave a gate still to pass
    unable to pass: someone holding every role of a gate that needs different people (the shadow
    to the primary), a quorum short, or the person who started a step the only one left to confirm
    it done. Four eyes stay four eyes. The new holder must be a user Slack knows. A member of a
    user group that holds the role hands it on beside the group (which keeps it).

    Example: `/upgrade handoff shadow @dana`
    """
    user = parse_user(args.user)
    _known(ctx, user)
    out = _runs.change(
        ctx,
        args.run,
        "handoff",
        lambda r: handoff(
            r,
            role=args.role,
            user_id=user,
            by=ctx.user_id,
            now=ctx.clock(),
            via_group=_group_of(ctx, r, args.role),
        ),
    )
    return Reply(
        template="runs/message",
        context={"message": f"The {args.role} of run `{out.run.id}` is now", "user": user},
    )


def _group_of(ctx: CommandContext, run: Run, role: str) -> str:
    """The user group holding `role` that the person asking is a member of ("" when none, or when
    Slack cannot be asked: the hand-off is then judged as before, and the log says why)."""
    for entry in run.roster.get(role, ()):
        if not entry.startswith("S"):
            continue
        try:
            if ctx.user_id in ctx.directory.group_members(entry):
                return entry
        except BotError as exc:
            log.warning("handoff: could not read the members of %s in Slack: %s", entry, exc.user_message)
    return ""


def _known(ctx: CommandContext, user: str) -> None:
    """Refuse a new holder the workspace does not have (a typo, a deactivated account): the role
    would go to nobody. When Slack cannot be asked, the handoff goes ahead (the log says why)."""
    try:
        exists = ctx.directory.user_exists(user)
    except BotError as exc:
        log.warning("handoff: could not look up %s in Slack: %s", user, exc.user_message)
        return
    if exists is False:
        raise UserError(f"Slack has no active user {user}: check the mention (`/upgrade handoff ROLE @name`)")


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
