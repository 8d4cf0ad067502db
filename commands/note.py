"""`/upgrade note TEXT`: add a timestamped note to the active run's thread and its audit trail.

The runbook asks people to log what they do outside the bot (a node drained by hand, a vendor
call, a decision taken on the phone); the note goes where the rest of the run's record is.
"""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from bot.core.runs.machine import require_member
from bot.errors import RunNotFound, UserError
from commands import _runs

#: The longest note: a paragraph or two (a Slack section shows 3,000 characters).
MAX_NOTE = 2_000


def run(ctx: CommandContext, args: Args) -> Reply:
    """Add a timestamped note to the active run's thread and its audit log.

    Log what you did outside the bot — a node drained by hand, a vendor call, a decision taken on
    the phone — so the run's record is whole. Anyone in the run's roster may add one; with
    several active runs, name one with `--run`.

    Example: `/upgrade note "drained ip-10-0-1-7 by hand: its PDB blocked the bot"`
    """
    text = " ".join(args.text).strip()
    if not text:
        raise UserError("say what to note: `/upgrade note TEXT`")
    if len(text) > MAX_NOTE:
        raise UserError(f"a note is at most {MAX_NOTE:,} characters (this one is {len(text):,})")
    runs = _runs.service(ctx)
    try:
        target = runs.resolve(args.run)
    except RunNotFound as exc:
        if args.run:
            raise
        if "several" in exc.user_message:
            raise RunNotFound(f"{exc.user_message} with `--run ID`") from None
        raise RunNotFound(
            "there is no active run to add a note to; a note goes into a run's thread "
            "(`/upgrade status` lists the runs)"
        ) from None
    require_member(target, ctx.user_id, ctx.directory, action="`/upgrade note`")
    out = runs.apply(
        target.id, lambda r: R.note(r, by=ctx.user_id, text=text, now=ctx.clock()), _runs.actor(ctx)
    )
    return Reply(template="runs/message", context={"message": f"Noted in the thread of run `{out.run.id}`."})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("text", nargs="+", metavar="TEXT", help="what happened (quotes are optional)")
    parser.add_argument("--run", metavar="RUN", help="a run id (default: the only active run)")


def register(registry: Registry) -> None:
    registry.add("note", run, arguments=_arguments, who=_runs.RUN_ROSTER)
