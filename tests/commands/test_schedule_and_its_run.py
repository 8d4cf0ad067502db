"""A schedule and the run that belongs to it (walks of announcements on bad days): the run's end
withdraws the reminder and `starting` still to come; a run started more than an hour early says the
schedule is not its own; the card and the report count down to the scheduled window, not the plan
file's dates; announcements say the versions of the plan that runs (reloaded since scheduling); a
broken template of the run's end is refused when scheduling, not skipped at the end; and the
schedule's audit row carries the request's correlation id (a replay after a crash is "done
before"). Through the router, with an injected clock."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core.runs.report import build_report
from bot.frontdoor.assemble import Services, assemble
from bot.records import JobRow
from bot.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.schedules import CONFIG, FRIDAY_NOON_IN_TOKYO, PLAN, command, tokyo_team
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

AT = 'schedule tokyo-upgrade --at "2026-12-01 14:00"'  # Tuesday 14:00 Tokyo = 05:00 UTC


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(FRIDAY_NOON_IN_TOKYO)


@pytest.fixture
def services(write_config: Callable[..., Path], clock: FakeClock) -> Iterator[Services]:
    with tokyo_team(write_config, clock) as built:
        yield built


cmd = command


def test_a_runs_end_withdraws_the_reminder_and_starting_still_to_come(
    services: Services, clock: FakeClock
) -> None:
    assert cmd(services, AT, user="U0COORD").ok
    (schedule,) = services.store.schedules()
    clock.set(datetime(2026, 12, 1, 4, 10, tzinfo=UTC))  # 13:10 Tokyo: 50 minutes early, it joins
    started = cmd(services, 'start tokyo-upgrade --override --reason "the team is here"', user="U0COORD")
    assert started.ok, started.rendered.text
    run_id = services.store.schedule(schedule.id).run_id  # type: ignore[union-attr]
    assert run_id
    assert cmd(services, f'abort {run_id} --reason "vendor outage"', user="U0COORD").ok
    rows = {r.template: r for r in services.store.scheduled_announcements(schedule_id=schedule.id)}
    assert rows["starting"].state == "cancelled"
    assert rows["starting"].reason == f"not posted: run {run_id} aborted before it was due"
    assert rows["aborted"].template == "aborted"
    clock.set(datetime(2026, 12, 1, 5, 1, tzinfo=UTC))
    services.announcements.run_due(clock())  # the window opens: nothing announces the ended run
    assert services.store.scheduled_announcements(schedule_id=schedule.id, states=["scheduled"]) == []


def test_a_run_started_long_before_its_schedule_says_that_schedule_is_not_its_own(
    services: Services, clock: FakeClock
) -> None:
    assert cmd(services, AT, user="U0COORD").ok
    clock.set(datetime(2026, 11, 30, 5, 30, tzinfo=UTC))  # Monday 14:30 Tokyo, a day before
    started = cmd(services, "start tokyo-upgrade")
    assert started.ok, started.rendered.text
    # The window as a Slack date each reader sees in their zone, the plan's zone in the fallback.
    opens = f"<!date^{int(datetime(2026, 12, 1, 5, tzinfo=UTC).timestamp())}^{{date_short_pretty}} {{time}}"
    assert (
        f"`tokyo-upgrade` is also scheduled (#1, from {opens}|2026-12-01 14:00 Asia/Tokyo>), more than"
        in (started.rendered.text)
    )
    assert "`/upgrade schedule cancel 1 --reason …` withdraws them" in started.rendered.text


def test_the_card_and_the_report_count_down_to_the_scheduled_window(
    services: Services, clock: FakeClock
) -> None:
    """The plan file's window is 2026-12-01 14:00–16:00 Tokyo; scheduled a week later, the run is
    in that window, not a week past the plan's."""
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-08 14:00"', user="U0COORD").ok
    (schedule,) = services.store.schedules()
    clock.set(datetime(2026, 12, 8, 5, 10, tzinfo=UTC))  # 14:10 Tokyo
    assert cmd(services, "start tokyo-upgrade").ok
    run = services.runs.load(schedule_run(services, schedule.id))
    progress = services.runs.card_context(run)["progress"]
    assert progress["window_end"] == schedule.window_end
    assert (progress["over"], progress["left"]) == (False, "1h50m")
    report = build_report(services.store, run.id)
    assert (report.window_start, report.window_end) == (schedule.window_start, schedule.window_end)


def schedule_run(services: Services, schedule_id: int) -> str:
    found = services.store.schedule(schedule_id)
    assert found is not None
    return found.run_id


def test_announcements_say_the_versions_of_the_plan_that_will_run(
    services: Services, clock: FakeClock
) -> None:
    assert cmd(services, AT, user="U0COORD").ok
    (schedule,) = services.store.schedules()
    services.store.save_plan(
        name="tokyo-upgrade",
        text=PLAN.replace('target_version: "1.25.16"', 'target_version: "1.26.3"'),
        loaded_by="U0PRIMARY",
        loaded_at=clock(),
    )
    starting = next(
        r for r in services.store.scheduled_announcements(schedule_id=schedule.id) if r.template == "starting"
    )
    assert services.announcements.context_for(starting)["plan"].target_version == "1.26.3"


def test_a_broken_template_of_the_runs_end_is_refused_when_scheduling(
    write_config: Callable[..., Path], clock: FakeClock, tmp_path: Path
) -> None:
    team = tmp_path / "team"
    (team / "announcements").mkdir(parents=True)
    (team / "announcements" / "completed.txt.j2").write_text(
        ":tada: {{ plan.cluster }} done after {{ run.stepp.name }}\n"
    )
    with tokyo_team(write_config, clock, f"templates_dir: {team}\n") as services:
        out = cmd(services, AT, user="U0COORD")
        assert not out.ok
        assert "announcement `completed` could not be rendered" in out.rendered.text
        assert "'RunInfo' has no attribute 'stepp'" in out.rendered.text
        assert "bot.core" not in out.rendered.text
        assert services.store.schedules() == []


def test_the_schedules_audit_row_carries_the_requests_correlation_id(services: Services) -> None:
    assert cmd(services, AT, user="U0COORD", cid="c-sched-1").ok
    rows = services.store.audit_entries(correlation_id="c-sched-1")
    (row,) = [r for r in rows if r.kind == "schedule" and r.subcommand == "schedule"]
    # Both ends of the window in the zone it was scheduled in (not one +09:00 and one UTC).
    assert row.detail == "window 2026-12-01T14:00:00+09:00 – 2026-12-01T16:00:00+09:00 Asia/Tokyo", row.detail


def test_a_plan_for_a_cluster_the_bot_does_not_know_is_refused_at_start(
    write_config: Callable[..., Path], clock: FakeClock, tmp_path: Path
) -> None:
    """It started, then failed at its first action ("no cluster named …") and paused."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    with tokyo_team(write_config, clock, f"clusters:\n  staging: {{kubeconfig: {kubeconfig}}}\n") as services:
        clock.set(datetime(2026, 11, 30, 5, 30, tzinfo=UTC))  # inside a window
        out = cmd(services, "start tokyo-upgrade")
        assert not out.ok
        assert (
            "is for cluster `prod`, which this bot does not know (configured: staging)" in out.rendered.text
        )
        assert services.store.runs() == []


def test_a_plan_reloaded_while_scheduled_says_what_its_announcements_now_say(
    write_config: Callable[..., Path], clock: FakeClock, tmp_path: Path
) -> None:
    """The reload answered "loaded (#2)" alone, while the schedule's announcements changed versions."""
    team = tmp_path / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "tokyo-upgrade.yaml").write_text(
        PLAN.replace('target_version: "1.25.16"', 'target_version: "1.26.3"')
    )
    with tokyo_team(write_config, clock, f"templates_dir: {team}\n") as services:
        assert cmd(services, AT, user="U0COORD").ok
        out = cmd(services, "plan load tokyo-upgrade")
        assert out.ok, out.rendered.text
        assert "`tokyo-upgrade` is scheduled (#1, from " in out.rendered.text
        assert "its announcements now say 1.24.17 → 1.26.3." in out.rendered.text
        assert ":calendar:" not in cmd(services, "plan show tokyo-upgrade").rendered.text


def test_a_run_started_early_withdraws_the_reminders_posts_starting_now_and_shows_the_schedules_window(
    write_config: Callable[..., Path], clock: FakeClock, slack_stub: SlackStub
) -> None:
    """Started 50 minutes before its window: the reminders still to come would say the upgrade is
    ahead while it runs, and `starting` would come 50 minutes late; the card's first post showed
    the plan file's window, then switched to the schedule's."""
    settings = load_settings(write_config(CONFIG, roster=False), slack_env(slack_stub.api_url))
    services = assemble(settings, clock=clock)
    try:
        services.store.save_plan(name="tokyo-upgrade", text=PLAN, loaded_by="U0PRIMARY", loaded_at=clock())
        assert cmd(services, AT, user="U0COORD").ok
        (schedule,) = services.store.schedules()
        clock.set(datetime(2026, 12, 1, 4, 10, tzinfo=UTC))  # 13:10 Tokyo
        services.announcements.run_due(datetime(2026, 12, 1, 4, 0, tzinfo=UTC))  # the hour-before reminder
        posted = len(slack_stub.calls_to("chat.postMessage"))
        started = cmd(services, 'start tokyo-upgrade --override --reason "the team is here"', user="U0COORD")
        assert started.ok, started.rendered.text
        run_id = services.store.schedule(schedule.id).run_id  # type: ignore[union-attr]
        rows = {r.template: r for r in services.store.scheduled_announcements(schedule_id=schedule.id)}
        assert rows["starting"].state == "sent"
        assert rows["starting"].due_at == clock()
        new = [c.params for c in slack_stub.calls_to("chat.postMessage")[posted:]]
        starting = [p for p in new if p["channel"] == "C0ANNOUNCE"]
        assert len(starting) == 1
        assert "is starting now" in starting[0]["text"]
        card = next(p for p in new if p["channel"] == "C0OPS" and p["text"].startswith(":clipboard:"))
        assert "window not open yet: it opens" in card["text"]
        assert "(in 50m)" in card["text"]
        clock.set(datetime(2026, 12, 1, 5, 1, tzinfo=UTC))
        services.announcements.run_due(clock())  # the window opens: nothing more is announced
        later = [
            c.params
            for c in slack_stub.calls_to("chat.postMessage")[posted:]
            if c.params["channel"] == "C0ANNOUNCE"
        ]
        assert len(later) == 1
        assert services.store.scheduled_announcements(schedule_id=schedule.id, states=["scheduled"]) == []
        assert run_id
    finally:
        services.close()


def test_the_aborted_announcement_says_which_nodes_the_run_cordoned_are_still_cordoned(
    services: Services, clock: FakeClock
) -> None:
    assert cmd(services, AT, user="U0COORD").ok
    (schedule,) = services.store.schedules()
    clock.set(datetime(2026, 12, 1, 4, 10, tzinfo=UTC))
    assert cmd(services, 'start tokyo-upgrade --override --reason "the team is here"', user="U0COORD").ok
    run_id = schedule_run(services, schedule.id)
    # A drain of the run cordoned two nodes (its progress as the drain job stores it), then the abort.
    progress = {
        "order": ["ip-10-0-1-7", "ip-10-0-1-8"],
        "cordoned": ["ip-10-0-1-7", "ip-10-0-1-8"],
        "nodes": {},
    }
    services.store.create_job(
        JobRow(id=0, run_id=run_id, step_id="drain-ng-a", epoch=1, kind="drain", cluster="prod",
               args=json.dumps({"nodegroup": "ng-a"}), state="interrupted", progress=json.dumps(progress),
               started_by="U0COORD", started_at=clock())
    )  # fmt: skip
    assert cmd(services, f'abort {run_id} --reason "vendor outage"', user="U0COORD").ok
    (row,) = [
        r for r in services.store.scheduled_announcements(schedule_id=schedule.id) if r.template == "aborted"
    ]
    text = services.announcements.renderer.render("aborted", services.announcements.context_for(row)).text
    assert (
        ":warning: 2 node(s) the run cordoned were not uncordoned: ip-10-0-1-7, ip-10-0-1-8. "
        "The run's thread asks whether to uncordon them." in text
    )
    # Once they are uncordoned (a job of the run's, by hand), it says nothing of nodes.
    services.store.create_job(
        JobRow(id=0, run_id=run_id, step_id="uncordon-nodes", kind="uncordon", cluster="prod", state="done",
               progress=json.dumps({"uncordoned": ["ip-10-0-1-7", "ip-10-0-1-8"]}), started_by="U0COORD",
               started_at=clock())
    )  # fmt: skip
    assert (
        "cordoned"
        not in services.announcements.renderer.render("aborted", services.announcements.context_for(row)).text
    )
