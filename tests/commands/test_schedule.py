"""`/upgrade schedule` and `/upgrade start` against the maintenance windows, with an injected clock:
refusals suggest slots inside the windows, only the coordinator overrides (audited), and
`schedule list` shows every announcement, skipped ones too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services
from tests.support.clock import FakeClock
from tests.support.schedules import FRIDAY_NOON_IN_TOKYO, PLAN, TOKYO, command, suggested, tokyo_team


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(FRIDAY_NOON_IN_TOKYO)


@pytest.fixture
def services(write_config: Callable[..., Path], clock: FakeClock) -> Iterator[Services]:
    assert PLAN.count("tokyo-upgrade") == 1
    assert "2026-12-01T16:00" in PLAN
    with tokyo_team(write_config, clock) as built:
        yield built


cmd = command


def test_a_schedule_outside_the_window_is_refused_with_slots_inside_it(services: Services) -> None:
    out = cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 18:00"')
    assert out.audit_outcome == "refused"
    assert out.reply.ephemeral
    assert "outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo)" in out.rendered.text
    slots = suggested(out.rendered.text)
    assert [s.strftime("%a %H:%M") for s in slots] == ["Wed 14:00", "Thu 14:00", "Fri 14:00"]
    policy = services.settings.windows
    assert all(policy.check(s, s + timedelta(hours=2)).ok for s in slots)
    assert services.store.schedules() == []


def test_a_schedule_in_a_freeze_is_refused_and_the_slots_come_after_it(services: Services) -> None:
    out = cmd(services, 'schedule tokyo-upgrade --at "2026-12-24 14:00"')
    assert out.audit_outcome == "refused"
    assert "year-end freeze" in out.rendered.text
    slots = suggested(out.rendered.text)
    assert slots[0] == datetime(2027, 1, 5, 14, tzinfo=TOKYO)
    assert all(services.settings.windows.check(s, s + timedelta(hours=2)).ok for s in slots)


def test_the_zone_of_at_can_be_given_and_a_berlin_time_inside_the_tokyo_window_is_accepted(
    services: Services,
) -> None:
    # 06:00 in Berlin (CET, +1) on Tuesday is 14:00 in Tokyo.
    out = cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 06:00" --tz Europe/Berlin')
    assert out.ok, out.rendered.text
    (schedule,) = services.store.schedules()
    assert schedule.window_start == datetime(2026, 12, 1, 5, tzinfo=UTC)
    assert schedule.tz == "Europe/Berlin"


def test_only_the_coordinator_may_override_and_only_with_a_reason(services: Services) -> None:
    at = 'schedule tokyo-upgrade --at "2026-12-01 18:00" --override'
    denied = cmd(services, f'{at} --reason "vendor deadline"', user="U0PRIMARY")
    assert denied.audit_outcome == "denied"
    assert "only the coordinator" in denied.rendered.text
    no_reason = cmd(services, at, user="U0COORD")
    assert no_reason.audit_outcome == "usage"
    assert "needs a reason" in no_reason.rendered.text
    assert services.store.schedules() == []
    ok = cmd(services, f'{at} --reason "vendor deadline"', user="U0COORD")
    assert ok.ok, ok.rendered.text
    past = "outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo)"
    assert f"Overridden by <@U0COORD>: {past} — vendor deadline" in ok.rendered.text
    (schedule,) = services.store.schedules()
    assert schedule.override_reason == f"{past} — vendor deadline"
    (override,) = [e for e in services.store.audit_entries() if e.kind == "override"]
    assert override.user_id == "U0COORD"
    assert override.detail == f"scheduled {past} — vendor deadline"


def test_an_override_of_a_freeze_inside_the_windows_says_it_went_past_the_freeze(services: Services) -> None:
    # Thursday 24 December, 14:00 Tokyo: inside the weekday windows, inside the year-end freeze.
    at = 'schedule tokyo-upgrade --at "2026-12-24 14:00" --override --reason "vendor deadline"'
    ok = cmd(services, at, user="U0COORD")
    assert ok.ok, ok.rendered.text
    freeze = "inside the freeze: year-end freeze (2026-12-24 to 2027-01-04 Asia/Tokyo)"
    assert f"Overridden by <@U0COORD>: {freeze} — vendor deadline" in ok.rendered.text
    assert "outside the allowed windows" not in ok.rendered.text.lower()
    (override,) = [e for e in services.store.audit_entries() if e.kind == "override"]
    assert override.detail == f"scheduled {freeze} — vendor deadline"
    # Outside the windows and in the freeze: both are said.
    cmd(services, "schedule cancel 1", user="U0COORD")
    both = cmd(services, at.replace("14:00", "18:00"), user="U0COORD")
    assert both.ok, both.rendered.text
    assert f"outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo) and {freeze} — vendor" in (
        both.rendered.text
    )


def test_an_overrides_reason_keeps_the_mention_its_author_typed(services: Services) -> None:
    # Slack sends a typed @name as <@U…>: the reply names that person, never "&lt;@U…&gt;" as text.
    at = 'schedule tokyo-upgrade --at "2026-12-24 14:00" --override --reason "agreed with <@U0PRIMARY>"'
    ok = cmd(services, at, user="U0COORD")
    assert ok.ok, ok.rendered.text
    assert "— agreed with <@U0PRIMARY>" in ok.rendered.text
    assert "&lt;@" not in ok.rendered.text


def test_list_shows_every_announcement_and_cancel_posts_a_notice(
    services: Services, clock: FakeClock
) -> None:
    out = cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"', user="U0COORD")
    assert out.ok, out.rendered.text
    (schedule,) = services.store.schedules()
    rows = services.store.scheduled_announcements(schedule_id=schedule.id)
    assert [r.template for r in rows] == ["scheduled", "reminder", "reminder", "starting"]
    # No Slack on this front door: the scheduled announcement waits for `upgrade-bot run`.
    assert {r.state for r in rows} == {"scheduled"}
    # The bot was down until an hour after the start: everything due is skipped, and shown.
    clock.set(datetime(2026, 12, 1, 6, tzinfo=UTC))
    services.announcements.run_due()
    listed = cmd(services, "schedule list", user="U0SHADOW")
    assert listed.rendered.text.count(":warning: skipped") == 4
    assert "past the grace of 30m" in listed.rendered.text

    again = cmd(services, 'schedule tokyo-upgrade --at "2026-12-02 14:00"', user="U0COORD")
    assert again.audit_outcome == "refused"
    assert f"cancel {schedule.id}" in again.rendered.text
    cancelled = cmd(services, f'schedule cancel {schedule.id} --reason "moved"', user="U0COORD")
    assert cancelled.ok
    assert not cancelled.reply.ephemeral
    assert cancelled.reply.channel == "C0ANNOUNCE"
    assert cancelled.rendered.text.startswith(":no_entry_sign: *Cancelled:*")
    assert "moved" in cancelled.rendered.text
    second = cmd(services, 'schedule tokyo-upgrade --at "2026-12-02 14:00"', user="U0COORD")
    assert second.ok
    pending = services.store.scheduled_announcements(states=["scheduled"])
    assert {r.schedule_id for r in pending} == {schedule.id + 1}
    cancel = cmd(services, f"schedule cancel {schedule.id + 1}", user="U0COORD")
    # Scheduled a day ahead: the T-24h reminder would be in the past, so there are three.
    assert cancel.ok
    assert "3 pending announcements withdrawn" in cancel.rendered.text
    assert services.store.scheduled_announcements(states=["scheduled"]) == []
    assert "cancelled" in cmd(services, "schedule list").rendered.text


def test_start_outside_the_window_asks_for_the_coordinators_override(services: Services) -> None:
    refused = cmd(services, "start tokyo-upgrade")
    assert refused.audit_outcome == "refused"
    assert "Next allowed: Fri 2026-11-20 14:00" in refused.rendered.text
    denied = cmd(services, 'start tokyo-upgrade --override --reason "hotfix"', user="U0PRIMARY")
    assert denied.audit_outcome == "denied"
    started = cmd(services, 'start tokyo-upgrade --override --reason "hotfix"', user="U0COORD")
    assert started.ok
    assert "started" in started.rendered.text
    (override,) = [e for e in services.store.audit_entries() if e.kind == "override"]
    assert override.subcommand == "start"
    assert override.run_id
    assert override.detail == "started outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo) — hotfix"


def test_start_of_a_plan_whose_window_is_past_says_so_and_points_to_schedule(
    services: Services, clock: FakeClock
) -> None:
    # Tuesday 15 December, 14:00 Tokyo: inside the windows, two weeks after the plan's own window.
    clock.set(datetime(2026, 12, 15, 5, tzinfo=UTC))
    started = cmd(services, "start tokyo-upgrade")
    assert started.ok, started.rendered.text
    assert (
        ":warning: The plan's window ended 13 days ago (2026-12-01 16:00 Asia/Tokyo): to run it in a new "
        'one, `/upgrade schedule tokyo-upgrade --at "YYYY-MM-DD HH:MM"`, or change the plan\'s `window`.'
    ) in started.rendered.text
    # `plan load` says it too, before anyone starts it.
    loaded = cmd(services, "plan load eks-nodegroups")
    assert loaded.ok, loaded.rendered.text
    assert (
        "• the plan's window ended 13 days ago (2026-12-01 17:00 Asia/Tokyo): to run it"
        in loaded.rendered.text
    )


def test_announce_for_a_plan_uses_its_impact_links_and_scheduled_window(services: Services) -> None:
    cmd(services, 'schedule tokyo-upgrade --at "2026-12-02 15:00"', user="U0COORD")
    preview = cmd(services, "announce preview starting tokyo-upgrade", user="U0SHADOW")
    assert preview.ok
    assert "plan `tokyo-upgrade`" in preview.rendered.text
    posted = cmd(services, "announce scheduled tokyo-upgrade")
    assert posted.ok
    assert posted.reply.channel == "C0ANNOUNCE"
    text = posted.rendered.text
    assert "The API server restarts twice" in text
    assert "<https://wiki.example.com/runbooks/eks-1.25|Runbook>" in text
    assert f"<!date^{int(datetime(2026, 12, 2, 15, tzinfo=TOKYO).timestamp())}^" in text
    needs_run = cmd(services, "announce completed tokyo-upgrade")
    assert needs_run.audit_outcome == "error"
    assert "needs a run" in needs_run.rendered.text


def test_a_run_started_in_the_scheduled_window_belongs_to_it_and_its_end_is_announced(
    services: Services, clock: FakeClock
) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"', user="U0COORD").ok
    (schedule,) = services.store.schedules()
    clock.set(datetime(2026, 12, 1, 5, 5, tzinfo=UTC))  # 14:05 in Tokyo
    started = cmd(services, "start tokyo-upgrade")
    assert started.ok, started.rendered.text
    attached = services.store.schedule(schedule.id)
    assert attached is not None
    assert attached.state == "started"
    assert attached.run_id
    aborted = cmd(services, f'abort {attached.run_id} --reason "PDB blocks the drain"', user="U0COORD")
    assert aborted.ok, aborted.rendered.text
    ended = [r for r in services.store.scheduled_announcements(schedule_id=schedule.id) if r.run_id]
    assert [(r.template, r.dedup_key) for r in ended] == [("aborted", f"run:{attached.run_id}/aborted")]
    assert services.store.schedule(schedule.id).state == "aborted"  # type: ignore[union-attr]


def test_the_reply_says_which_reminders_a_near_window_will_not_get(
    services: Services, clock: FakeClock
) -> None:
    # Days ahead, every reminder is kept and the reply says nothing of dropped ones.
    far = cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"')
    assert far.ok, far.rendered.text
    assert "No reminder" not in far.rendered.text
    assert [a.template for a in services.store.scheduled_announcements()].count("reminder") == 2
    assert cmd(services, "schedule cancel 1").ok
    # Monday 13:20 in Tokyo; the window opens at 14:00: -24h is past and -1h due before now + 15m.
    clock.set(datetime(2026, 11, 30, 4, 20, tzinfo=UTC))
    near = cmd(services, 'schedule tokyo-upgrade --at "2026-11-30 14:00"')
    assert near.ok, near.rendered.text
    assert (
        "No reminder at -24h or -1h: a reminder is kept only when it falls due at least 15m from now."
        in near.rendered.text
    )
    assert [a.template for a in services.store.scheduled_announcements(schedule_id=2)] == [
        "scheduled",
        "starting",
    ]
