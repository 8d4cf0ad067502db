"""`/upgrade fleet …`: fleet runs (issue 41) — clusters in stages, the first a canary.

Verbs: `start FLEET`, `status [ID]`, `approve [ID]`, `pause [ID] --reason`, `resume [ID]`,
`skip CLUSTER --reason … [--fleet ID]`, `retry --failed [--fleet ID]`, `abort [ID] --reason`.
Each is audited against the fleet run; the fleet's roster decides who may use them.
"""

from __future__ import annotations

from markupsafe import Markup

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.fleets.service import FleetService
from bot.core.people import ANY_ROLE
from bot.core.rendering import people
from bot.errors import UsageError, UserError
from commands import _runs

_USAGE = (
    "usage: /upgrade fleet start FLEET | status [ID] | approve [ID] | pause [ID] --reason … | resume [ID]"
    " | skip CLUSTER --reason … | retry --failed | abort [ID] --reason … | carry-waivers"
)


def _service(ctx: CommandContext) -> FleetService:
    if ctx.fleets is None:
        raise UserError("this front door cannot run fleets")
    return ctx.fleets


def _said(ctx: CommandContext, fleet_id: str, message: str) -> Reply:
    status = _service(ctx).status(fleet_id)
    return Reply(template="runs/message", context={"message": Markup(f"{people(message)}\n{status}")})


def _status(ctx: CommandContext, fleet_id: str | None) -> Reply:
    # Slack markup already (`render.status_text`): the people its reasons name as mentions, as on
    # the fleet's card, and the soak's start a date token — not escaped again.
    return Reply(template="runs/message", context={"message": _service(ctx).status(fleet_id)})


def run(ctx: CommandContext, args: Args) -> Reply:
    """Fleet runs: clusters upgraded in stages, the first a canary that gates the rest.

    `/upgrade fleet start FLEET` starts the fleet plan `FLEET` (`templates/fleets/FLEET.yaml`);
    `/upgrade fleet` alone shows the live fleet: every cluster by stage, the soak clock and who
    the next gate waits for. `/upgrade help fleet VERB` shows status, approve, pause, resume,
    skip, retry or abort.

    Example: `/upgrade fleet`
    """
    return _status(ctx, None)


def start(ctx: CommandContext, args: Args) -> Reply:
    """Start a fleet run of the fleet plan FLEET: its canary's child runs start at once.

    Example: `/upgrade fleet start example`
    """
    fleet = _service(ctx).start(args.fleet, _runs.actor(ctx))
    return _said(ctx, fleet.id, f"Fleet `{fleet.id}` started.")


def status(ctx: CommandContext, args: Args) -> Reply:
    """Show a fleet run: each cluster's state, versions and step by stage, the soak, the next gate.

    Example: `/upgrade fleet status`
    """
    return _status(ctx, args.id)


def approve(ctx: CommandContext, args: Args) -> Reply:
    """Approve the gate the fleet waits on (its stage's `before` or `after`), as a step's gate.

    Example: `/upgrade fleet approve`
    """
    out = _service(ctx).approve(args.id, _runs.actor(ctx))
    return _said(ctx, out.fleet.id, f"Approved: {out.events[0].detail}.")


def pause(ctx: CommandContext, args: Args) -> Reply:
    """Pause a fleet run: no child starts until it is resumed; running children go on. `--reason` is required.

    Example: `/upgrade fleet pause --reason "payments freeze"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _service(ctx).pause(args.id, _runs.actor(ctx), why)
    return _said(ctx, out.fleet.id, f"Fleet `{out.fleet.id}` is paused.")


def resume(ctx: CommandContext, args: Args) -> Reply:
    """Resume a paused fleet run; refused while a stage is over its failure budget.

    A soak that failed starts again from zero.

    Example: `/upgrade fleet resume`
    """
    out = _service(ctx).resume(args.id, _runs.actor(ctx))
    return _said(ctx, out.fleet.id, f"Fleet `{out.fleet.id}` is {out.fleet.state}.")


def skip(ctx: CommandContext, args: Args) -> Reply:
    """Leave a failed or not yet started cluster out of the fleet, with the reason (audited).

    Example: `/upgrade fleet skip agora-ci --reason "PDB fixed in the plan for the others"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _service(ctx).skip(args.fleet, args.cluster, _runs.actor(ctx), why)
    return _said(ctx, out.fleet.id, f"{args.cluster} is skipped.")


def retry(ctx: CommandContext, args: Args) -> Reply:
    """Run the current stage's failed clusters again (`--failed`), each as a new child run of the
    same pinned plan and target version.

    Example: `/upgrade fleet retry --failed`
    """
    if not args.failed:
        raise UsageError("say which: `fleet retry --failed`", usage=_USAGE)
    out = _service(ctx).retry_failed(args.fleet, _runs.actor(ctx))
    retried = ", ".join(e.cluster for e in out.events if e.kind == "cluster_retried")
    return _said(ctx, out.fleet.id, f"Retrying {retried}.")


def abort(ctx: CommandContext, args: Args) -> Reply:
    """Abort a fleet run: no further child starts. Running children go on; abort them with `/upgrade abort RUN`.

    Example: `/upgrade fleet abort --reason "postponed to next quarter"`
    """
    why = _runs.reason(args.reason, required=True)
    out = _service(ctx).abort(args.id, _runs.actor(ctx), why)
    return _said(ctx, out.fleet.id, f"Fleet `{out.fleet.id}` is aborted.")


def carry_waivers(ctx: CommandContext, args: Args) -> Reply:
    """Carry the canary's active waivers to the fleet's later clusters in one go (audited).

    Same finding, objects and end, the reason saying where it came from; a Required finding's
    waiver arrives pending, for a second person to confirm on each cluster.

    Example: `/upgrade fleet carry-waivers`
    """
    lines = _service(ctx).carry_waivers(args.fleet, _runs.actor(ctx))
    return Reply(
        template="runs/message",
        context={"message": f"Carried {len(lines)} waiver(s):\n" + "\n".join(f"• {line}" for line in lines)},
    )


def _no_arguments(parser: CommandParser) -> None:
    parser.usage = _USAGE.removeprefix("usage: ")


def _start_arguments(parser: CommandParser) -> None:
    parser.add_argument("fleet", help="a fleet plan's name (templates/fleets/NAME.yaml)")


def _id(parser: CommandParser) -> None:
    parser.add_argument("id", nargs="?", help="a fleet run id (default: the only live one)")


def _id_reason(parser: CommandParser) -> None:
    _id(parser)
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")


def _skip_arguments(parser: CommandParser) -> None:
    parser.add_argument("cluster", help="the cluster to leave out")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (required)")
    parser.add_argument("--fleet", help="a fleet run id (default: the only live one)")


def _fleet_option(parser: CommandParser) -> None:
    parser.add_argument("--fleet", help="a fleet run id (default: the only live one)")


def _retry_arguments(parser: CommandParser) -> None:
    parser.add_argument("--failed", action="store_true", help="the failed clusters of the current stage")
    parser.add_argument("--fleet", help="a fleet run id (default: the only live one)")


def register(registry: Registry) -> None:
    registry.add("fleet", run, arguments=_no_arguments, roles={ANY_ROLE})
    registry.add_verb("fleet", "start", start, arguments=_start_arguments)
    registry.add_verb("fleet", "status", status, arguments=_id)
    registry.add_verb("fleet", "approve", approve, arguments=_id)
    registry.add_verb("fleet", "pause", pause, arguments=_id_reason)
    registry.add_verb("fleet", "resume", resume, arguments=_id)
    registry.add_verb("fleet", "skip", skip, arguments=_skip_arguments)
    registry.add_verb("fleet", "retry", retry, arguments=_retry_arguments)
    registry.add_verb("fleet", "abort", abort, arguments=_id_reason)
    registry.add_verb("fleet", "carry-waivers", carry_waivers, arguments=_fleet_option)
