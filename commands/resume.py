"""`/upgrade resume RUN --reason …`: change a run's state; audited with the reason."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Resume a paused run; a failed or interrupted step gets a fresh gate.

    Nothing re-runs by itself: the step's gate must be approved again before its action runs. A gate that was open when the run paused is posted again at the end of the thread, and the approvals given before the pause do not count. Only people in the run's roster may do this.

    Example: `/upgrade resume --reason "the payments team confirmed"`
    """
    why = _runs.reason(args.reason, required=False)
    out = _runs.change(
        ctx, args.run, "resume", lambda r: R.resume(r, by=ctx.user_id, reason=why, now=ctx.clock())
    )
    return Reply(template="runs/message", context={"message": f"Run `{out.run.id}` is {out.run.state}."})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", nargs="?", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (optional)")


def register(registry: Registry) -> None:
    registry.add("resume", run, arguments=_arguments, who=_runs.RUN_ROSTER)
