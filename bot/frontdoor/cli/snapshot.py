"""`upgrade-bot snapshot [LABEL] [--cluster C]`: take a snapshot of a cluster and store it.
(`snapshot export ID` has its own parser: `snapshot_export`.)"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.core.checks.logprobe import log_probe
from bot.core.clusters import group_labels, pick_cluster
from bot.core.rules import load_rules
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.labels import label_of
from bot.core.snapshots.provider import provider_of
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import connect, open_store
from bot.frontdoor.cli.options import (
    EXIT_OK,
    Handler,
    Subparsers,
    cluster_flag,
    common_options,
    kube_flags,
    terminal_user,
)
from bot.frontdoor.cli.progress import progress_bar
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.adapters.store import Store


def register(subparsers: Subparsers) -> Handler:
    snap = subparsers.add_parser(
        "snapshot", parents=[common_options()], help="take a snapshot (or: snapshot export ID)"
    )
    # The words, not one: a second word gets its own reason (`label_of`), not argparse's.
    snap.add_argument("label", nargs="*", help="one word: pre, post, pre-2 … (default: manual)")
    cluster_flag(snap)
    kube_flags(snap)
    snap.add_argument("--as", dest="as_user", metavar="USER_ID", help="recorded as the person who took it")
    return configured(_snapshot, read_only=True)


def _snapshot(settings: Settings, args: argparse.Namespace) -> int:
    cluster = pick_cluster(settings.clusters, args.cluster)
    label = label_of(args.label)  # refused before the cluster is read
    # The store (sqlalchemy's import is a tenth of a 150,000-pod snapshot) opens on a thread once the
    # pods' helper process is listing them (`beside`): this process then mostly waits, and a store
    # that cannot open fails the command at the end. Opened from the start, the import held the
    # interpreter lock beside the kubernetes client's and doubled the time to connect.
    opener = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-store")
    opening: list[Future[Store]] = []

    def open_beside() -> None:
        if not opening:
            opening.append(opener.submit(open_store, settings))

    def opened() -> Store:
        open_beside()
        return opening[0].result()

    reader = None
    try:
        reader = connect(cluster)
        print(f"snapshot `{label}` of {reader.describe()} …", file=sys.stderr)
        with progress_bar() as progress:
            stored = snapshots.take_and_store(
                opened,
                reader,
                label=label,
                taken_by=args.as_user or terminal_user(),
                now=datetime.now(UTC),
                node_group_labels=group_labels(settings.node_group_labels),
                progress=progress,
                logs=log_probe(load_rules(settings.rules_paths())),
                provider=provider_of(cluster),
                beside=open_beside,
            )
    finally:
        if reader is not None:
            reader.close()
        opener.shutdown(wait=True)
        if opening and opening[0].exception() is None:
            opening[0].result().close()
    counts = stored.snap["counts"]
    print(
        f"snapshot #{stored.meta.id} `{label}`: {counts['nodes']} nodes, {counts['pods']} pods, "
        f"{counts['workloads']} workloads, {stored.meta.size / 1024:.1f} KiB stored"
    )
    for gap in stored.snap["gaps"]:
        print(f"gap: {gap['resource']}: {gap['reason']}")
    return EXIT_OK
