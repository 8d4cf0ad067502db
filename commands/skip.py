"""`/upgrade skip STEP --reason …`: a vote to skip a step, counted as its gate counts approvals (audited)."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from bot.records import RunState, StepState
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Skip a step of a run that is not running: people did it by hand, or it does not apply.

    `--reason` is required. Skipping is voted as the step's gate is approved: a step whose gate
    needs the primary and the shadow is skipped once both have run this (one vote each). A step
    whose action is running cannot be skipped; pause or abort instead. Skipping the current step
    opens the next step's gate; in a paused run it stays paused, and `/upgrade resume` opens it.

    Example: `/upgrade skip drain-old --reason "drained by hand at 14:20"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _runs.change(
        ctx,
        args.run,
        "skip",
        lambda r: R.skip_step(
            r, step_id=args.step, user_id=ctx.user_id, directory=ctx.directory, reason=why, now=ctx.clock()
        ),
    )
    run_id = out.run.id
    if out.run.step_run(args.step).state is not StepState.SKIPPED:
        still = R.skip_needs(out.run, args.step, ctx.clock())
        message = f"Your vote to skip `{args.step}` of run `{run_id}` is counted; it still needs {still}."
    else:
        message = f"Step `{args.step}` of run `{run_id}` skipped."
        nxt = out.run.current
        if out.run.state is RunState.PAUSED and nxt is not None:
            message += f" The run is still paused: `/upgrade resume` opens `{nxt.step_id}`'s gate."
    return Reply(template="runs/message", context={"message": message})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("step", help="the step id")
    parser.add_argument("--run", metavar="RUN", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")


def register(registry: Registry) -> None:
    registry.add(
        "skip",
        run,
        arguments=_arguments,
        who="one person per role of the step's gate, as the gate counts approvals, in the run's roster",
    )
