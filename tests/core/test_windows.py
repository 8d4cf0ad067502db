"""Maintenance windows and freezes: refusals name their reasons, suggestions land inside windows."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.core.windows import (
    Freeze,
    Policy,
    Window,
    describe_weekdays,
    parse_time,
    parse_weekdays,
)

TOKYO = ZoneInfo("Asia/Tokyo")
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")

OFFICE = Window(weekdays=frozenset(range(5)), start=time(14), end=time(17), zone="Asia/Tokyo")
YEAR_END = Freeze.from_dates(
    datetime(2026, 12, 25).date(), datetime(2027, 1, 4).date(), reason="year-end freeze", zone="Asia/Tokyo"
)
POLICY = Policy(windows=(OFFICE,), freezes=(YEAR_END,))


def jst(*args: int) -> datetime:
    return datetime(*args, tzinfo=TOKYO)  # type: ignore[misc]


def test_a_span_inside_an_office_window_is_allowed() -> None:
    # 2026-12-01 is a Tuesday.
    assert POLICY.check(jst(2026, 12, 1, 14), jst(2026, 12, 1, 17)).ok


def test_the_same_instant_written_in_another_zone_is_judged_the_same() -> None:
    start = jst(2026, 12, 1, 14).astimezone(BERLIN)
    assert start.hour == 6
    assert POLICY.check(start, start + timedelta(hours=2)).ok


def test_a_span_that_runs_past_the_window_is_refused_with_the_window_named() -> None:
    verdict = POLICY.check(jst(2026, 12, 1, 16), jst(2026, 12, 1, 18))
    assert not verdict.ok
    assert verdict.reasons == ("outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo)",)


def test_a_weekend_start_is_refused() -> None:
    # 2026-12-05 is a Saturday.
    assert not POLICY.check(jst(2026, 12, 5, 14), jst(2026, 12, 5, 15)).ok


def test_a_freeze_refuses_even_inside_a_window_and_gives_its_reason() -> None:
    verdict = POLICY.check(jst(2026, 12, 28, 14), jst(2026, 12, 28, 15))
    assert not verdict.ok
    assert verdict.reasons == ("inside the freeze: year-end freeze (2026-12-25 to 2027-01-04 Asia/Tokyo)",)


def test_the_last_day_of_a_freeze_is_frozen_and_the_day_after_is_not() -> None:
    assert not POLICY.check(jst(2027, 1, 4, 14), jst(2027, 1, 4, 15)).ok
    assert POLICY.check(jst(2027, 1, 5, 14), jst(2027, 1, 5, 15)).ok


def test_outside_a_window_and_in_a_freeze_gives_both_reasons() -> None:
    verdict = POLICY.check(jst(2026, 12, 26, 3), jst(2026, 12, 26, 4))
    assert len(verdict.reasons) == 2


def test_an_end_before_the_start_is_refused() -> None:
    verdict = POLICY.check(jst(2026, 12, 1, 15), jst(2026, 12, 1, 14))
    assert verdict.reasons == ("the upgrade must end after it starts",)


def test_naive_datetimes_are_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        POLICY.check(datetime(2026, 12, 1, 14), datetime(2026, 12, 1, 15))


def test_touching_windows_merge_so_a_span_may_cross_the_seam() -> None:
    evening = Window(weekdays=frozenset(range(5)), start=time(17), end=time(19), zone="Asia/Tokyo")
    assert Policy(windows=(OFFICE, evening)).check(jst(2026, 12, 1, 16), jst(2026, 12, 1, 18)).ok
    assert not POLICY.check(jst(2026, 12, 1, 16), jst(2026, 12, 1, 18)).ok


def test_a_window_across_midnight_belongs_to_the_day_it_opens() -> None:
    night = Policy(windows=(Window(weekdays=frozenset({4}), start=time(22), end=time(2), zone="UTC"),))
    friday_night = datetime(2026, 12, 4, 23, tzinfo=UTC)
    assert night.check(friday_night, friday_night + timedelta(hours=3)).ok
    thursday_night = datetime(2026, 12, 3, 23, tzinfo=UTC)
    assert not night.check(thursday_night, thursday_night + timedelta(hours=1)).ok


def test_windows_keep_their_wall_clock_hours_across_a_daylight_saving_change() -> None:
    # New York springs forward on 2026-03-08: 09:00 local is 14:00 UTC before and 13:00 UTC after.
    ny = Policy(
        windows=(Window(weekdays=frozenset(range(7)), start=time(9), end=time(12), zone="America/New_York"),)
    )
    before = datetime(2026, 3, 7, 9, tzinfo=NEW_YORK)
    after = datetime(2026, 3, 9, 9, tzinfo=NEW_YORK)
    assert before.astimezone(UTC).hour == 14
    assert after.astimezone(UTC).hour == 13
    assert ny.check(before, before + timedelta(hours=3)).ok
    assert ny.check(after, after + timedelta(hours=3)).ok
    # An hour early in UTC terms on the day after the switch is outside.
    assert not ny.check(after - timedelta(hours=1), after + timedelta(hours=1)).ok


def test_without_windows_any_time_outside_freezes_is_allowed() -> None:
    open_policy = Policy(freezes=(YEAR_END,))
    assert open_policy.check(jst(2026, 12, 5, 3), jst(2026, 12, 5, 4)).ok
    assert not open_policy.check(jst(2026, 12, 25, 3), jst(2026, 12, 25, 4)).ok


def test_next_slots_start_in_the_next_windows_and_skip_weekends() -> None:
    # Friday 2026-12-04 at 16:00 JST: a 2-hour slot no longer fits today.
    slots = POLICY.next_slots(jst(2026, 12, 4, 16), timedelta(hours=2), count=3)
    assert [s.start.astimezone(TOKYO) for s in slots] == [
        jst(2026, 12, 7, 14),
        jst(2026, 12, 8, 14),
        jst(2026, 12, 9, 14),
    ]
    for slot in slots:
        assert slot.end - slot.start == timedelta(hours=2)
        assert POLICY.check(slot.start, slot.end).ok


def test_next_slots_start_later_today_when_the_rest_of_the_window_fits() -> None:
    slots = POLICY.next_slots(jst(2026, 12, 1, 14, 7), timedelta(hours=1), count=1)
    assert slots[0].start == jst(2026, 12, 1, 14, 15)


def test_next_slots_step_over_a_freeze() -> None:
    slots = POLICY.next_slots(jst(2026, 12, 24, 15), timedelta(hours=1), count=2)
    assert [s.start.astimezone(TOKYO) for s in slots] == [jst(2026, 12, 24, 15), jst(2027, 1, 5, 14)]
    assert all(POLICY.check(s.start, s.end).ok for s in slots)


def test_a_duration_longer_than_any_window_gets_no_slot() -> None:
    assert POLICY.next_slots(jst(2026, 12, 1, 9), timedelta(hours=4)) == []


def test_suggested_slots_in_tokyo_read_from_europe_are_the_same_instants() -> None:
    after = datetime(2026, 12, 1, 9, tzinfo=BERLIN)  # 17:00 JST: today's window has closed
    slot = POLICY.next_slots(after, timedelta(hours=1), count=1)[0]
    assert slot.start.astimezone(TOKYO) == jst(2026, 12, 2, 14)
    assert slot.start.astimezone(BERLIN).hour == 6


@pytest.mark.parametrize(
    ("spec", "days"),
    [
        ("mon-fri", {0, 1, 2, 3, 4}),
        ("sat,sun", {5, 6}),
        (["Monday", "wed"], {0, 2}),
        ("fri-mon", {4, 5, 6, 0}),
    ],
)
def test_weekday_spellings(spec: str | list[str], days: set[int]) -> None:
    assert parse_weekdays(spec) == frozenset(days)


def test_bad_weekdays_and_times_say_what_is_expected() -> None:
    with pytest.raises(ValueError, match="not a weekday"):
        parse_weekdays("mon-fry")
    with pytest.raises(ValueError, match="not a time like 14:00"):
        parse_time("2pm")


def test_weekdays_are_described_as_ranges_when_contiguous() -> None:
    assert describe_weekdays(frozenset(range(5))) == "Mon–Fri"
    assert describe_weekdays(frozenset({0, 5, 6})) == "Mon, Sat, Sun"


def test_a_freeze_needs_a_reason_and_an_order() -> None:
    with pytest.raises(ValueError, match="reason"):
        Freeze(start=jst(2026, 1, 1), end=jst(2026, 1, 2), reason=" ")
    with pytest.raises(ValueError, match="before its first day"):
        Freeze.from_dates(jst(2026, 1, 2).date(), jst(2026, 1, 1).date(), reason="x", zone="UTC")
