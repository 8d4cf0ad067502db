"""`/upgrade unwatch [ID]`: end a watch; its card and thread get a final summary."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, number_id
from bot.core.people import ANY_ROLE
from bot.errors import UserError
from commands.watch import service


def run(ctx: CommandContext, args: Args) -> Reply:
    """End a watch (default: the only live one) with a final summary on its card and in its thread.

    A watch a plan step runs ends with its step instead.

    Example: `/upgrade unwatch 2`
    """
    watches = service(ctx)
    if args.id is None:
        live = [w for w in watches.live() if not w.run_id]
        if len(live) != 1:
            raise UserError(
                "no watch is live" if not live else "several watches are live; name one (`/upgrade watches`)"
            )
        watch_id = live[0].id
    else:
        watch_id = args.id
    row = watches.get(watch_id)
    if row.run_id:
        raise UserError(f"watch {watch_id} belongs to run `{row.run_id}`; it ends with its step")
    row = watches.request_end(watch_id, by=ctx.user_id)
    return Reply(template="watches/ending", ephemeral=False, context={"watch": row, "user": ctx.user_id})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("id", nargs="?", type=number_id, help="a watch id (default: the only live one)")


def register(registry: Registry) -> None:
    registry.add("unwatch", run, arguments=_arguments, roles={ANY_ROLE})
