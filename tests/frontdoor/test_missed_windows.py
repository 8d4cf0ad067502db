"""A schedule whose window passed while the bot was down (walks of time and zones): once its
window ends with no run it is closed as `missed` — stored, so a restart agrees — and the
announcement channel is told once; it holds the plan no more for `schedule`, `move` and `start`,
so nothing is announced twice. A run that starts after its `starting` was skipped is announced as
it starts, once. The bot assembled as `serve` does, the Slack stub, an injected clock, restarts on
the same database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.schedules import CONFIG, FRIDAY_NOON_IN_TOKYO, PLAN
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

# Tuesday 2026-12-01 14:00–16:00 Tokyo is 05:00–07:00 UTC.
AT = 'schedule tokyo-upgrade --at "2026-12-01 14:00"'


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


@contextmanager
def bot_up(path: Path, stub: SlackStub, clock: FakeClock) -> Iterator[Services]:
    """One bot process on the shared database: its timers started (what fell due is handled)."""
    services = assemble(load_settings(path, slack_env(stub.api_url)), clock=clock)
    try:
        if services.store.plan("tokyo-upgrade") is None:
            services.store.save_plan(
                name="tokyo-upgrade", text=PLAN, loaded_by="U0PRIMARY", loaded_at=clock()
            )
        services.triggers.start(paused=True)
        yield services
    finally:
        services.triggers.shutdown()
        services.close()


def cmd(services: Services, text: str, user: str = "U0COORD") -> Outcome:
    return services.router.handle(CommandRequest(text=text, user_id=user, channel_id="C0OPS"))


def announced(stub: SlackStub, head: str) -> list[str]:
    """The texts posted in the announcement channel that begin with `head` (an emoji)."""
    return [
        str(c.params["text"])
        for c in stub.calls_to("chat.postMessage")
        if c.params["channel"] == "C0ANNOUNCE" and str(c.params.get("text", "")).lstrip().startswith(head)
    ]


def config(write_config: Callable[..., Path]) -> Path:
    return write_config(CONFIG, roster=False)


def test_a_window_that_passed_while_the_bot_was_down_is_missed_and_said_once(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
    clock.set(utc(2026, 12, 1, 9))  # down through the whole window (05:00–07:00 UTC)
    with bot_up(path, slack_stub, clock) as services:
        (schedule,) = services.store.schedules()
        assert schedule.state == "missed"
        (missed,) = announced(slack_stub, ":no_entry_sign:")
        assert "did not take place" in missed
        assert "<@U0COORD>" in missed  # the coordinator, who schedules it again, is named
        listed = cmd(services, "schedule list", user="U0SHADOW").rendered.text
        assert "— :warning: missed: the window ended <!date^" in listed
        assert "— scheduled" not in listed
        audited = [
            e for e in services.store.audit_entries() if (e.kind, e.subcommand) == ("schedule", "missed")
        ]
        assert [e.arguments for e in audited] == ["#1 tokyo-upgrade"]
    clock.set(utc(2026, 12, 1, 9, 5))
    with bot_up(path, slack_stub, clock) as services:  # a restart agrees, and posts nothing again
        assert [s.state for s in services.store.schedules()] == ["missed"]
        assert cmd(services, "schedule list", user="U0SHADOW").ok
    assert len(announced(slack_stub, ":no_entry_sign:")) == 1


def test_a_window_that_ends_with_no_run_while_the_bot_runs_is_missed_at_its_end(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
        for moment in (
            utc(2026, 11, 30, 5),
            utc(2026, 12, 1, 4),
            utc(2026, 12, 1, 5),
            utc(2026, 12, 1, 6, 59),
        ):
            clock.set(moment)
            services.triggers.run_due(moment)
        assert services.store.schedules()[0].state == "scheduled"  # a run may still start
        clock.set(utc(2026, 12, 1, 7, 0, 30))
        services.triggers.run_due(clock())
        assert services.store.schedules()[0].state == "missed"
        assert len(announced(slack_stub, ":no_entry_sign:")) == 1
        assert len(announced(slack_stub, ":rocket:")) == 1  # `starting`, at the window's start


def test_a_missed_schedule_holds_the_plan_no_more_and_nothing_is_announced_twice(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
    clock.set(utc(2026, 12, 1, 9))
    with bot_up(path, slack_stub, clock) as services:
        again = cmd(services, 'schedule tokyo-upgrade --at "2026-12-02 14:00"')
        assert again.ok, again.rendered.text
        moved = cmd(services, 'schedule move 1 --at "2026-12-02 14:00" --reason "the bot was down"')
        assert not moved.ok
        assert "schedule #1 was missed: its window ended 2026-12-01 16:00 Asia/Tokyo with no run" in (
            moved.rendered.text
        )
        assert [s.state for s in services.store.schedules()] == ["scheduled", "missed"]
        for moment in (utc(2026, 12, 2, 4), utc(2026, 12, 2, 5)):
            clock.set(moment)
            services.triggers.run_due(moment)
    assert len(announced(slack_stub, ":alarm_clock:")) == 1  # the new window's T-1h reminder, once
    assert len(announced(slack_stub, ":rocket:")) == 1


def test_start_after_a_missed_window_does_not_call_it_scheduled(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
        # The terminal's way: no timers ran since, and `start` itself finds the window over.
        services.triggers.shutdown()
        clock.set(utc(2026, 12, 1, 9))
        started = cmd(services, 'start tokyo-upgrade --override --reason "the bot was down"')
        assert started.ok, started.rendered.text
        assert "also scheduled" not in started.rendered.text
        (schedule,) = services.store.schedules()
        assert (schedule.state, schedule.run_id) == ("missed", "")


def test_moving_a_schedule_keeps_one_pending_schedule_per_plan(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
        (first,) = services.store.schedules()
        # A second pending schedule of the plan, as a database from before missed windows holds.
        services.store.create_schedule(
            replace(first, window_start=utc(2026, 12, 2, 5), window_end=utc(2026, 12, 2, 7)), lambda _id: []
        )
        moved = cmd(services, 'schedule move 1 --at "2026-12-03 14:00" --reason "the vendor asked"')
        assert not moved.ok
        assert (
            "`tokyo-upgrade` is also scheduled (#2) and a plan has one pending schedule"
            in moved.rendered.text
        )
        assert [s.state for s in services.store.schedules()] == ["scheduled", "scheduled"]


def test_a_run_started_after_starting_was_skipped_announces_its_start_once(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> None:
    path, clock = config(write_config), FakeClock(FRIDAY_NOON_IN_TOKYO)
    with bot_up(path, slack_stub, clock) as services:
        assert cmd(services, AT).ok
    clock.set(utc(2026, 12, 1, 5, 45))  # back 45 minutes into the window: `starting` is past its grace
    with bot_up(path, slack_stub, clock) as services:
        assert announced(slack_stub, ":rocket:") == []
        started = cmd(services, "start tokyo-upgrade", user="U0PRIMARY")
        assert started.ok, started.rendered.text
        (schedule,) = services.store.schedules()
        assert schedule.state == "started"
        (posted,) = [
            c.params["text"]
            for c in slack_stub.calls_to("chat.postMessage")
            if ":rocket: *" in c.params["text"]
        ]
        # Marked late, with when it was due: the window's start, in each reader's zone.
        due = f"<!date^{int(utc(2026, 12, 1, 5).timestamp())}^"
        assert posted.startswith(f":hourglass: _Delayed: this announcement was due {due}")
        assert "is starting now" in posted
        assert f"run #{schedule.run_id}" in posted
        assert services.announcements.attach_run(schedule.id, schedule.run_id) is not None  # a retry
    clock.set(utc(2026, 12, 1, 5, 50))
    with bot_up(path, slack_stub, clock):
        pass
    assert len([c for c in slack_stub.calls_to("chat.postMessage") if ":rocket: *" in c.params["text"]]) == 1
