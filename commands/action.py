"""`/upgrade action cordon|uncordon|drain|restart|delete-pod|set-image ARG=VALUE … [--dry-run]
--reason "…"`: one cluster action outside a plan, behind a gate.

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
from typing import cast

from bot.core.clusters import group_labels, pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.jobs.common import JobCluster
from bot.core.jobs.preflight import preflight
from bot.core.jobs.registry import COMMAND_KINDS, KINDS, job_kind
from bot.core.people import ANY_ROLE, roles_of
from bot.core.runs.plans import one_step_plan
from bot.core.snapshots.projection import ClusterReader
from bot.errors import (
    BotError,
    ClusterUnreachable,
    PermissionDenied,
    TemporaryError,
    UsageError,
    UserError,
    clip,
)
from bot.records import ActionCall
from commands import _runs

log = logging.getLogger(__name__)

#: How long the one-step run's gate waits for its approvers before it times out.
GATE_TIMEOUT = "1h"


def run(ctx: CommandContext, args: Args) -> Reply:
    """Run one cluster action outside a plan, after the approvers' gate.

    `/upgrade action drain node=ip-10-0-1-7 --reason "bad disk"` · `… cordon nodegroup=istio
    version=1.25.16 …` (that group's nodes not on 1.25.16) · `… restart
    workloads=deployment/kube-system/coredns …` · `… restart namespace=payments selector=app=api …` ·
    `… delete-pod workload=statefulset/logging/es only=terminating force=true …` (its pods stuck
    Terminating) · `… set-image workload=daemonset/kube-system/kube-proxy …` (the image EKS documents).
    `--dry-run` lists exactly what would happen and changes nothing. A run with one step is
    started; the primary and the shadow (configurable) approve it before anything runs.

    Example: `/upgrade action cordon node=ip-10-0-1-7 --reason "bad disk"`
    """
    runs = _runs.service(ctx)
    kind = job_kind(args.kind)
    if kind is None or not kind.command:
        raise UserError(f"`{clip(args.kind, 30)}` is not an action; one of: {', '.join(COMMAND_KINDS)}")
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
            raise UsageError(f"`{clip(word, 60)}` is not ARG=VALUE (e.g. node=ip-10-0-1-7)")
        params[key.strip()] = value.strip()
    unknown = sorted(set(params) - kind.arguments)
    if unknown:
        accepted = ", ".join(sorted(kind.arguments - {"dry_run"}))
        raise UsageError(f"`{args.kind}` takes {accepted}; not {', '.join(unknown)}")
    missing_args = sorted(kind.required - set(params))
    if missing_args:
        raise UsageError(f"`{args.kind}` needs {', '.join(missing_args)}")
    if args.dry_run:
        params["dry_run"] = "true"
    cluster = pick_cluster(settings.clusters, args.cluster)
    now = ctx.clock().astimezone(settings.zone)
    name = f"action-{args.kind}-{secrets.token_hex(3)}"
    approvers = list(settings.action_approvers)
    missing = [r for r in approvers if not settings.roster.get(r)]
    if missing:
        raise UserError(f"nobody is in the roster for {', '.join(missing)}: the action's gate needs them")
    # Refuses what a plan would refuse (names Kubernetes cannot have, versions in other digits)
    # before the cluster is asked anything.
    try:
        kind.check(params)
    except UserError as exc:
        # A bad value (a duration, a name Kubernetes cannot have): the command's usage, as a typo's.
        raise UsageError(f"`{args.kind}`: {exc.user_message}") from None
    what = " ".join(f"{k}={v}" for k, v in params.items())
    reader = ctx.connect_cluster(cluster)
    with contextlib.closing(reader):
        version, unreachable = _cluster_version(reader, cluster.name)
        # What it names must exist (and a group have nodes to act on) before anyone is asked; a
        # cluster that does not answer now may answer by the time the approvers have: the check
        # is said to be skipped, and the gate opens all the same.
        skipped = (
            unreachable
            or preflight(
                cast(JobCluster, reader),  # the kube adapter's Cluster: every read a job's plan makes
                args.kind,
                params,
                node_group_labels=group_labels(settings.node_group_labels),
                now=ctx.clock(),
            ).skipped
        )
    plan = one_step_plan(
        name=name,
        description=f"/upgrade action {args.kind} {what} — asked by {ctx.user_id}: {why}",
        cluster=cluster.name,
        version=version,
        window=(now, now + timedelta(hours=2)),
        timezone=settings.timezone,
        channel=channel,
        roster=settings.roster,
        gate_timeout=GATE_TIMEOUT,
        call=ActionCall(name=args.kind, args=params),
        title=f"{'Dry run: ' if args.dry_run else ''}{args.kind} {what}",
        step_description=f"Asked by {ctx.user_id}: {why}",
        approvers=approvers,
        source=f"/upgrade action {args.kind}",
    )
    ctx.store.save_plan(name=name, text=plan.text, loaded_by=ctx.user_id, loaded_at=ctx.clock())
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
    parser.add_argument("kind", help=f"one of {', '.join(COMMAND_KINDS)}")
    parser.add_argument("params", nargs="*", help=f"ARG=VALUE: {_argument_names()}")
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")
    parser.add_argument("--dry-run", action="store_true", help="list what would happen; change nothing")
    parser.add_argument(
        "--reason", nargs="+", metavar="TEXT", help="why (required; on the card and in the audit log)"
    )


def register(registry: Registry) -> None:
    registry.add("action", run, arguments=_arguments, roles={ANY_ROLE})


def _argument_names() -> str:
    """Each offered kind's arguments, for the help: `cordon, uncordon: node, nodegroup, version · …`
    (kinds that take the same ones share a line)."""
    by_arguments: dict[tuple[str, ...], list[str]] = {}
    for kind in KINDS:
        if kind.command:
            by_arguments.setdefault(tuple(sorted(kind.arguments - {"dry_run"})), []).append(kind.name)
    return " · ".join(f"{', '.join(kinds)}: {', '.join(names)}" for names, kinds in by_arguments.items())
