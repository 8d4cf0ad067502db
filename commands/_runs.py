"""What the run-changing subcommands share: the caller as an actor, the reason, the roster check.

Not a subcommand itself (no `register`); pause, resume, abort, skip, handoff and start use it.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.core.command import CommandContext
from bot.core.kube.owners import REASON_PLACEHOLDER
from bot.core.people import roles_of
from bot.core.runs import machine as R
from bot.core.runs.machine import require_member
from bot.core.runs.service import Actor, RunService
from bot.errors import PermissionDenied, UsageError, UserError


def service(ctx: CommandContext) -> RunService:
    """The run service, or a clear refusal on a front door that has none."""
    if ctx.runs is None:
        raise UserError("this front door cannot run upgrades")
    return ctx.runs


def actor(ctx: CommandContext) -> Actor:
    """The person (and where they asked from) that a transition is recorded against."""
    return Actor(
        user_id=ctx.user_id, source=ctx.source, channel_id=ctx.channel_id, correlation_id=ctx.correlation_id
    )


#: What a command the bot offers to copy has where the reason goes (`owners.action`), and the
#: three dots a plain terminal shows it as: never a reason of anyone's.
_PLACEHOLDERS = (REASON_PLACEHOLDER, "...")


def reason(words: list[str] | None, *, required: bool) -> str:
    """The `--reason …` words as one string; a UserError when it is required and missing, or is
    still the placeholder of a command the bot offered to copy (`--reason "…"`)."""
    text = " ".join(words or []).strip()
    if text in _PLACEHOLDERS:
        raise UsageError(
            f"replace the `{text}` after `--reason` with why (it goes on the card and into the audit log), "
            'e.g. `--reason "the fix is merged"`'
        )
    if required and not text:
        raise UsageError("say why with `--reason …`; it goes on the card and into the audit log")
    return text


def change(
    ctx: CommandContext, run_id: str | None, command: str, transition: Callable[[R.Run], R.Outcome]
) -> R.Outcome:
    """Apply `transition` to the run (default: the only live one) if the caller is in its roster."""
    runs = service(ctx)
    target = runs.resolve(run_id)
    require_member(target, ctx.user_id, ctx.directory, action=f"`/upgrade {command}`")
    return runs.apply(target.id, transition, actor(ctx))


def require_reader(ctx: CommandContext, run_id: str, *, action: str) -> None:
    """Refuse unless the caller is in the upgrade roster or in this run's roster (its plan's, with
    the run's handoffs): someone a role was handed to for a run may read what it recorded."""
    if roles_of(ctx.user_id, ctx.settings.roster, ctx.directory):
        return
    rows = ctx.store.run_rows(run_id)
    if rows is not None and roles_of(ctx.user_id, rows[0].roster, ctx.directory):
        return
    raise PermissionDenied(
        f"{action} is for the people in the upgrade roster or the run's; you are not in it"
    )


#: Who may change a run, as the reference says it (`change` decides: the run's own roster).
RUN_ROSTER = "anyone in the run's roster (its plan's roster, with the run's handoffs)"

#: Who may read a run's record (`require_reader` decides).
RUN_READERS = "anyone in the roster, or in the run's roster (with the run's handoffs)"
