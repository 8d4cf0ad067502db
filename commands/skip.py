"""`/upgrade skip STEP --reason …`: record that a step will not be done by the bot (audited)."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Skip a step of a run that is not running: people did it by hand, or it does not apply.

    `--reason` is required. A step whose action is running cannot be skipped; pause or abort
    instead. Skipping the current step opens the next step's gate.

    Example: `/upgrade skip drain-old --reason "drained by hand at 14:20"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _runs.change(
        ctx,
        args.run,
        "skip",
        lambda r: R.skip(r, step_id=args.step, by=ctx.user_id, reason=why, now=ctx.clock()),
    )
    return Reply(
        template="runs/message", context={"message": f"Step `{args.step}` of run `{out.run.id}` skipped."}
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("step", help="the step id")
    parser.add_argument("--run", metavar="RUN", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")


def register(registry: Registry) -> None:
    registry.add("skip", run, arguments=_arguments)
