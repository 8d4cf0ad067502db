"""`upgrade-bot audit export [-o csv|md|json] [--since …] [--out FILE]`: the audit log."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from bot.core import audit
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, common_options, formats
from bot.frontdoor.cli.output import write_out
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    parser = subparsers.add_parser("audit", help="the audit log")
    actions = parser.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    export = actions.add_parser(
        "export", parents=[common_options()], help="write the audit log as CSV, Markdown or JSON"
    )
    formats(export, ["csv", "md", "json"], "csv")
    export.add_argument("--since", help="a duration (30m, 24h, 7d) or a date/time; default: everything")
    export.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    return configured(_export)


def _export(settings: Settings, args: argparse.Namespace) -> int:
    since = audit.parse_since(args.since, datetime.now(UTC), settings.timezone) if args.since else None
    store = open_store(settings)
    try:
        entries = store.audit_entries(since=since)
    finally:
        store.close()
    text = {"csv": audit.to_csv, "md": audit.to_markdown, "json": audit.to_json}[args.output](entries)
    write_out(text, args.out, f"{len(entries)} entries")
    return EXIT_OK
