"""`/upgrade skip STEP --reason …`: record that a step will not be done by the bot (audited)."""

from __future__ import annotations

from bot.core import runs as R
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.run_service import Actor, require_member
from bot.errors import UserError


def run(ctx: CommandContext, args: Args) -> Reply:
    """Skip a step of a run that is not running: people did it by hand, or it does not apply.

    `--reason` is required. A step whose action is running cannot be skipped; pause or abort
    instead. Skipping the current step opens the next step's gate.
    """
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    reason = " ".join(args.reason or []).strip()
    if not reason:
        raise UserError("say why with `--reason …`; it goes on the card and into the audit log")
    target = ctx.runs.resolve(args.run)
    require_member(target, ctx.user_id, ctx.directory, action="`/upgrade skip`")
    actor = Actor(
        user_id=ctx.user_id, source=ctx.source, channel_id=ctx.channel_id, correlation_id=ctx.correlation_id
    )
    out = ctx.runs.apply(
        target.id,
        lambda r: R.skip(r, step_id=args.step, by=ctx.user_id, reason=reason, now=ctx.clock()),
        actor,
    )
    return Reply(
        template="runs/message", context={"message": f"Step `{args.step}` of run `{out.run.id}` skipped."}
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("step", help="the step id")
    parser.add_argument("--run", help="a run id (default: the only active run)")
    parser.add_argument("--reason", nargs="+", help="why (required)")


def register(registry: Registry) -> None:
    registry.add("skip", run, arguments=_arguments)
