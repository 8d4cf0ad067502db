"""`/upgrade abort RUN --reason …`: change a run's state; audited with the reason."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Abort a run for good. `--reason` is required.

    An aborted run cannot be resumed; start a new run of the plan instead. Only people in the run's roster may do this.

    Example: `/upgrade abort --reason "the canary failed; rolling back by hand"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _runs.change(
        ctx, args.run, "abort", lambda r: R.abort(r, by=ctx.user_id, reason=why, now=ctx.clock())
    )
    return Reply(template="runs/message", context={"message": f"Run `{out.run.id}` is {out.run.state}."})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", nargs="?", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")


def register(registry: Registry) -> None:
    registry.add("abort", run, arguments=_arguments, who=_runs.RUN_ROSTER)
