"""`/upgrade watch`: stream a cluster's rollout status into the channel, as one live card and a thread."""

from __future__ import annotations

from bot.core.clusters import pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.durations import parse_duration
from bot.core.people import ANY_ROLE
from bot.core.watches.service import WatchService
from bot.errors import UserError


def service(ctx: CommandContext) -> WatchService:
    """The watch service, or a clear refusal on a front door that has none."""
    if ctx.watches is None:
        raise UserError("this front door cannot watch clusters")
    return ctx.watches


def run(ctx: CommandContext, args: Args) -> Reply:
    """Start a watch: a card in this channel, edited in place, and a thread of milestones.

    The card shows per node group the nodes on the new kubelet version, old nodes cordoned and
    remaining, NotReady nodes; unhealthy pods by reason (kube-system first, top workloads) and
    workloads mid-rollout. The thread gets nodes joining, cordoned and removed, workloads entering
    CrashLoopBackOff, rollouts completing. It runs until `--for` is over or `/upgrade unwatch`.

    Example: `/upgrade watch --nodegroup ng-shared --for 2h`
    """
    watches = service(ctx)
    cluster = pick_cluster(ctx.settings.clusters, args.cluster)
    duration = None
    if args.duration:
        try:
            duration = parse_duration(args.duration)
        except ValueError as exc:
            raise UserError(f"--for {args.duration}: {exc}") from None
    channel = args.channel or ctx.channel_id
    if not channel:
        raise UserError("a watch posts its card in a channel; start it from one (or name it with --channel)")
    row = watches.start(
        cluster=cluster.name,
        channel=channel,
        started_by=ctx.user_id,
        nodegroups=tuple(args.nodegroup or ()),
        namespaces=tuple(args.namespace or ()),
        duration=duration,
    )
    return Reply(template="watches/started", context={"watch": row})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("--cluster", metavar="NAME", help="a configured cluster (default: the only one)")
    parser.add_argument("--nodegroup", action="append", help="watch only this node group (repeatable)")
    parser.add_argument("--namespace", action="append", help="watch only this namespace (repeatable)")
    parser.add_argument("--for", dest="duration", help="end by itself after this long (30m, 2h)")
    parser.add_argument(
        "--channel", metavar="CHANNEL", help="the channel ID for the card (default: where it was asked)"
    )


def register(registry: Registry) -> None:
    registry.add("watch", run, arguments=_arguments, roles={ANY_ROLE})
