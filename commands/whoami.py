"""`/upgrade whoami`: the roles the caller holds in the configured roster."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, Registry, Reply
from bot.core.people import roles_of


def run(ctx: CommandContext, args: Args) -> Reply:
    """Show which roster roles you hold (directly or through a user group), and, where a run's
    own roster differs (its plan's, after hand-offs), the roles you hold in that run.

    Example: `/upgrade whoami`
    """
    roles = sorted(roles_of(ctx.user_id, ctx.settings.roster, ctx.directory))
    # A run has its own roster (its plan's, after hand-offs): where it differs, the run's decides
    # who may approve its steps, so it is said here too.
    runs = [
        {"id": r.id, "plan": r.plan_name, "roles": held}
        for r in ctx.store.runs(states=["active", "paused"], limit=50)
        if (held := sorted(roles_of(ctx.user_id, r.roster, ctx.directory))) != roles
    ]
    return Reply(template="whoami", context={"user_id": ctx.user_id, "roles": roles, "runs": runs})


def register(registry: Registry) -> None:
    registry.add("whoami", run)
