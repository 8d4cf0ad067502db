"""`/upgrade pause RUN --reason …`: change a run's state; audited with the reason."""

from __future__ import annotations

from bot.core import runs as R
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.run_service import Actor, require_member
from bot.errors import UserError


def run(ctx: CommandContext, args: Args) -> Reply:
    """Pause a run: no gate accepts approvals until it is resumed. `--reason` is required.

    The reason is on the card, in the thread and in the audit log. A step whose action is running finishes; the next gate waits. Only people in the run's roster may do this.
    """
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    reason = " ".join(args.reason or []).strip()
    if not reason:
        raise UserError("say why with `--reason …`; it goes on the card and into the audit log")
    target = ctx.runs.resolve(args.run)
    require_member(target, ctx.user_id, ctx.directory, action="`/upgrade pause`")
    actor = Actor(
        user_id=ctx.user_id, source=ctx.source, channel_id=ctx.channel_id, correlation_id=ctx.correlation_id
    )
    out = ctx.runs.apply(
        target.id, lambda r: R.pause(r, by=ctx.user_id, reason=reason, now=ctx.clock()), actor
    )
    return Reply(template="runs/message", context={"message": f"Run `{out.run.id}` is {out.run.state}."})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", nargs="?", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", help="why (required)")


def register(registry: Registry) -> None:
    registry.add("pause", run, arguments=_arguments)
