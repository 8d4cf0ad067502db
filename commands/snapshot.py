"""`/upgrade snapshot`: record the cluster's state (nodes, pods, workloads, PDBs, events) now."""

from __future__ import annotations

import contextlib
import json

from bot.core.checks.logprobe import log_probe
from bot.core.clusters import group_labels, pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.core.rules import load_rules
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.labels import label_of
from bot.core.snapshots.provider import provider_of


def run(ctx: CommandContext, args: Args) -> Reply:
    """Take a snapshot of the cluster and store it under a one-word label such as `pre` or `post`.

    It records the control-plane version and served APIs, every node (group, versions, readiness,
    taints, cordon), every pod folded under its workload (ready x/y, restarts, waiting reasons,
    images), Deployments/DaemonSets/StatefulSets with their rollout verdict, PDBs, namespaces and
    the last hour's Warning events. Anything the bot may not read is reported as a gap.

    Example: `/upgrade snapshot pre`
    """
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)
    label = label_of(args.label)  # refused before the cluster is read
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        stored = snapshots.take_and_store(
            ctx.store,
            reader,
            label=label,
            taken_by=ctx.user_id,
            now=ctx.clock(),
            node_group_labels=group_labels(ctx.settings.node_group_labels),
            # The lines the log-reading rules match, which a twin of the cluster replays.
            logs=log_probe(load_rules(ctx.settings.rules_paths())),
            # The cloud's side, when the cluster names a provider (a twin serves it).
            provider=provider_of(cluster),
        )
    summary = json.loads(stored.meta.summary)
    return Reply(
        template="snapshot",
        ephemeral=False,
        context={"meta": stored.meta, "summary": summary, "cluster": cluster.name, "context": reader.context},
    )


def _arguments(parser: CommandParser) -> None:
    # The words, not one: a second word gets its own reason (`label_of`), not argparse's.
    parser.add_argument("label", nargs="*", help="one word: pre, post, pre-2 … (default: manual)")
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")


def register(registry: Registry) -> None:
    registry.add("snapshot", run, arguments=_arguments, roles={ANY_ROLE})
