"""`/upgrade snapshots`: the recent snapshots, newest first."""

from __future__ import annotations

import json

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply, bounded_int
from bot.core.people import ANY_ROLE


def run(ctx: CommandContext, args: Args) -> Reply:
    """List recent snapshots (id, label, cluster, time, who took it, size, gaps).

    Example: `/upgrade snapshots --limit 5`
    """
    metas = ctx.store.snapshots(cluster=args.cluster, limit=args.limit)
    rows = [{"meta": m, "summary": json.loads(m.summary)} for m in metas]
    return Reply(template="snapshots", context={"rows": rows, "cluster": args.cluster})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--cluster", metavar="NAME", help="only this cluster")
    parser.add_argument(
        "--limit", type=bounded_int(1, 200), default=10, help="how many (default 10, at most 200)"
    )


def register(registry: Registry) -> None:
    registry.add("snapshots", run, arguments=_arguments, roles={ANY_ROLE})
