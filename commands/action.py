"""`/upgrade action cordon|uncordon|drain|restart ARG=VALUE … [--dry-run] --reason "…"`: one
cluster action outside a plan, behind a gate.

It never acts at once: it starts a one-step run (its own card and thread in the operations channel)
whose gate the configured approvers must pass (`actions.approvers`: the primary and the shadow by
default), then the action runs as a plan step's would (durable, resumable, each pod evicted once),
and the run ends with it. There is no generic "run kubectl": only these actions, with the
arguments a plan step takes.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from datetime import timedelta
from typing import Any, cast

import yaml

from bot.core.actions import default_registry
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.jobs.common import JobCluster
from bot.core.jobs.preflight import preflight
from bot.core.people import ANY_ROLE, roles_of
from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, ClusterReader
from bot.core.snapshots.service import pick_cluster
from bot.errors import BotError, ClusterUnreachable, PermissionDenied, TemporaryError, UserError, clip
from commands import _runs

log = logging.getLogger(__name__)

ACTIONS = ("cordon", "uncordon", "drain", "restart")
#: How long the one-step run's gate waits for its approvers before it times out.
GATE_TIMEOUT = "1h"


def run(ctx: CommandContext, args: Args) -> Reply:
    """Run one cluster action outside a plan, after the approvers' gate.

    `/upgrade action drain node=ip-10-0-1-7 --reason "bad disk"` · `… cordon nodegroup=istio
    version=1.25.16 …` (that group's nodes not on 1.25.16) · `… restart
    workloads=deployment/kube-system/coredns …` · `… restart namespace=payments selector=app=api …`.
    `--dry-run` lists exactly what would happen and changes nothing. A run with one step is
    started; the primary and the shadow (configurable) approve it before anything runs.

    Example: `/upgrade action cordon node=ip-10-0-1-7 --reason "bad disk"`
    """
    runs = _runs.service(ctx)
    if args.kind not in ACTIONS:
        raise UserError(f"`{clip(args.kind, 30)}` is not an action; one of: {', '.join(ACTIONS)}")
    why = _runs.reason(args.reason, required=True)
    settings = ctx.settings
    if not roles_of(ctx.user_id, settings.roster, ctx.directory):
        raise PermissionDenied("cluster actions are for the people in the roster; you are not in it")
    channel = settings.channels.operations
    if not channel:
        raise UserError("no operations channel: set `channels.operations` in the configuration")
    params: dict[str, str] = {}
    for word in args.params:
        key, sep, value = word.partition("=")
        if not sep or not key or not value:
            raise UserError(f"`{clip(word, 60)}` is not ARG=VALUE (e.g. node=ip-10-0-1-7)")
        params[key.strip()] = value.strip()
    spec = default_registry().get(args.kind)
    assert spec is not None
    unknown = sorted(set(params) - spec.arguments)
    if unknown:
        accepted = ", ".join(sorted(spec.arguments - {"dry_run"}))
        raise UserError(f"`{args.kind}` takes {accepted}; not {', '.join(unknown)}")
    if args.dry_run:
        params["dry_run"] = "true"
    cluster = pick_cluster(settings.clusters, args.cluster)
    now = ctx.clock().astimezone(settings.zone)
    name = f"action-{args.kind}-{secrets.token_hex(3)}"
    approvers = list(settings.action_approvers)
    missing = [r for r in approvers if not settings.roster.get(r)]
    if missing:
        raise UserError(f"nobody is in the roster for {', '.join(missing)}: the action's gate needs them")
    what = " ".join(f"{k}={v}" for k, v in params.items())
    plan: dict[str, Any] = {
        "name": name,
        "description": f"/upgrade action {args.kind} {what} — asked by {ctx.user_id}: {why}",
        "cluster": cluster.name,
        "current_version": "",
        "target_version": "",
        "window": {
            "start": now.strftime("%Y-%m-%dT%H:%M"),
            "end": (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"),
            "timezone": settings.timezone,
        },
        "channels": {"operations": channel},
        "roster": {role: list(people) for role, people in settings.roster.items()},
        "defaults": {"timeout": GATE_TIMEOUT},
        "steps": [
            {
                "id": args.kind,
                "title": f"{'Dry run: ' if args.dry_run else ''}{args.kind} {what}"[:200],
                "description": f"Asked by {ctx.user_id}: {why}",
                "gate": {"approve": approvers},
                "actions": [{args.kind: params}],
            }
        ],
    }
    from bot.core.runs.plans import parse_plan

    # Refuses what a plan would refuse (names Kubernetes cannot have, versions in other digits)
    # before the cluster is asked anything.
    parse_plan(
        yaml.safe_dump({**plan, "current_version": "1.0", "target_version": "1.0"}, sort_keys=False),
        source=f"/upgrade action {args.kind}",
    )
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        version, unreachable = _cluster_version(reader, cluster.name)
        plan["current_version"] = plan["target_version"] = version
        # What it names must exist (and a group have nodes to act on) before anyone is asked; a
        # cluster that does not answer now may answer by the time the approvers have: the check
        # is said to be skipped, and the gate opens all the same.
        skipped = (
            unreachable
            or preflight(
                cast(JobCluster, reader),  # the kube adapter's Cluster: every read a job's plan makes
                args.kind,
                params,
                node_group_labels=settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
                now=ctx.clock(),
            ).skipped
        )
    text = yaml.safe_dump(plan, sort_keys=False)
    ctx.store.save_plan(name=name, text=text, loaded_by=ctx.user_id, loaded_at=ctx.clock())
    out = runs.start(name, _runs.actor(ctx))
    gate = " and ".join(f"the {r}" for r in approvers)
    return Reply(
        template="runs/message",
        ephemeral=False,
        context={
            "message": f"`{args.kind}` on {cluster.name} is run `{out.run.id}`; it waits for {gate} "
            f"to approve it in its thread{' (dry run: nothing will change)' if args.dry_run else ''}."
            + (f" The check that what it names exists was skipped: {skipped}." if skipped else ""),
            "run_id": out.run.id,
        },
    )


def _cluster_version(reader: ClusterReader, cluster: str) -> tuple[str, str]:
    """The control plane's version (the run card shows it) and, when the cluster cannot be
    reached, why (the existence check is then skipped; "0.0" stands for the unknown version).
    Any other answer (forbidden, a broken configuration) is refused now, before anyone is asked."""
    try:
        info = reader.get_json("/version")
    except (ClusterUnreachable, TemporaryError) as exc:
        log.warning("action on cluster %s: version not read, existence check skipped: %s", cluster, exc)
        return "0.0", exc.user_message
    except BotError as exc:
        raise UserError(f"cluster {cluster} did not answer: {exc.user_message}") from None
    text = str(info.get("gitVersion", "")).lstrip("v").split("-")[0].split("+")[0]
    return text or "0.0", ""


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("kind", help=f"one of {', '.join(ACTIONS)}")
    parser.add_argument("params", nargs="*", help="ARG=VALUE: node=…, nodegroup=…, version=…, workloads=…")
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")
    parser.add_argument("--dry-run", action="store_true", help="list what would happen; change nothing")
    parser.add_argument(
        "--reason", nargs="+", metavar="TEXT", help="why (required; on the card and in the audit log)"
    )


def register(registry: Registry) -> None:
    registry.add("action", run, arguments=_arguments, roles={ANY_ROLE})
