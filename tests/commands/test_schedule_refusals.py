"""What `/upgrade schedule` says on the days it must refuse or could mislead (walks of the
announcements): a local time the clocks skip or pass twice is refused, a window is its plan's
length in elapsed time across a daylight saving change, a moved schedule names the one that
replaced it, a plan longer than every allowed window is said so (not "no slot in a year"),
`schedule list` keeps a pending schedule among many cancelled ones, and `--reason` takes words.
Through the router, with the Tokyo team's configuration and an injected clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services
from bot.router import Outcome
from tests.support.clock import FakeClock
from tests.support.schedules import FRIDAY_NOON_IN_TOKYO, PLAN, command, tokyo_team


@pytest.fixture
def services(write_config: Callable[..., Path]) -> Iterator[Services]:
    with tokyo_team(write_config, FakeClock(FRIDAY_NOON_IN_TOKYO)) as built:
        yield built


def cmd(services: Services, text: str, user: str = "U0COORD") -> Outcome:
    return command(services, text, user)


def test_a_time_the_clocks_skip_or_pass_twice_is_refused(services: Services) -> None:
    skipped = cmd(services, 'schedule tokyo-upgrade --at "2027-03-28 02:30" --tz Europe/Berlin')
    assert not skipped.ok
    assert (
        "2027-03-28 02:30 does not exist in Europe/Berlin: the clocks skip it that night"
        in skipped.rendered.text
    )
    twice = cmd(services, 'schedule tokyo-upgrade --at "2027-10-31 02:30" --tz Europe/Berlin')
    assert not twice.ok
    assert (
        "2027-10-31 02:30 happens twice in Europe/Berlin that night (daylight saving: 02:30 CEST, then 02:30 CET)"
        in (twice.rendered.text)
    )
    assert services.store.schedules() == []


@pytest.mark.parametrize(
    ("at", "says"),
    [
        ("2027-02-30 10:00", "'2027-02-30 10:00' is not a date: February 2027 has 28 days"),
        ("2027-03-01 25:00", "'2027-03-01 25:00' has hour 25: hours are 00–23"),
        ("2027-13-01 10:00", "'2027-13-01 10:00' has no month 13"),
        ("next tuesday", "'next tuesday' is not a time like \"2026-12-01 14:00\""),
    ],
)
def test_an_impossible_time_is_refused_naming_what_is_wrong_with_it(
    services: Services, at: str, says: str
) -> None:
    out = cmd(services, f'schedule tokyo-upgrade --at "{at}"')
    assert not out.ok
    assert says in out.rendered.text
    assert services.store.schedules() == []


def test_a_window_across_a_daylight_saving_change_lasts_its_plans_elapsed_time(services: Services) -> None:
    out = cmd(
        services,
        'schedule tokyo-upgrade --at "2027-03-28 01:00" --tz Europe/Berlin --override --reason night work',
    )
    assert out.ok, out.rendered.text
    (schedule,) = services.store.schedules()
    assert schedule.window_end - schedule.window_start == timedelta(hours=2)  # the plan's 14:00–16:00
    assert (
        schedule.override_reason
        == "outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo) — night work"
    )


def test_a_plan_whose_own_window_crosses_a_clock_change_is_scheduled_for_its_wall_clock_length(
    services: Services,
) -> None:
    # 01:00–05:00 Berlin the night the clocks go forward lasts three hours; on another night the
    # team's 01:00–05:00 is four, and the schedule is the window they wrote.
    night = (
        PLAN.replace("name: tokyo-upgrade", "name: berlin-night")
        .replace('start: "2026-12-01T14:00"', 'start: "2027-03-28T01:00"')
        .replace('end: "2026-12-01T16:00"', 'end: "2027-03-28T05:00"')
        .replace("timezone: Asia/Tokyo", "timezone: Europe/Berlin")
    )
    assert "Europe/Berlin" in night
    services.store.save_plan(
        name="berlin-night", text=night, loaded_by="U0PRIMARY", loaded_at=FRIDAY_NOON_IN_TOKYO
    )
    out = cmd(
        services,
        'schedule berlin-night --at "2027-03-30 09:00" --tz Europe/Berlin --override --reason night work',
    )
    assert out.ok, out.rendered.text
    (schedule,) = services.store.schedules()
    assert schedule.window_end - schedule.window_start == timedelta(hours=4)
    assert "to <!date^1806404400^{time}|2027-03-30 13:00 Europe/Berlin (11:00 UTC)>" in out.rendered.text


def test_a_moved_schedule_names_the_one_that_replaced_it(services: Services) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"').ok
    assert cmd(services, 'schedule move 1 --at "2026-12-02 14:00" --reason vendor delay').ok
    again = cmd(services, 'schedule move 1 --at "2026-12-03 14:00" --reason again')
    assert not again.ok
    assert "schedule #1 was moved: it is #2 now (scheduled)" in again.rendered.text
    cancel = cmd(services, "schedule cancel 1 --reason walk cleanup")
    assert "it is #2 now" in cancel.rendered.text
    assert cmd(services, "schedule cancel 2 --reason walk cleanup").ok  # --reason: words, unquoted
    assert services.store.schedule(2).state == "cancelled"  # type: ignore[union-attr]


def test_a_plan_longer_than_every_allowed_window_is_said_so(services: Services) -> None:
    long = PLAN.replace("name: tokyo-upgrade", "name: long").replace(
        'end: "2026-12-01T16:00"', 'end: "2026-12-01T18:00"'
    )
    services.store.save_plan(name="long", text=long, loaded_by="U0PRIMARY", loaded_at=FRIDAY_NOON_IN_TOKYO)
    out = cmd(services, 'schedule long --at "2026-12-02 14:00"')
    assert not out.ok
    assert "The plan's window lasts 4h, longer than the longest allowed window (3h)" in out.rendered.text
    assert "No allowed slot in the next year" not in out.rendered.text


def test_the_list_keeps_a_pending_schedule_among_many_cancelled_ones(services: Services) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"').ok
    other = PLAN.replace("name: tokyo-upgrade", "name: other")
    services.store.save_plan(name="other", text=other, loaded_by="U0PRIMARY", loaded_at=FRIDAY_NOON_IN_TOKYO)
    for n in range(10):
        assert cmd(services, 'schedule other --at "2026-12-02 14:00"').ok
        assert cmd(services, f"schedule cancel {n + 2}").ok
    listed = cmd(services, "schedule list").rendered.text
    assert "*`#1`* plan `tokyo-upgrade`" in listed
    assert "*`#11`* plan `other`" in listed
