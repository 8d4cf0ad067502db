"""`/upgrade audit`: a summary of the audit log, with the full trail attached as a file."""

from __future__ import annotations

from datetime import timedelta

from bot.core import audit
from bot.core.command import Args, CommandContext, CommandParser, FileAttachment, Registry, Reply
from bot.core.people import ANY_ROLE


def run(ctx: CommandContext, args: Args) -> Reply:
    """Summarise the audit log (default: the last 24 hours) and attach it as CSV.

    Every slash command and button action is in the log with its UTC time, user, channel,
    subcommand, arguments, outcome and correlation id. `--since` takes a duration (30m, 24h, 7d)
    or a date (2026-11-01, midnight in the configured time zone). Only people in the roster may
    read it.
    """
    now = ctx.clock()
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


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--since", help="a duration (30m, 24h, 7d) or a date/time")


def register(registry: Registry) -> None:
    # The log names who did what; it is for the people running upgrades, not the whole workspace.
    registry.add("audit", run, arguments=_arguments, roles={ANY_ROLE})
