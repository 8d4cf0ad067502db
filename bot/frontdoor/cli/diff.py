"""`upgrade-bot diff A [B] [-o text|md|json|yaml]`: compare two snapshots, or one with the live
cluster; exit 3 on regressions."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from bot.core.clusters import group_labels, pick_cluster
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.diff import ESSENTIAL
from bot.core.snapshots.projection import take_snapshot
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import connect, open_store
from bot.frontdoor.cli.options import (
    EXIT_FAILED,
    EXIT_FOUND,
    EXIT_OK,
    Handler,
    Subparsers,
    cluster_flag,
    formats,
    kube_flags,
    verb_parser,
)
from bot.frontdoor.cli.output import as_yaml, write_out
from bot.frontdoor.cli.progress import progress_bar
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    diff = verb_parser(
        subparsers,
        "diff",
        "compare two snapshots; exit 3 on regressions",
    )
    diff.add_argument("a", help="the earlier snapshot: id or label")
    diff.add_argument("b", nargs="?", help="the later snapshot: id or label (default: the live cluster)")
    formats(diff, ["text", "md", "json", "yaml"], "text")
    diff.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    cluster_flag(diff)
    kube_flags(diff)
    return configured(_diff, read_only=True)


def _diff(settings: Settings, args: argparse.Namespace) -> int:
    cluster = pick_cluster(settings.clusters, args.cluster)

    def live() -> dict[str, object]:
        reader = connect(cluster)
        try:
            with progress_bar(quiet=args.output != "text") as progress:
                snap = take_snapshot(
                    reader,
                    label="live",
                    taken_by="terminal",
                    now=datetime.now(UTC),
                    node_group_labels=group_labels(settings.node_group_labels),
                    progress=progress,
                )
        finally:
            reader.close()
        snap["id"] = "live"
        return snap

    store = open_store(settings)
    try:
        report = snapshots.compare(
            store, args.a, args.b, cluster=cluster, live=live, restart_threshold=settings.restart_threshold
        )
    finally:
        store.close()
    if args.output == "yaml":
        text = as_yaml(report.to_json())
    else:
        text = {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}[args.output]()
    write_out(text if text.endswith("\n") else text + "\n", args.out, "the diff")
    # Pipelines gate on this: 3 when the upgrade left something worse than before (1: could not look).
    if report.has_regressions:
        return EXIT_FOUND
    blind = [resource for resource in report.not_compared if resource in ESSENTIAL]
    if blind:
        # No regression among what could be compared, but without these "nothing found" means nothing.
        print(
            f"upgrade-bot diff: {', '.join(blind)} not compared (not readable in one of the snapshots): "
            "no regression found is no pass",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
