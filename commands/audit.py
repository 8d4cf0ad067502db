"""`/upgrade audit`: a summary of the audit log, with the full trail attached as a file."""

from __future__ import annotations

from datetime import timedelta

from bot.core import audit
from bot.core.command import Args, CommandContext, CommandParser, FileAttachment, Registry, Reply
from bot.core.people import ANY_ROLE, require_any_role
from bot.errors import UserError
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """Summarise the audit log (default: the last 24 hours) and attach it as CSV.

    Every slash command and button action is in the log with its UTC time, user, channel,
    subcommand, arguments, outcome and correlation id. `--since` takes a duration (30m, 24h, 7d)
    or a date (2026-11-01, midnight in the configured time zone). `/upgrade audit RUN` attaches a
    run's full trail — every transition and decision with its actor, roles, UTC and plan-zone
    time and reason — as CSV and Markdown. Only people in the roster may read it (a run's trail,
    also the people in its roster, with its handoffs).

    Example: `/upgrade audit --since 7d`
    """
    now = ctx.clock()
    if args.run:
        _runs.require_reader(ctx, args.run, action="`/upgrade audit`")
        return _run_trail(ctx, args.run)
    require_any_role(
        ctx.user_id, frozenset({ANY_ROLE}), ctx.settings.roster, ctx.directory, action="`/upgrade audit`"
    )
    since = (
        audit.parse_since(args.since, now, ctx.settings.timezone) if args.since else now - timedelta(hours=24)
    )
    entries = ctx.store.audit_entries(since=since)
    stamp = now.strftime("%Y%m%dT%H%MZ")
    return Reply(
        template="audit",
        context={"since": since, "summary": audit.summarise(entries)},
        files=(
            FileAttachment(
                filename=f"upgrade-bot-audit-{stamp}.csv",
                content=audit.to_csv(entries).encode(),
                title="Audit log",
                filetype="csv",
            ),
        ),
    )


def _run_trail(ctx: CommandContext, run_id: str) -> Reply:
    """Every transition and decision of one run, as CSV and Markdown files."""
    entries = ctx.store.audit_entries(run_id=run_id)
    if not entries:
        raise UserError(f"the audit log has nothing for run `{run_id}`")
    return Reply(
        template="audit",
        context={"since": entries[0].at, "summary": audit.summarise(entries)},
        files=(
            FileAttachment(
                filename=f"upgrade-bot-run-{run_id}.csv",
                content=audit.to_csv(entries).encode(),
                title=f"Run {run_id}: audit trail",
                filetype="csv",
            ),
            FileAttachment(
                filename=f"upgrade-bot-run-{run_id}.md",
                content=audit.to_markdown(entries, title=f"Run {run_id}: audit trail").encode(),
                title=f"Run {run_id}: audit trail (Markdown)",
                filetype="markdown",
            ),
        ),
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "run", nargs="?", metavar="RUN", help="a run id: its whole trail, as CSV and Markdown"
    )
    parser.add_argument("--since", metavar="WHEN", help="a duration (30m, 24h, 7d) or a date/time")


def register(registry: Registry) -> None:
    # The log names who did what; it is for the people running upgrades, not the whole workspace
    # (a run's trail, also for the people its roster holds by handoff).
    registry.add(
        "audit", run, arguments=_arguments, who="anyone in the roster (a run's trail: also its run's roster)"
    )
