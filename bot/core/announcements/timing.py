"""When each announcement of an upgrade is due, its dedup key, and what to do if it is late.

Pure functions over aware datetimes; the scheduler adapter and the store act on the results.

**Offsets are elapsed time.** `-24h` means 24 real hours before the window opens, not "the same
wall-clock time the day before": due instants are computed on UTC instants, so across a
daylight-saving change a T-24h reminder lands at a different wall-clock hour than the window
(a plan at Sunday 10:00 in America/New_York on the day clocks spring forward gets its T-24h
reminder on Saturday at 09:00 local). Every reader sees it in their own zone through the Slack date
token anyway, and "24 hours' notice" stays 24 hours. `-1d` is the same as `-24h`. Asia/Tokyo has no
daylight saving, so a Tokyo plan's offsets are also wall-clock offsets there, while a reader in
Berlin sees them move by an hour when Berlin changes clocks.

**The announcements of a schedule** are: `scheduled` at the moment of scheduling, then one
`reminder` per negative offset, then `starting` at offset zero (the defaults: `-24h`, `-1h`, `0`).
A reminder that would be due before the scheduled announcement plus `MIN_GAP` is dropped: it would
repeat the announcement people have just read. `completed` and `aborted` are due when the run ends,
`step-complete` when a step whose plan asks for it succeeds. A schedule moved to another window
(`schedule move`) gets `delayed` at the move instead of a second `scheduled`, then the new window's
reminders and `starting`. A window that ends with no run gets `missed`, due when the bot finds it
ended (the schedule is closed as missed then), so it is posted however late that is.

**Dedup keys** name the subject (`plan:ID` or `run:ID`), the template and the due instant in UTC,
so a restarted bot, a retried job or a second replica computes the same key for the same message and
the store's unique key refuses the second post.

**Late announcements.** If the bot was down when one was due: sent on time within `ON_TIME`; sent
marked as delayed within the grace period; skipped (and audited) past it. A reminder whose window has
already opened is skipped even within the grace: "starts in 1 hour" after the start misleads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from bot.core.durations import format_duration, parse_duration

#: Default offsets relative to the window's start (the scheduled announcement is always sent).
DEFAULT_OFFSETS = ("-24h", "-1h", "0")
#: Default grace for an announcement that fell due while the bot was down.
DEFAULT_GRACE = timedelta(minutes=30)
#: A job that runs this late is still on time (scheduler jitter, a slow start-up).
ON_TIME = timedelta(minutes=2)
#: Reminders due sooner than this after the scheduled announcement are dropped.
MIN_GAP = timedelta(minutes=15)

SCHEDULED, REMINDER, STARTING = "scheduled", "reminder", "starting"
COMPLETED, ABORTED, DELAYED, STEP_COMPLETE = "completed", "aborted", "delayed", "step-complete"
MISSED = "missed"
#: Every announcement template, in the order a run meets them.
TEMPLATES = (SCHEDULED, REMINDER, STARTING, STEP_COMPLETE, COMPLETED, ABORTED, DELAYED, MISSED)
#: The announcements of a window still to come: withdrawn when its run ends before them.
BEFORE_THE_RUN = (REMINDER, STARTING)


def parse_offset(text: str) -> timedelta:
    """`-24h`, `-1h30m`, `-2d`, `-90m` or `0` → an offset before the start (never after it)."""
    raw = str(text).strip().lower().replace(" ", "")
    if raw in {"0", "-0", "+0", "start", "t", "t-0"}:
        return timedelta(0)
    raw = raw.removeprefix("t")
    if not raw.startswith("-"):
        raise ValueError(
            f"{text!r}: offsets count back from the window's start, like -24h, -1h or -30m "
            "(completed/aborted are sent when the run ends)"
        )
    try:
        offset = parse_duration(raw[1:])
    except ValueError:
        raise ValueError(f"{text!r} is not an offset like -24h, -1h30m, -2d or -30m") from None
    if offset > timedelta(days=60):
        raise ValueError(f"{text!r}: offsets reach back at most 60 days")
    return -offset


def format_offset(offset: timedelta) -> str:
    """The inverse of `parse_offset` for display: `-24h`, `-1h30m`, `0`."""
    if not offset:
        return "0"
    # Hours, not days: "-24h" is how runbooks write the day-before reminder.
    minutes = int(-offset.total_seconds() // 60)
    hours, minutes = divmod(minutes, 60)
    return "-" + (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")


def _utc(moment: datetime, what: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")
    return moment.astimezone(UTC)


def dedup_key(subject: str, template: str, due: datetime) -> str:
    """`run:42/reminder/2026-11-30T05:00:00Z`: the same message always gets the same key."""
    return f"{subject}/{template}/{_utc(due, 'due').strftime('%Y-%m-%dT%H:%M:%SZ')}"


@dataclass(frozen=True, kw_only=True)
class Announcement:
    """One message to post: which template, when (UTC), and the key that makes it post once."""

    subject: str
    template: str
    due: datetime
    #: The window's start, so a late reminder can tell that the window has already opened.
    window_start: datetime
    #: Offset from the start for reminders and `starting`; None for the scheduled announcement.
    offset: timedelta | None = None

    @property
    def key(self) -> str:
        return dedup_key(self.subject, self.template, self.due)


def schedule(
    *,
    subject: str,
    window_start: datetime,
    scheduled_at: datetime,
    offsets: Sequence[timedelta] | None = None,
) -> list[Announcement]:
    """The announcements for a window opening at `window_start`, scheduled at `scheduled_at`.

    `window_start` is an aware datetime in the plan's zone; due instants come back in UTC.
    """
    start = _utc(window_start, "window_start")
    now = _utc(scheduled_at, "scheduled_at")
    if start <= now:
        raise ValueError("the window must start after the moment it is scheduled")
    chosen = [parse_offset(o) for o in DEFAULT_OFFSETS] if offsets is None else list(offsets)
    if any(o > timedelta(0) for o in chosen):
        raise ValueError("offsets count back from the window's start; none may be after it")
    out = [Announcement(subject=subject, template=SCHEDULED, due=now, window_start=start)]
    for offset in sorted(set(chosen)):
        due = start + offset
        if offset == timedelta(0):
            out.append(
                Announcement(subject=subject, template=STARTING, due=due, window_start=start, offset=offset)
            )
        elif due >= now + MIN_GAP:
            out.append(
                Announcement(subject=subject, template=REMINDER, due=due, window_start=start, offset=offset)
            )
    if not any(a.template == STARTING for a in out):
        # The start is announced whatever the offsets say: it is the one people act on.
        out.append(
            Announcement(
                subject=subject, template=STARTING, due=start, window_start=start, offset=timedelta(0)
            )
        )
    return out


def dropped(
    *, window_start: datetime, scheduled_at: datetime, offsets: Sequence[timedelta] | None = None
) -> tuple[timedelta, ...]:
    """The reminders' offsets that `schedule` leaves out for a window opening at `window_start`,
    scheduled at `scheduled_at`: those due before, or within MIN_GAP of, the scheduled announcement
    (the reply says so, rather than leave people waiting for a reminder that will not come)."""
    start = _utc(window_start, "window_start")
    now = _utc(scheduled_at, "scheduled_at")
    chosen = [parse_offset(o) for o in DEFAULT_OFFSETS] if offsets is None else list(offsets)
    return tuple(o for o in sorted(set(chosen)) if o < timedelta(0) and start + o < now + MIN_GAP)


def run_ended(*, subject: str, template: str, at: datetime, window_start: datetime) -> Announcement:
    """`completed` or `aborted`, due when the run ends."""
    if template not in (COMPLETED, ABORTED):
        raise ValueError(f"a run ends with {COMPLETED} or {ABORTED}, not {template!r}")
    return Announcement(
        subject=subject,
        template=template,
        due=_utc(at, "at"),
        window_start=_utc(window_start, "window_start"),
    )


def moved(
    *,
    subject: str,
    window_start: datetime,
    moved_at: datetime,
    offsets: Sequence[timedelta] | None = None,
) -> list[Announcement]:
    """A schedule moved to a window opening at `window_start`: `delayed` now (it names the old
    window and why), then the new window's reminders and `starting` — no second `scheduled`."""
    planned = schedule(subject=subject, window_start=window_start, scheduled_at=moved_at, offsets=offsets)
    now = _utc(moved_at, "moved_at")
    delayed = Announcement(subject=subject, template=DELAYED, due=now, window_start=planned[0].window_start)
    return [delayed, *(a for a in planned if a.template != SCHEDULED)]


def missed_key(schedule_id: int) -> str:
    """`schedule:4/missed`: a window ends once, so one announcement per schedule, whenever the
    bot finds it ended (a restart, a second replica computes the same key)."""
    return f"schedule:{schedule_id}/missed"


def step_complete_key(run_id: str, step_id: str) -> str:
    """`run:R1A2B3/step:control-plane/complete`: one announcement per step and run, whenever
    it is computed (a retried hook or a restart computes the same key)."""
    return f"run:{run_id}/step:{step_id}/complete"


Action = Literal["wait", "send", "send_late", "skip", "already_sent"]


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What to do with an announcement now. `late_by` is set when it is sent marked as delayed."""

    action: Action
    reason: str = ""
    late_by: timedelta | None = None

    @property
    def posts(self) -> bool:
        return self.action in ("send", "send_late")


def decide(
    announcement: Announcement,
    *,
    now: datetime,
    grace: timedelta = DEFAULT_GRACE,
    already_sent: bool = False,
) -> Decision:
    """Send, send marked as delayed, skip, or wait — given the time now and what was sent."""
    current = _utc(now, "now")
    if already_sent:
        return Decision(action="already_sent", reason=f"already posted ({announcement.key})")
    due = announcement.due
    if current < due:
        return Decision(action="wait", reason=f"due in {_human(due - current)}")
    late = current - due
    if late <= ON_TIME:
        return Decision(action="send")
    if announcement.template == REMINDER and current >= announcement.window_start:
        return Decision(
            action="skip",
            reason=f"reminder not sent: {_human(late)} late, after the window had opened",
        )
    if late <= grace:
        return Decision(
            action="send_late", late_by=late, reason=f"{_human(late)} late (grace {_human(grace)})"
        )
    return Decision(
        action="skip",
        reason=f"{announcement.template} not sent: {_human(late)} late, past the grace of {_human(grace)}",
    )


def _human(span: timedelta) -> str:
    # Lateness is told to the minute; under a minute, to the second.
    if span < timedelta(minutes=1):
        return format_duration(span)
    return format_duration(timedelta(minutes=int(span.total_seconds() // 60)))
