"""`/upgrade whoami`: the roles the caller holds in the configured roster."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, Registry, Reply
from bot.core.people import roles_of


def run(ctx: CommandContext, args: Args) -> Reply:
    """Show which roster roles you hold (directly or through a user group).

    Example: `/upgrade whoami`
    """
    roles = sorted(roles_of(ctx.user_id, ctx.settings.roster, ctx.directory))
    return Reply(template="whoami", context={"user_id": ctx.user_id, "roles": roles})


def register(registry: Registry) -> None:
    registry.add("whoami", run)
