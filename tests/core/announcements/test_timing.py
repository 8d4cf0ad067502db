"""Announcement due instants across daylight-saving changes and time zones; dedup keys; grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.core.announcements import timing as ann
from bot.core.durations import parse_duration
from bot.core.rendering import when

TOKYO = ZoneInfo("Asia/Tokyo")
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def due_by_template(items: list[ann.Announcement]) -> list[tuple[str, datetime]]:
    return [(a.template, a.due) for a in items]


def test_default_offsets_give_scheduled_reminders_and_starting() -> None:
    start = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=utc(2026, 11, 20, 3))
    assert due_by_template(items) == [
        ("scheduled", utc(2026, 11, 20, 3)),
        ("reminder", utc(2026, 11, 30, 5)),
        ("reminder", utc(2026, 12, 1, 4)),
        ("starting", utc(2026, 12, 1, 5)),
    ]
    assert all(a.due.tzinfo is UTC for a in items)


def test_t_minus_24h_is_24_real_hours_across_the_new_york_spring_change() -> None:
    # Clocks spring forward on Sunday 2026-03-08 at 02:00: Saturday is EST (-5), Sunday 10:00 EDT (-4).
    start = datetime(2026, 3, 8, 10, tzinfo=NEW_YORK)
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=utc(2026, 3, 1))
    reminder = items[1]
    assert reminder.due == utc(2026, 3, 7, 14)
    assert start.astimezone(UTC) - reminder.due == timedelta(hours=24)
    # …which a New York reader sees at 09:00 on Saturday, not 10:00: real hours, not wall clock.
    assert reminder.due.astimezone(NEW_YORK).hour == 9


def test_t_minus_24h_is_24_real_hours_across_the_berlin_autumn_change() -> None:
    # Berlin falls back on Sunday 2026-10-25 at 03:00 CEST → 02:00 CET.
    start = datetime(2026, 10, 25, 10, tzinfo=BERLIN)
    items = ann.schedule(subject="plan:p", window_start=start, scheduled_at=utc(2026, 10, 1))
    reminder, last_call, starting = items[1:]
    assert starting.due == utc(2026, 10, 25, 9)
    assert reminder.due == utc(2026, 10, 24, 9)
    assert reminder.due.astimezone(BERLIN).hour == 11
    assert last_call.due == utc(2026, 10, 25, 8)
    assert last_call.due.astimezone(BERLIN).hour == 9


def test_one_hour_before_a_start_just_after_the_spring_gap_is_one_real_hour() -> None:
    # 03:30 EDT exists; the wall clock an hour earlier (02:30) does not: T-1h is 01:30 EST.
    start = datetime(2026, 3, 8, 3, 30, tzinfo=NEW_YORK)
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=utc(2026, 3, 1))
    last_call = next(a for a in items if a.offset == timedelta(hours=-1))
    assert start.astimezone(UTC) - last_call.due == timedelta(hours=1)
    assert last_call.due.astimezone(NEW_YORK).strftime("%H:%M %Z") == "01:30 EST"


def test_a_tokyo_plan_read_in_berlin_when_berlin_changes_clocks() -> None:
    # Tokyo has no daylight saving; Berlin falls back on 2026-10-25 between the reminder and the start.
    start = datetime(2026, 10, 25, 14, tzinfo=TOKYO)
    items = ann.schedule(subject="run:7", window_start=start, scheduled_at=utc(2026, 10, 20))
    reminder, starting = items[1], items[-1]
    assert reminder.due.astimezone(TOKYO) == datetime(2026, 10, 24, 14, tzinfo=TOKYO)
    assert starting.due - reminder.due == timedelta(hours=24)
    # A Berlin reader sees 07:00 for the reminder (CEST) and 06:00 for the start (CET).
    assert reminder.due.astimezone(BERLIN).hour == 7
    assert starting.due.astimezone(BERLIN).hour == 6
    # The Slack token carries the instant (each reader's client shows their zone); the fallback shows
    # the plan's zone and UTC, never the reader's.
    token = str(when(start, "Asia/Tokyo"))
    assert token == (
        f"<!date^{int(start.timestamp())}^{{date_short_pretty}} {{time}}"
        "|2026-10-25 14:00 Asia/Tokyo (05:00 UTC)>"
    )
    assert datetime.fromtimestamp(int(start.timestamp()), BERLIN).strftime("%H:%M") == "06:00"


def test_the_text_fallback_shows_the_utc_date_when_it_differs() -> None:
    start = datetime(2026, 12, 1, 8, tzinfo=TOKYO)  # 23:00 UTC the day before
    assert "|2026-12-01 08:00 Asia/Tokyo (2026-11-30 23:00 UTC)>" in str(when(start, "Asia/Tokyo"))


def test_reminders_already_due_at_scheduling_are_dropped_but_starting_is_kept() -> None:
    start = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
    scheduled_at = start - timedelta(hours=2)
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=scheduled_at)
    assert [a.template for a in items] == ["scheduled", "reminder", "starting"]
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=start - timedelta(minutes=70))
    # T-1h would come 10 minutes after the scheduled announcement: dropped as a repeat.
    assert [a.template for a in items] == ["scheduled", "starting"]


def test_custom_offsets_parse_and_starting_is_always_there() -> None:
    start = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
    offsets = [ann.parse_offset(o) for o in ("-2d", "-1h30m")]
    items = ann.schedule(subject="run:1", window_start=start, scheduled_at=utc(2026, 11, 1), offsets=offsets)
    assert [(a.template, a.offset) for a in items] == [
        ("scheduled", None),
        ("reminder", timedelta(days=-2)),
        ("reminder", timedelta(hours=-1, minutes=-30)),
        ("starting", timedelta(0)),
    ]


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("-24h", timedelta(hours=-24)),
        ("-1d", timedelta(hours=-24)),
        ("-90m", timedelta(minutes=-90)),
        ("T-1h", timedelta(hours=-1)),
        ("0", timedelta(0)),
        ("start", timedelta(0)),
    ],
)
def test_offset_spellings(text: str, offset: timedelta) -> None:
    assert ann.parse_offset(text) == offset


@pytest.mark.parametrize("text", ["24h", "+1h", "-", "-1y", "-9w", "soon"])
def test_offsets_after_the_start_or_unreadable_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="offset"):
        ann.parse_offset(text)


def test_offsets_format_back() -> None:
    assert [ann.format_offset(ann.parse_offset(t)) for t in ("-24h", "-1h30m", "-45m", "0")] == [
        "-24h",
        "-1h30m",
        "-45m",
        "0",
    ]


def test_scheduling_a_window_in_the_past_is_refused() -> None:
    with pytest.raises(ValueError, match="must start after"):
        ann.schedule(subject="run:1", window_start=utc(2026, 1, 1), scheduled_at=utc(2026, 1, 2))


def test_dedup_keys_are_the_same_for_the_same_instant_in_any_zone() -> None:
    start = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
    first = ann.schedule(subject="run:1", window_start=start, scheduled_at=utc(2026, 11, 20))
    again = ann.schedule(
        subject="run:1", window_start=start.astimezone(BERLIN), scheduled_at=utc(2026, 11, 20)
    )
    assert [a.key for a in first] == [a.key for a in again]
    assert first[1].key == "run:1/reminder/2026-11-30T05:00:00Z"
    assert len({a.key for a in first}) == len(first)


def test_run_end_announcements_have_their_own_keys() -> None:
    start = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
    done = ann.run_ended(
        subject="run:1", template="completed", at=utc(2026, 12, 1, 7, 30), window_start=start
    )
    assert done.key == "run:1/completed/2026-12-01T07:30:00Z"
    with pytest.raises(ValueError, match="a run ends with"):
        ann.run_ended(subject="run:1", template="reminder", at=utc(2026, 12, 1), window_start=start)


START = datetime(2026, 12, 1, 14, tzinfo=TOKYO)
REMINDER = ann.Announcement(
    subject="run:1",
    template="reminder",
    due=utc(2026, 12, 1, 4),
    window_start=START,
    offset=timedelta(hours=-1),
)
STARTING = ann.Announcement(
    subject="run:1", template="starting", due=utc(2026, 12, 1, 5), window_start=START, offset=timedelta(0)
)


def test_not_yet_due_waits() -> None:
    decision = ann.decide(REMINDER, now=utc(2026, 12, 1, 3, 30))
    assert decision.action == "wait"
    assert not decision.posts


def test_due_now_or_a_little_late_sends_on_time() -> None:
    assert ann.decide(REMINDER, now=REMINDER.due).action == "send"
    assert ann.decide(REMINDER, now=REMINDER.due + timedelta(seconds=90)).action == "send"


def test_due_while_down_within_grace_sends_marked_delayed() -> None:
    decision = ann.decide(STARTING, now=STARTING.due + timedelta(minutes=20), grace=timedelta(minutes=30))
    assert decision.action == "send_late"
    assert decision.late_by == timedelta(minutes=20)
    assert decision.posts


def test_due_while_down_past_grace_is_skipped_with_a_reason() -> None:
    decision = ann.decide(STARTING, now=STARTING.due + timedelta(minutes=31), grace=timedelta(minutes=30))
    assert decision.action == "skip"
    assert not decision.posts
    # No instant in UTC: `schedule list` shows the due time beside it as a Slack date.
    assert decision.reason == "starting not sent: 31m late, past the grace of 30m"


def test_a_late_reminder_after_the_window_opened_is_skipped_even_within_grace() -> None:
    decision = ann.decide(
        REMINDER, now=START.astimezone(UTC) + timedelta(minutes=1), grace=timedelta(hours=2)
    )
    assert decision.action == "skip"
    assert decision.reason == "reminder not sent: 1h1m late, after the window had opened"


def test_an_announcement_already_posted_is_never_posted_again() -> None:
    decision = ann.decide(REMINDER, now=REMINDER.due, already_sent=True)
    assert decision.action == "already_sent"
    assert not decision.posts


def test_durations_for_grace() -> None:
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("0m") == timedelta(0)
    assert parse_duration("90s") == timedelta(seconds=90)  # the one grammar: seconds too
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("-5m")


def test_a_moved_schedule_announces_delayed_now_instead_of_a_second_scheduled() -> None:
    start = datetime(2026, 12, 3, 15, tzinfo=TOKYO)
    moved_at = utc(2026, 12, 2, 5, 30)  # 30 minutes before the new T-24h
    items = ann.moved(subject="schedule:2", window_start=start, moved_at=moved_at)
    assert due_by_template(items) == [
        ("delayed", moved_at),
        ("reminder", utc(2026, 12, 2, 6)),
        ("reminder", utc(2026, 12, 3, 5)),
        ("starting", utc(2026, 12, 3, 6)),
    ]
    assert items[0].key == "schedule:2/delayed/2026-12-02T05:30:00Z"
    # Moved to within 10 minutes of the new T-24h: that reminder would repeat the delayed post.
    close = ann.moved(subject="schedule:2", window_start=start, moved_at=utc(2026, 12, 2, 5, 50))
    assert [a.template for a in close] == ["delayed", "reminder", "starting"]
    with pytest.raises(ValueError, match="must start after"):
        ann.moved(subject="schedule:2", window_start=start, moved_at=utc(2026, 12, 3, 7))


def test_a_step_complete_key_names_the_run_and_the_step_not_the_instant() -> None:
    assert ann.step_complete_key("R1A2B3", "control-plane") == "run:R1A2B3/step:control-plane/complete"
