"""`/upgrade diagnose`: the known-issue rules over a namespace, one pod, or the whole cluster."""

from __future__ import annotations

import contextlib
from typing import cast

from bot.core.checks import service as checks
from bot.core.clusters import pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE
from bot.core.rules import load_rules
from bot.core.validation import NAME_PATTERN
from bot.errors import UserError

#: Findings shown in one reply; a cluster with more is better narrowed to a namespace.
SHOWN = 10


def run(ctx: CommandContext, args: Args) -> Reply:
    """Match the known-issue rules against pods: `NAMESPACE`, `NAMESPACE/POD`, or every pod.

    Each match names the rule, the workload and its pods, what was seen (a waiting reason, a log
    line, an event), what it means and the commands that fix it, with links to the public
    evidence. Pods of one workload with the same problem are one finding.

    Example: `/upgrade diagnose payments`
    """
    namespace, pod = "", ""
    if args.target:
        namespace, _, pod = args.target.partition("/")
        for part in (namespace, pod) if pod else (namespace,):
            if not NAME_PATTERN.match(part) or len(part) > 253:
                raise UserError(f"`{args.target}` is not NAMESPACE or NAMESPACE/POD")
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)
    rules = load_rules(ctx.settings.rules_paths())
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        found = checks.diagnose(reader, rules=rules, namespace=namespace, pod=pod)
    hits = found.hits
    # One entry per rule: what it means and its evidence once, then each workload it matched with
    # what was seen and the commands for its own pods (a rule matching four workloads used to
    # repeat its explanation four times).
    groups: dict[str, dict[str, object]] = {}
    for h in hits[:SHOWN]:
        group = groups.setdefault(
            h.rule.id,
            {
                "id": h.rule.id,
                "title": h.rule.title,
                "explanation": h.rule.explanation,
                "links": h.rule.links,
                "hits": [],
            },
        )
        cast(list[dict[str, object]], group["hits"]).append(
            {"workload": h.workload, "pods": h.pods, "evidence": h.evidence, "remediation": h.remedy()}
        )
    return Reply(
        template="diagnose",
        ephemeral=False,
        context={
            "cluster": cluster.name,
            "scope": args.target or "every namespace",
            "groups": list(groups.values()),
            "total": len(hits),
            "more": max(0, len(hits) - SHOWN),
            "rule_count": len(rules),
            # No hit over no pods, or over pods not read, is no all-clear: the reply says which.
            "pods": found.pods,
            "pod": pod,
            "unread": found.unread,
            "notes": found.notes,
        },
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("target", nargs="?", help="NAMESPACE or NAMESPACE/POD (default: every pod)")
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")


def register(registry: Registry) -> None:
    registry.add("diagnose", run, arguments=_arguments, roles={ANY_ROLE})
