"""`/upgrade watches`: the live watches, with their cluster, scope and card."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from commands.watch import service


def run(ctx: CommandContext, args: Args) -> Reply:
    """List the live watches: id, cluster, scope, who started it, when it ends.

    Example: `/upgrade watches`
    """
    return Reply(template="watches/list", context={"watches": service(ctx).live()})


def _arguments(parser: CommandParser) -> None:
    pass


def register(registry: Registry) -> None:
    registry.add("watches", run, arguments=_arguments, roles={ANY_ROLE})
