"""`/upgrade choose JOB OPTION [--reason …]`: answer a cluster job's question (as its buttons do)."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, number_id
from bot.core.jobs.service import choice_of
from bot.core.people import ANY_ROLE, require_any_role
from bot.core.runs.machine import require_member
from bot.errors import UserError
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Answer the question a cluster job asks in its run's thread (a drain past its timeout: wait,
    delete or skip; an abort's offer to uncordon). Each answer names the roles that may give it;
    deleting pods needs the coordinator and `--reason`.

    Example: `/upgrade choose 3 wait`
    """
    if ctx.jobs is None:
        raise UserError("this front door cannot answer cluster jobs")
    row = ctx.store.job(args.job)
    if row is None:
        raise UserError(f"there is no job {args.job}")
    # The job's run decides who may answer, with its handoffs, as the question's buttons do.
    action = "`/upgrade choose`"
    if row.run_id and ctx.runs is not None:
        require_member(ctx.runs.load(row.run_id), ctx.user_id, ctx.directory, action=action)
    else:
        require_any_role(
            ctx.user_id, frozenset({ANY_ROLE}), ctx.settings.roster, ctx.directory, action=action
        )
    choice = choice_of(row.choice)
    if choice is None or row.decision:
        raise UserError(f"job {args.job} is not waiting for an answer")
    message = ctx.jobs.decide(
        args.job,
        choice_key=choice.key,
        option=args.option,
        user_id=ctx.user_id,
        reason=_runs.reason(args.reason, required=False),
        who=_runs.actor(ctx),
    )
    return Reply(template="runs/message", context={"message": message})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("job", type=number_id, help="the job's number (in its question)")
    parser.add_argument("option", help="the answer: wait, delete, skip, go, leave …")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required for some answers)")


def register(registry: Registry) -> None:
    registry.add(
        "choose", run, arguments=_arguments, who="anyone in the job's run's roster (with the run's handoffs)"
    )
