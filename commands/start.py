"""`/upgrade start PLAN`: start a run of a loaded plan; its card appears in the operations channel.

Starting outside the maintenance windows (or in a freeze) needs the same override as scheduling:
the coordinator, with a reason, audited. A start inside the window of a pending schedule of the
plan is allowed as that schedule was (its override, if any, covers it), and the run is attached
to the schedule so its end is announced.
"""

from __future__ import annotations

from datetime import timedelta

from markupsafe import Markup

from bot.core.announcements.overrides import (
    authorize_override,
    merged_roster,
    overridden,
    override_audit,
    window_refusal,
)
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE, roles_of
from bot.core.rendering import slack_date, slack_escape
from bot.core.runs.library import find_plan
from bot.core.runs.plans import window_past
from bot.errors import PermissionDenied, UserError
from commands import _runs

#: How long before a scheduled window a run may start and still belong to that schedule.
EARLY_START = timedelta(hours=1)


def run(ctx: CommandContext, args: Args) -> Reply:
    """Start a run of a loaded plan: a card in the operations channel, a thread for the steps.

    Only someone in the plan's roster may start it. The first step's gate opens at once; every
    step then waits for the people its gate names. Outside the maintenance windows the
    coordinator may start it with `--override --reason "…"` (audited).

    Example: `/upgrade start eks-nodegroups`
    """
    runs = _runs.service(ctx)
    _row, plan = find_plan(ctx.store, args.plan)
    if not roles_of(ctx.user_id, plan.roster, ctx.directory):
        raise PermissionDenied(f"starting `{plan.name}` is for the people in its roster; you are not in it")
    if not (plan.operations_channel or ctx.settings.channels.operations):
        raise UserError("no operations channel: set `channels.operations` in the plan or the configuration")
    clusters = ctx.settings.clusters
    if clusters and plan.cluster not in clusters:
        # Its first action would fail, and the run pause, on a cluster the bot cannot reach at all.
        raise UserError(
            f"`{plan.name}` is for cluster `{plan.cluster}`, which this bot does not know (configured: "
            f"{', '.join(sorted(clusters))}); fix the plan's `cluster:` or add it under `clusters:`"
        )
    now = ctx.clock()
    announcements = ctx.announcements
    if announcements is not None:
        # A schedule whose window ended with no run is over (missed), not this run's nor pending.
        announcements.close_missed(now)
    # A schedule whose window is open (or opens within the hour: teams start a little early)
    # is the one this run belongs to; inside its window it also stands for the window check.
    schedule = next(
        (
            s
            for s in ctx.store.schedules(states=["scheduled"], plan_name=plan.name)
            if s.window_start - EARLY_START <= now < s.window_end
        ),
        None,
    )
    end = now + plan.window.length
    refusal = (
        None
        if schedule is not None and schedule.window_start <= now
        else window_refusal(ctx.settings.windows, now, end, plan.window.timezone)
    )
    override = ""
    if refusal is not None:
        if not args.override:
            raise UserError(refusal)
        override = authorize_override(
            user_id=ctx.user_id,
            roster=merged_roster(ctx.settings.roster, plan.roster),
            directory=ctx.directory,
            reason=args.reason or "",
            refusal=refusal,
            past=overridden(ctx.settings.windows, now, end),
        )
    out = runs.start(
        args.plan,
        _runs.actor(ctx),
        # Before the card is posted: the card counts down to the schedule's window, not the plan's.
        attach=(lambda run_id: announcements.attach_run(schedule.id, run_id))
        if announcements is not None and schedule is not None
        else None,
    )
    if override:
        ctx.store.record_audit(
            override_audit(
                at=now,
                user_id=ctx.user_id,
                subcommand="start",
                arguments=f"{plan.name} {out.run.id}",
                done="started",
                reason=override,
                correlation_id=ctx.correlation_id,
                channel_id=ctx.channel_id,
                source=ctx.source,
                run_id=out.run.id,
            )
        )
    message = Markup(slack_escape(f"Run `{out.run.id}` of `{plan.name}` started."))
    # The plan's schedules still pending now that the run has joined its own (if it had one).
    pending_schedules = ctx.store.schedules(states=["scheduled"], plan_name=plan.name)
    if schedule is None and not pending_schedules and (past := window_past(plan, now)):
        # Its card counts from the plan's own window: say it is over, and how to run it in a new one
        # (a plan scheduled later is said below).
        message += Markup(slack_escape(f" :warning: {past[0].upper()}{past[1:]}."))
    # Started, and nobody would see its card or gates: the reply says where and why.
    why = runs.cards.not_shown(out.run.id) if runs.cards is not None else ""
    unposted = {"channel": runs.cards.channel_for(out.run), "why": why} if runs.cards and why else None
    later = [s for s in pending_schedules if s.window_start > now]
    if schedule is None and later:
        # Started more than EARLY_START before a window of its own: that schedule is not this run's,
        # and its reminder and `starting` still go out unless people withdraw them.
        pending = later[-1]
        message += (
            Markup(slack_escape(f" `{plan.name}` is also scheduled (#{pending.id}, from "))
            + slack_date(pending.window_start, pending.tz)
            + Markup(
                slack_escape(
                    "), more than an hour away: this run is not that schedule's, and its announcements still go "
                    f"out — `/upgrade schedule cancel {pending.id} --reason …` withdraws them."
                )
            )
        )
    return Reply(template="runs/message", context={"message": message, "unposted": unposted})


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("plan", help="the name of a loaded plan")
    parser.add_argument("--override", action="store_true", help="coordinator: start outside the windows")
    parser.add_argument("--reason", metavar="TEXT", help="why the override")


def register(registry: Registry) -> None:
    registry.add("start", run, arguments=_arguments, roles={ANY_ROLE})
