"""`/upgrade schedule`: schedule a plan's window and its announcements; list or cancel schedules.

The proposed window is the plan's duration starting at `--at`, read in `--tz` (default: the
plan's own zone). It must lie inside the configured maintenance windows and outside every freeze;
otherwise it is refused with the next allowed slots, unless the coordinator overrides it with a
reason (audited). The `scheduled` announcement is posted at once; reminders, `starting` and the
run's end follow from the scheduler. `schedule move` postpones a pending schedule to a later
window under the same checks and posts `delayed` (old window, new window, why).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.core.announcements import timing as A
from bot.core.announcements.overrides import authorize_override, merged_roster, overridden, window_refusal
from bot.core.announcements.service import AnnouncementService
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.durations import format_duration
from bot.core.people import ANY_ROLE, require_any_role
from bot.core.runs.library import find_plan, stored_plan
from bot.core.runs.plans import Plan
from bot.core.windows import unknown_zone, wall_clock_problem
from bot.errors import UsageError, UserError, clip
from bot.records import ScheduleRow

#: Who may schedule or cancel (the same people who may post announcements).
SCHEDULERS = frozenset({"coordinator", "primary"})
#: How far ahead a window may be scheduled (runbooks plan weeks ahead; 9999-12-31 is a typo).
HORIZON = timedelta(days=2 * 365)
_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
_USAGE = (
    'usage: /upgrade schedule PLAN --at "YYYY-MM-DD HH:MM" [--tz ZONE] [--override --reason "…"]'
    ' | list | cancel ID [--reason "…"] | move ID --at "YYYY-MM-DD HH:MM" [--tz ZONE] [--override] --reason "…"'
)


def run(ctx: CommandContext, args: Args) -> Reply:
    """Schedule a plan's window and its announcements; `list`, `cancel` and `move` manage them.

    `/upgrade schedule PLAN --at "2026-12-01 14:00" [--tz Asia/Tokyo]` schedules the plan's
    window to open then (in the plan's zone unless `--tz`): the `scheduled` announcement now,
    reminders before, `starting` at the start, `completed`/`aborted` when the run ends.
    Outside the maintenance windows or in a freeze it is refused with the next allowed slots;
    the coordinator may add `--override --reason "…"` (audited).
    `/upgrade help schedule VERB` shows `list`, `cancel` or `move` in full.

    Example: `/upgrade schedule eks-nodegroups --at "2026-12-01 14:00"`
    """
    service = _service(ctx)
    if len(args.words) != 1:
        raise UsageError("name one plan (or a verb: list, cancel, move)", usage=_USAGE)
    return _schedule(ctx, service, args.words[0], args)


def list_(ctx: CommandContext, args: Args) -> Reply:
    """Show the ten newest schedules, each with every announcement (skipped ones too).

    Example: `/upgrade schedule list`
    """
    return _list(_service(ctx))


def cancel(ctx: CommandContext, args: Args) -> Reply:
    """Cancel a schedule: its pending announcements are withdrawn and a cancellation notice posted.

    `/upgrade schedule cancel ID [--reason "…"]`; the notice goes to the announcement channel.

    Example: `/upgrade schedule cancel 4 --reason "postponed to next week"`
    """
    return _cancel(ctx, _service(ctx), args.id, _words(args.reason))


def move(ctx: CommandContext, args: Args) -> Reply:
    """Postpone a pending schedule to a later window, with a `delayed` announcement saying why.

    `/upgrade schedule move ID --at "…" [--tz …] [--override] --reason "…"`: the same window
    checks and override as scheduling; the pending announcements are withdrawn, a `delayed`
    announcement with the old window and the reason is posted now, and the new window's reminders
    and `starting` are scheduled (under a new schedule id).

    Example: `/upgrade schedule move 4 --at "2026-12-02 14:00" --reason "the vendor asked for a day"`
    """
    return _move(ctx, _service(ctx), args.id, args)


def _service(ctx: CommandContext) -> AnnouncementService:
    if ctx.announcements is None:
        raise UserError("this front door cannot schedule announcements")
    return ctx.announcements


def _schedule(ctx: CommandContext, service: AnnouncementService, name: str, args: Args) -> Reply:
    if not args.at:
        raise UsageError('when? add `--at "YYYY-MM-DD HH:MM"`', usage=_USAGE)
    _row, plan = find_plan(ctx.store, name)
    roster = merged_roster(ctx.settings.roster, plan.roster)
    require_any_role(ctx.user_id, SCHEDULERS, roster, ctx.directory, action="scheduling an upgrade")
    tz = args.tz or plan.window.timezone
    start, override = _checked_window(ctx, plan, roster, args, args.at, tz)
    schedule, announcements = service.schedule(
        plan.name,
        start=start,
        tz=tz,
        by=ctx.user_id,
        override_reason=override,
        correlation_id=ctx.correlation_id,
    )
    return Reply(
        template="schedule/scheduled",
        context={
            "schedule": schedule,
            "announcements": announcements,
            **_dropped(service, start, ctx.clock()),
        },
    )


def _dropped(service: AnnouncementService, start: datetime, now: datetime) -> dict[str, object]:
    """The reminders this window will not get (too close to now), for the reply to say so."""
    left_out = A.dropped(window_start=start, scheduled_at=now, offsets=service.offsets)
    return {"dropped": [A.format_offset(o) for o in left_out], "min_gap": format_duration(A.MIN_GAP)}


def _checked_window(
    ctx: CommandContext, plan: Plan, roster: dict[str, tuple[str, ...]], args: Args, at: str, tz: str
) -> tuple[datetime, str]:
    """`at` read in `tz`, inside the windows or overridden: (start, the override's reason or "")."""
    start = _parse_at(at, tz)
    if start <= ctx.clock():
        here = ctx.clock().astimezone(start.tzinfo).strftime("%Y-%m-%d %H:%M")
        raise UsageError(f"{at} {tz} is in the past (it is {here} there now)", usage=_USAGE)
    if start > ctx.clock() + HORIZON:
        raise UsageError(
            f"{at} {tz} is more than {HORIZON.days // 365} years ahead; schedule nearer windows", usage=_USAGE
        )
    # Elapsed time, as the plan's window lasts: across a daylight saving change the wall clock moves.
    end = start.astimezone(UTC) + plan.window.length
    refusal = window_refusal(ctx.settings.windows, start, end, tz)
    if refusal is None:
        return start, ""
    if not args.override:
        raise UserError(refusal)
    return start, authorize_override(
        user_id=ctx.user_id,
        roster=roster,
        directory=ctx.directory,
        reason=_words(args.reason),
        refusal=refusal,
        past=overridden(ctx.settings.windows, start, end),
    )


def _move(ctx: CommandContext, service: AnnouncementService, word: str, args: Args) -> Reply:
    old = _schedule_arg(ctx, word)
    plan = stored_plan(ctx.store, old.plan_id)
    roster = merged_roster(ctx.settings.roster, plan.roster)
    require_any_role(ctx.user_id, SCHEDULERS, roster, ctx.directory, action="moving a schedule")
    if not args.at:
        raise UsageError('to when? add `--at "YYYY-MM-DD HH:MM"`', usage=_USAGE)
    reason = _words(args.reason)
    if not reason:
        raise UsageError('say why it moves: `--reason "…"` (the delayed announcement shows it)', usage=_USAGE)
    # `--tz` defaults to the zone the schedule was made in: "move it to 15:00" means that zone's 15:00.
    tz = args.tz or old.tz
    start, override = _checked_window(ctx, plan, roster, args, args.at, tz)
    before, after, withdrawn = service.move(
        old.id,
        start=start,
        tz=tz,
        by=ctx.user_id,
        reason=reason,
        override_reason=override,
        correlation_id=ctx.correlation_id,
    )
    return Reply(
        template="schedule/moved",
        context={
            "old": before,
            "schedule": after,
            "withdrawn": withdrawn,
            "announcements": service.store.scheduled_announcements(schedule_id=after.id),
            **_dropped(service, start, ctx.clock()),
        },
    )


def _schedule_arg(ctx: CommandContext, word: str) -> ScheduleRow:
    text = word.lstrip("#")
    if not (text.isascii() and text.isdigit() and len(text) <= 40):
        raise UsageError(f"{clip(word)!r} is not a schedule id (`/upgrade schedule list` shows them)")
    schedule = ctx.store.schedule(int(text))
    if schedule is None:
        raise UserError(f"there is no schedule #{clip(text)} (`/upgrade schedule list`)")
    return schedule


def _list(service: AnnouncementService) -> Reply:
    # A window that ended with no run is missed, not pending (the timers close it at its end; a
    # front door without them, the terminal, finds it here).
    service.close_missed()
    # Every pending schedule, then the latest others: ten cancelled ones hid a pending one before.
    pending = service.store.schedules(states=["scheduled"], limit=50)
    recent = [s for s in service.store.schedules(limit=10) if s.state != "scheduled"]
    shown = sorted([*pending, *recent], key=lambda s: -s.id)
    items = [
        {"schedule": s, "announcements": service.store.scheduled_announcements(schedule_id=s.id)}
        for s in shown
    ]
    return Reply(template="schedule/list", context={"schedules": items})


def _cancel(ctx: CommandContext, service: AnnouncementService, word: str, reason: str) -> Reply:
    schedule = _schedule_arg(ctx, word)
    plan = stored_plan(ctx.store, schedule.plan_id)
    roster = merged_roster(ctx.settings.roster, plan.roster)
    require_any_role(ctx.user_id, SCHEDULERS, roster, ctx.directory, action="cancelling a schedule")
    cancelled, count = service.cancel(
        schedule.id, by=ctx.user_id, reason=reason, correlation_id=ctx.correlation_id
    )
    # The notice goes where the announcements went, so the people who read them see it.
    return Reply(
        template="schedule/cancelled",
        context={"schedule": cancelled, "reason": reason, "user": ctx.user_id, "cancelled": count},
        ephemeral=False,
        channel=cancelled.channel,
    )


def _parse_at(text: str, tz: str) -> datetime:
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(unknown_zone(tz)) from None
    for fmt in _FORMATS:
        try:
            naive = datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
        return _local(naive, zone)
    raise UsageError(f"{clip(text)!r} {_not_a_time(text.strip())}", usage=_USAGE)


_SHAPED = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{1,2})(?::\d{1,2})?$")


def _not_a_time(text: str) -> str:
    """Why a `--at` is not a time: which part is out of range when it has the shape of one."""
    shaped = _SHAPED.match(text)
    if shaped is None:
        return 'is not a time like "2026-12-01 14:00"'
    year, month, day, hour, minute = (int(g) for g in shaped.groups())
    if not 1 <= month <= 12:
        return f"has no month {month}: months are 01–12"
    days = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days:
        return f"is not a date: {calendar.month_name[month]} {year} has {days} days"
    if hour > 23:
        return f"has hour {hour}: hours are 00–23 (midnight is 00:00 of the next day)"
    if minute > 59:
        return f"has minute {minute}: minutes are 00–59"
    return 'is not a time like "2026-12-01 14:00"'


def _local(naive: datetime, zone: ZoneInfo) -> datetime:
    """`naive` in `zone`, refused when the clocks skip it or pass it twice that night (a daylight
    saving change): the window would open an hour off, without a word."""
    problem = wall_clock_problem(naive, zone)
    if problem is not None:
        utc = ", or give it in UTC with `--tz UTC`" if problem.repeated else ""
        raise UserError(f"{problem.text}; pick a time before or after the change{utc}")
    return naive.replace(tzinfo=zone)


def _words(reason: list[str] | str | None) -> str:
    """`--reason` as typed: several words without quotes are one reason."""
    if isinstance(reason, list):
        return " ".join(reason).strip()
    return (reason or "").strip()


def _arguments(parser: CommandParser) -> None:
    parser.usage = (
        '%(prog)s PLAN --at "YYYY-MM-DD HH:MM" [--tz ZONE] [--override --reason …] | list | cancel | move'
    )
    parser.add_argument("words", nargs="+", metavar="PLAN", help="a loaded plan's name")
    _window_arguments(parser)
    parser.add_argument("--override", action="store_true", help="coordinator: schedule outside the windows")
    parser.add_argument("--reason", nargs="+", metavar="TEXT", help="why (an override)")


def _window_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--at", metavar='"YYYY-MM-DD HH:MM"', help='when the window opens: "YYYY-MM-DD HH:MM"'
    )
    parser.add_argument(
        "--tz", metavar="ZONE", help="the zone of --at (default: the plan's, or the schedule's)"
    )


def _cancel_arguments(parser: CommandParser) -> None:
    parser.add_argument("id", metavar="ID", help="the schedule (`/upgrade schedule list` shows ids)")
    parser.add_argument(
        "--reason", nargs="+", metavar="TEXT", help="why it is cancelled (shown in the notice)"
    )


def _move_arguments(parser: CommandParser) -> None:
    parser.add_argument("id", metavar="ID", help="the schedule (`/upgrade schedule list` shows ids)")
    _window_arguments(parser)
    parser.add_argument("--override", action="store_true", help="coordinator: move outside the windows")
    parser.add_argument(
        "--reason", nargs="+", metavar="TEXT", help="why it moves (the delayed announcement shows it)"
    )


def register(registry: Registry) -> None:
    registry.add("schedule", run, arguments=_arguments, roles={ANY_ROLE})
    registry.add_verb("schedule", "list", list_)
    registry.add_verb("schedule", "cancel", cancel, arguments=_cancel_arguments)
    registry.add_verb("schedule", "move", move, arguments=_move_arguments)
