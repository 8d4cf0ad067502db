"""`/upgrade pause RUN --reason …`: change a run's state; audited with the reason."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.runs import machine as R
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Pause a run: no gate accepts approvals until it is resumed. `--reason` is required.

    The reason is on the card, in the thread and in the audit log. A step whose action is running finishes; the next gate waits. An open gate's message says the run is paused, by whom and why, with Resume instead of its buttons. Only people in the run's roster may do this.

    Example: `/upgrade pause --reason "waiting for the payments team"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _runs.change(
        ctx, args.run, "pause", lambda r: R.pause(r, by=ctx.user_id, reason=why, now=ctx.clock())
    )
    return Reply(template="runs/message", context={"message": f"Run `{out.run.id}` is {out.run.state}."})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", nargs="?", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")


def register(registry: Registry) -> None:
    registry.add("pause", run, arguments=_arguments, who=_runs.RUN_ROSTER)
