"""`upgrade-bot snapshot export ID [-o json|yaml|wide] [--out FILE]`: a stored snapshot's body.

Its own parser: it shares its first word with `snapshot [LABEL…]`, whose labels are any text."""

from __future__ import annotations

import argparse
import json

from bot.core.snapshots import service as snapshots
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, EXIT_STATUSES, LOG_LEVELS, formats, kube_flags
from bot.frontdoor.cli.output import as_yaml, write_out
from bot.settings import Settings


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    export = argparse.ArgumentParser(
        prog="upgrade-bot snapshot export",
        description="Print a stored snapshot's body: JSON, YAML, or kubectl's wide table.",
        parents=[common],
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("id", help="snapshot id or label")
    # `wide` is kubectl's name; `kubectl-wide` is this command's older one.
    formats(export, ["json", "yaml", "wide", "kubectl-wide"], "json")
    export.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    export.add_argument("--cluster", help="with a label: which cluster")
    kube_flags(export)
    export.add_argument("--config", metavar="PATH")
    export.add_argument("--log-level", choices=LOG_LEVELS)
    export.add_argument("--log-format", choices=["text", "json"], default="text")
    export.set_defaults(command="snapshot-export")
    return export


def main(argv: list[str]) -> int:
    """`snapshot export`'s arguments (after those two words), parsed as `main` parses the rest."""
    export = parser()
    args, unknown = export.parse_known_args(argv)
    if unknown:
        export.error(f"unrecognized arguments: {' '.join(unknown)}")
    return configured(_export, read_only=True)(args)


def _export(settings: Settings, args: argparse.Namespace) -> int:
    store = open_store(settings)
    try:
        stored = snapshots.resolve(store, args.id, cluster=args.cluster)
    finally:
        store.close()
    if args.output == "json":
        text = json.dumps(stored.snap, indent=1) + "\n"
    elif args.output == "yaml":
        text = as_yaml(json.dumps(stored.snap))
    else:
        text = snapshots.export_kubectl_wide(stored.snap)
    write_out(text, args.out, f"snapshot #{stored.meta.id}")
    return EXIT_OK
