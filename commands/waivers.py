"""`/upgrade waivers [--all]`: the waivers in force and those waiting for their second person."""

from __future__ import annotations

from datetime import datetime

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.records import WaiverRow


def run(ctx: CommandContext, args: Args) -> Reply:
    """List the waivers: active and pending ones (`--all`: expired and revoked too), with who, why
    and until when, and the configuration's `checks.ignore` entries (permanent).

    Example: `/upgrade waivers --all`
    """
    now = ctx.clock()
    rows = ctx.store.waivers()
    shown = [
        {"row": w, "status": _status(w, now)}
        for w in rows
        if args.all or (w.state in ("active", "pending") and now < w.expires_at)
    ]
    return Reply(
        template="waivers/list",
        context={"waivers": shown, "ignores": list(ctx.settings.check_ignores), "all": args.all},
    )


def _status(w: WaiverRow, now: datetime) -> str:
    if w.state == "revoked":
        return "revoked"
    if now >= w.expires_at:
        return "expired"
    return w.state


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--all", action="store_true", help="expired and revoked waivers too")


def register(registry: Registry) -> None:
    registry.add("waivers", run, arguments=_arguments, roles={ANY_ROLE})
