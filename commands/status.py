"""`/upgrade status [RUN]`: a run's steps, who approved what and when, and what it waits for."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.errors import UserError


def run(ctx: CommandContext, args: Args) -> Reply:
    """Show a run (default: the only active one) or, with several active, list them.

    The same view as the run's card: every step with its state, approvals with their times,
    and whom the open gate is waiting for.

    Example: `/upgrade status`
    """
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    if not args.run:
        live = ctx.store.runs(states=["active", "paused"])
        if len(live) != 1:
            recent = live or ctx.store.runs(limit=5)
            return Reply(template="runs/list", context={"runs": recent, "active": bool(live)})
    shown = ctx.runs.resolve(args.run)
    # The card leaves approvals out (it stays short in the channel); the one who asks sees them.
    return Reply(template="runs/card", context={**ctx.runs.card_context(shown), "with_approvals": True})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", nargs="?", help="a run id (default: the only active run)")


def register(registry: Registry) -> None:
    registry.add("status", run, arguments=_arguments)
