"""`upgrade-bot report RUN [-o html|md|json|png] [--out FILE]`: a run's report (the timeline
picture)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from bot.core.runs.report import build_report, render
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, common_options, formats
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    report = subparsers.add_parser(
        "report",
        parents=[common_options()],
        help="a run's report: the timeline picture, HTML, Markdown or JSON",
    )
    report.add_argument("run", metavar="RUN", help="a run id (see `exec status`)")
    formats(report, ["html", "md", "json", "png"], "html")
    report.add_argument(
        "--out", metavar="FILE", help="write here (default: standard output; a PNG goes to run-RUN.png)"
    )
    return configured(_report)


def _report(settings: Settings, args: argparse.Namespace) -> int:
    store = open_store(settings)
    try:
        body = render(build_report(store, args.run, now=datetime.now(UTC)), args.output)
    finally:
        store.close()
    out = args.out or (f"run-{args.run}.png" if args.output == "png" else None)
    if out:
        Path(out).write_bytes(body)
        print(f"wrote the {args.output} report of run {args.run} to {out}", file=sys.stderr)
    else:
        sys.stdout.write(body.decode())
    return EXIT_OK
