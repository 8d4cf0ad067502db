"""The triggers front door: scheduled announcements and the run ticker on APScheduler, the store
and the real Slack client against the stub, with an injected clock: jobs run at an instant the test
names, never by sleeping."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.job import Job

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.announcements.service import AnnouncementService
from bot.core.delivery import new_owner
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.frontdoor.triggers import ANNOUNCEMENT, RUN_TICKER, WINDOW_END, Done, Due, DurableKind, Triggers
from bot.logsetup import install_filters
from bot.records import AnnouncementRow
from tests.support.clock import FakeClock
from tests.support.plans import eks_with_human_checks
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = eks_with_human_checks()
NEW_YORK, TOKYO, BERLIN = ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo"), ZoneInfo("Europe/Berlin")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


@dataclass
class Bot:
    """One bot process: its services and triggers on the shared database (a restart = a new one)."""

    store: Store
    stub: SlackStub
    clock: FakeClock
    grace: timedelta = timedelta(minutes=30)
    #: The owners of the replicas alive, shared by the bots that are replicas of one deployment
    #: (`serve` reads them off the lease table's heartbeats); None: a bot alone.
    replicas: set[str] | None = None
    service: AnnouncementService = field(init=False)
    runs: RunService = field(init=False)
    triggers: Triggers = field(init=False)

    def __post_init__(self) -> None:
        owner, replicas = new_owner(), self.replicas
        if replicas is not None:
            replicas.add(owner)
        self.service = AnnouncementService(
            store=self.store,
            clock=self.clock,
            poster=SlackGateway(make_web_client(BOT_TOKEN, self.stub.api_url)),
            channel="C0ANNOUNCE",
            grace=self.grace,
            owner=owner,
            live_owners=None if replicas is None else (lambda: set(replicas)),
            listeners=[lambda: self.triggers.changed()],
        )
        self.runs = RunService(store=self.store, directory=StaticDirectory(), clock=self.clock)
        self.triggers = Triggers(announcements=self.service, runs=self.runs, clock=self.clock)

    def start(self) -> list[str]:
        return [d.action for d in self.triggers.start(paused=True)]

    def at(self, moment: datetime) -> list[str]:
        """What the announcement jobs due at `moment` did (the run ticker runs then too)."""
        self.clock.set(moment)
        return [d.action for d in self.triggers.run_due(moment) if d.kind == ANNOUNCEMENT]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    s.save_plan(name="eks-nodegroups", text=PLAN, loaded_by="U0PRIMARY", loaded_at=utc(2026, 1, 1))
    yield s
    s.close()


@pytest.fixture
def bots(store: Store, slack_stub: SlackStub) -> Iterator[list[Bot]]:
    started: list[Bot] = []
    yield started
    for bot in started:
        bot.triggers.shutdown()


def new_bot(
    bots: list[Bot],
    store: Store,
    stub: SlackStub,
    now: datetime,
    *,
    grace: timedelta = timedelta(minutes=30),
    replicas: set[str] | None = None,
) -> Bot:
    bot = Bot(store=store, stub=stub, clock=FakeClock(now), grace=grace, replicas=replicas)
    bots.append(bot)
    bot.start()
    return bot


def announcement_jobs(bot: Bot) -> list[Job]:
    """The bot's announcement jobs (each pending schedule has a window-end job as well)."""
    return [j for j in bot.triggers.jobs() if j.id.startswith(f"{ANNOUNCEMENT}:")]


def posts(stub: SlackStub) -> list[str]:
    return [str(c.params["text"]) for c in stub.calls_to("chat.postMessage")]


def test_offsets_fire_at_the_right_instants_across_the_new_york_spring_change(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 3, 1))
    # Sunday 2026-03-08 10:00 in New York is EDT (-4); Saturday is still EST (-5).
    bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 3, 8, 10, tzinfo=NEW_YORK), tz="America/New_York", by="U0COORD"
    )
    assert len(posts(slack_stub)) == 1
    assert posts(slack_stub)[0].startswith(":calendar:")
    times = [j.next_run_time for j in announcement_jobs(bot)]
    assert times == [utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 8, 14)]
    # T-24h is 24 real hours: 09:00 on Saturday for a New York reader, not 10:00.
    assert times[0].astimezone(NEW_YORK).hour == 9

    assert bot.at(utc(2026, 3, 7, 13, 59)) == []
    assert bot.at(utc(2026, 3, 7, 14)) == ["sent"]
    assert bot.at(utc(2026, 3, 8, 13)) == ["sent"]
    assert bot.at(utc(2026, 3, 8, 14, 0, 30)) == ["sent"]
    texts = posts(slack_stub)
    assert len(texts) == 4
    assert texts[3].startswith(":rocket:")
    window_token = f"<!date^{int(utc(2026, 3, 8, 14).timestamp())}^"
    assert all(window_token in t for t in texts)
    # A restart finds nothing left to do and posts nothing again.
    again = new_bot(bots, store, slack_stub, utc(2026, 3, 8, 14, 1))
    assert announcement_jobs(again) == []
    assert again.at(utc(2026, 3, 8, 15)) == []
    assert len(posts(slack_stub)) == 4


def test_a_tokyo_window_reads_in_each_readers_zone_with_a_tokyo_and_utc_fallback(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    text = posts(slack_stub)[0]
    match = re.search(r"<!date\^(\d+)\^[^|]*\|([^>]*)>", text)
    assert match is not None
    instant = datetime.fromtimestamp(int(match.group(1)), UTC)
    assert instant == utc(2026, 12, 1, 5)
    assert match.group(2) == "2026-12-01 14:00 Asia/Tokyo (05:00 UTC)"
    # Slack shows the token in the reader's zone: 06:00 for a reader in Berlin (CET).
    assert instant.astimezone(BERLIN).strftime("%H:%M") == "06:00"
    times = [j.next_run_time for j in announcement_jobs(bot)]
    assert times == [utc(2026, 11, 30, 5), utc(2026, 12, 1, 4), utc(2026, 12, 1, 5)]
    assert [t.astimezone(TOKYO).strftime("%d %H:%M") for t in times] == ["30 14:00", "01 13:00", "01 14:00"]


def test_jobs_are_recreated_from_the_database_after_a_restart(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    first = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    first.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    before = [(j.id, j.next_run_time) for j in first.triggers.jobs()]
    first.triggers.shutdown()
    second = new_bot(bots, store, slack_stub, utc(2026, 11, 25))
    assert [(j.id, j.next_run_time) for j in second.triggers.jobs()] == before
    assert second.at(utc(2026, 11, 30, 5)) == ["sent"]
    assert len(posts(slack_stub)) == 2


def test_down_when_due_sends_marked_delayed_within_the_grace_and_skips_past_it(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    schedule, _ = bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    bot.triggers.shutdown()
    # Down over the T-24h reminder; back 20 minutes later: sent, marked delayed.
    late = new_bot(bots, store, slack_stub, utc(2026, 11, 30, 5, 20))
    text = posts(slack_stub)[-1]
    assert len(posts(slack_stub)) == 2
    assert text.startswith(":hourglass: _Delayed: this announcement was due")
    late.triggers.shutdown()
    # Down again over T-1h and the start; back 2 hours after the start: both are skipped, audited.
    gone = new_bot(bots, store, slack_stub, utc(2026, 12, 1, 7))
    assert len(posts(slack_stub)) == 2
    rows = store.scheduled_announcements(schedule_id=schedule.id)
    assert [(r.template, r.state, r.delayed) for r in rows] == [
        ("scheduled", "sent", False),
        ("reminder", "sent", True),
        ("reminder", "skipped", False),
        ("starting", "skipped", False),
    ]
    assert "after the window had opened" in rows[2].reason
    assert "past the grace of 30m" in rows[3].reason
    audited = [e for e in store.audit_entries() if e.kind == "announcement" and e.outcome == "skipped"]
    assert len(audited) == 2
    # Nothing left to post; the window (until 08:00 UTC) may still see its run start.
    assert announcement_jobs(gone) == []
    assert [j.id for j in gone.triggers.jobs()] == [f"{WINDOW_END}:{schedule.id}"]


def test_two_replicas_at_the_same_instant_post_once(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    # Replicas of one deployment: each knows the other is alive, so a claim of the other's
    # without a ts is a post in flight, not a dead process's to settle (without that, each took
    # the other for dead and both posted, 1 run in 75 on a busy machine).
    replicas: set[str] = set()
    one = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3), replicas=replicas)
    one.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    two = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3), replicas=replicas)
    due = utc(2026, 11, 30, 5)
    with ThreadPoolExecutor(2) as pool:
        results = [a for r in pool.map(lambda b: b.at(due), [one, two]) for a in r]
    # One posts; the other finds it claimed or already sent.
    assert results.count("sent") == 1
    assert set(results) <= {"sent", "done", "already_sent"}
    assert len(posts(slack_stub)) == 2


def test_a_due_job_that_a_sync_removed_meanwhile_is_passed_over(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    """A replica's own post sets off a sync (the announcements' listener); if another replica did
    one of the jobs still due here meanwhile, that sync removes it, and the loop passes over it
    instead of failing (the test above failed so, 2 runs in 25 on a busy machine)."""
    bot = Bot(store=store, stub=slack_stub, clock=FakeClock(utc(2026, 11, 20, 3)))
    bots.append(bot)
    due = utc(2026, 11, 30, 5)
    pending = {"a", "b"}
    fired: list[str] = []

    def fire(key: str, _now: datetime) -> Done:
        fired.append(key)
        pending.clear()  # "a" is done here, and another replica did "b" meanwhile
        bot.triggers.sync()
        return Done(kind="chore", key=key, action="sent")

    bot.triggers.add_durable(
        DurableKind(
            name="chore",
            pending=lambda: [Due(key=k, at=due) for k in sorted(pending)],
            fire=fire,
            catch_up=lambda _now: [],
        )
    )
    bot.start()
    assert [j.id for j in bot.triggers.jobs()] == ["chore:a", "chore:b"]
    done = bot.triggers.run_due(due)
    assert [(d.kind, d.key) for d in done if d.kind == "chore"] == [("chore", "a")]
    assert fired == ["a"]
    assert bot.triggers.jobs() == []


def _reminder_with_a_dead_claim(store: Store, bot: Bot) -> tuple[int, AnnouncementRow]:
    """A scheduled window whose reminder a killed bot claimed without recording a ts."""
    schedule, rows = bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    reminder = rows[1]
    # What a bot killed between claiming and recording the ts leaves behind: a claim without a
    # ts, owned by a process that is gone.
    assert store.claim_message(
        run_id=f"schedule:{schedule.id}",
        key=reminder.dedup_key,
        channel="C0ANNOUNCE",
        thread_ts="",
        at=utc(2026, 11, 30, 5),
        owner="4242-deadbeef",
    )
    return schedule.id, reminder


def test_a_post_slack_made_before_the_bot_died_is_found_and_never_repeated(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    schedule_id, reminder = _reminder_with_a_dead_claim(store, bot)
    # Slack had the post: the dead bot sent it with its key in the metadata, then died.
    made = SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)).post_message(
        "C0ANNOUNCE",
        "Reminder (posted before the crash)",
        dedup_key=f"schedule:{schedule_id}/{reminder.dedup_key}",
    )
    assert bot.at(utc(2026, 11, 30, 5)) == ["already_sent"]
    assert len(posts(slack_stub)) == 2  # the scheduled one, and the one from before the crash
    assert len(slack_stub.calls_to("conversations.history")) == 1
    row = store.scheduled_announcement(reminder.id)
    assert row is not None
    assert row.state == "sent"
    assert row.ts == made.ts


def test_a_claim_whose_post_never_reached_slack_is_posted_after_the_restart(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    _reminder_with_a_dead_claim(store, bot)
    assert bot.at(utc(2026, 11, 30, 5)) == ["sent"]
    texts = posts(slack_stub)
    assert len(texts) == 2
    assert "Reminder" in texts[1]
    assert len([m for m in slack_stub.posted("C0ANNOUNCE") if "Reminder" in m["text"]]) == 1


def test_a_failed_post_is_released_and_retried(store: Store, slack_stub: SlackStub, bots: list[Bot]) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    slack_stub.fail_next("chat.postMessage", error="channel_not_found")
    assert bot.at(utc(2026, 11, 30, 5)) == ["failed"]
    assert bot.at(utc(2026, 11, 30, 5, 1)) == ["sent"]
    ok = [c for c in slack_stub.calls_to("chat.postMessage") if c.response.get("ok")]
    assert len([c for c in ok if c.params["channel"] == "C0ANNOUNCE"]) == 2
    assert len([c for c in ok if c.params["channel"] == "U0COORD"]) == 1  # told of the failure, once


def test_an_announcement_the_bot_may_not_post_is_told_to_its_scheduler_once_and_skipped_saying_why(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 11, 20, 3))
    bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    # Nobody invited the bot to the announcement channel (the first day's usual mistake).
    slack_stub.fail_next(
        "chat.postMessage", error="not_in_channel", times=100, when=lambda p: p.get("channel") == "C0ANNOUNCE"
    )
    assert bot.at(utc(2026, 11, 30, 5)) == ["failed"]
    assert bot.at(utc(2026, 11, 30, 5, 1)) == ["failed"]
    told = [
        c.params["text"] for c in slack_stub.calls_to("chat.postMessage") if c.params["channel"] == "U0COORD"
    ]
    assert len(told) == 1, told  # once, not at every attempt
    assert "could not be posted in <#C0ANNOUNCE>: the bot is not in that channel" in told[0]
    # A Slack date each reader sees in their zone; the schedule's zone in the fallback.
    until = f"<!date^{int(utc(2026, 11, 30, 5, 30).timestamp())}^{{date_short_pretty}} {{time}}"
    assert f"It is tried again until {until}|2026-11-30 14:30 Asia/Tokyo>, then skipped" in told[0]
    (row,) = [a for a in store.scheduled_announcements() if a.due_at == utc(2026, 11, 30, 5)]
    assert row.state == "scheduled"
    assert row.reason.startswith("last attempt failed: the bot is not in that channel")
    # Past the grace it is skipped, and the reason is the channel, not only the lateness.
    assert bot.at(utc(2026, 11, 30, 5, 40)) == ["skipped"]
    row = store.scheduled_announcement(row.id)  # type: ignore[assignment]
    assert row is not None
    assert row.state == "skipped"
    assert "(last attempt failed: the bot is not in that channel" in row.reason


def test_the_end_of_a_scheduled_run_is_announced_once(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 12, 1, 4))
    schedule, _ = bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    runs = RunService(store=store, directory=StaticDirectory(), clock=bot.clock, listeners=(bot.service,))
    bot.clock.set(utc(2026, 12, 1, 5, 10))
    run = runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY")).run
    bot.service.attach_run(schedule.id, run.id)
    actor = Actor(user_id="U0COORD")
    runs.apply(
        run.id, lambda r: R.abort(r, by="U0COORD", reason="PDB blocks <drain>", now=bot.clock()), actor
    )
    aborted = posts(slack_stub)[-1]
    assert "PDB blocks &lt;drain&gt;" in aborted
    assert store.schedule(schedule.id).state == "aborted"  # type: ignore[union-attr]
    # A restart that finds the run ended does not announce it again.
    new_bot(bots, store, slack_stub, utc(2026, 12, 1, 5, 20))
    assert sum("PDB blocks" in t for t in posts(slack_stub)) == 1


def drive(runs: RunService, run_id: str, step_id: str, *users: str) -> R.Run:
    """Click approve on `step_id`'s open gate as each of `users`, in order; the run after."""
    for user in users:
        sr = runs.load(run_id).step_run(step_id)
        out = runs.click(R.ButtonRef(run_id=run_id, step_id=step_id, epoch=sr.epoch), Actor(user_id=user))
        assert out.accepted, out.message
    return runs.load(run_id)


def skip(runs: RunService, run_id: str, step_id: str, now: datetime) -> None:
    runs.apply(
        run_id,
        lambda r: R.skip(r, step_id=step_id, by="U0COORD", reason="test", now=now),
        Actor(user_id="U0COORD"),
    )


def step_posts(stub: SlackStub) -> list[str]:
    return [t for t in posts(stub) if t.startswith(":white_check_mark:")]


def test_a_step_that_asks_for_it_is_announced_once_when_it_succeeds_and_others_are_not(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 12, 1, 4))
    schedule, _ = bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    runs = RunService(store=store, directory=StaticDirectory(), clock=bot.clock, listeners=(bot.service,))
    bot.clock.set(utc(2026, 12, 1, 5, 10))
    run = runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY")).run
    bot.service.attach_run(schedule.id, run.id)
    skip(runs, run.id, "snapshot-pre", bot.clock())
    # `checks` has no `announce:`: it succeeds without a word in the announcement channel.
    checked = drive(runs, run.id, "checks", "U0PRIMARY", "U0SHADOW")
    assert checked.step_run("checks").state is R.StepState.SUCCEEDED
    assert step_posts(slack_stub) == []
    skip(runs, run.id, "announce-start", bot.clock())
    # `control-plane` says `announce: step-complete`: both gates, then "done".
    done = drive(runs, run.id, "control-plane", "U0PRIMARY", "U0SHADOW", "U0PRIMARY")
    assert done.step_run("control-plane").state is R.StepState.SUCCEEDED
    (text,) = step_posts(slack_stub)
    total = len(done.steps)
    assert f"step 4 of {total} done* — Upgrade the EKS control plane to 1.25" in text
    (call,) = [c for c in slack_stub.calls_to("chat.postMessage") if str(c.params["text"]) == text]
    assert call.params["channel"] == "C0ANNOUNCE"
    (row,) = [
        r for r in store.scheduled_announcements(schedule_id=schedule.id) if r.template == "step-complete"
    ]
    assert (row.step_id, row.state, row.dedup_key) == (
        "control-plane",
        "sent",
        f"run:{run.id}/step:control-plane/complete",
    )
    # The hook called again (a retried transition), and a restart: nothing more is posted.
    assert bot.service.step_succeeded(done, "control-plane") is None
    new_bot(bots, store, slack_stub, utc(2026, 12, 1, 5, 30))
    # The next step has no `announce:` either.
    drive(runs, run.id, "ng-control-plane", "U0PRIMARY", "U0SHADOW")
    assert len(step_posts(slack_stub)) == 1


def test_a_step_completed_while_the_hook_could_not_run_is_announced_at_restart_once(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    bot = new_bot(bots, store, slack_stub, utc(2026, 12, 1, 4))
    schedule, _ = bot.service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    # A bot killed right after committing the step, before storing its announcement: no hook ran.
    runs = RunService(store=store, directory=StaticDirectory(), clock=bot.clock)
    bot.clock.set(utc(2026, 12, 1, 5, 10))
    run = runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY")).run
    bot.service.attach_run(schedule.id, run.id)
    for step in ("snapshot-pre", "checks", "announce-start"):
        skip(runs, run.id, step, bot.clock())
    drive(runs, run.id, "control-plane", "U0PRIMARY", "U0SHADOW", "U0PRIMARY")
    assert step_posts(slack_stub) == []
    bot.triggers.shutdown()
    # Back ten minutes later: sent, marked delayed; a second restart posts nothing more.
    new_bot(bots, store, slack_stub, utc(2026, 12, 1, 5, 20))
    (text,) = [t for t in posts(slack_stub) if "Upgrade the EKS control plane" in t]
    assert text.startswith(":hourglass: _Delayed: this announcement was due")
    new_bot(bots, store, slack_stub, utc(2026, 12, 1, 5, 25))
    assert sum("Upgrade the EKS control plane" in t for t in posts(slack_stub)) == 1


def test_what_a_timer_writes_as_the_bot_carries_the_correlation_id_of_its_log_line(
    store: Store, slack_stub: SlackStub, bots: list[Bot], caplog: pytest.LogCaptureFixture
) -> None:
    install_filters(caplog.handler)  # the correlation id on each record, as the bot's handler has it
    caplog.set_level(logging.INFO)
    bot = new_bot(bots, store, slack_stub, utc(2026, 12, 1, 4))
    run = bot.runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY")).run
    bot.triggers._run_every(RUN_TICKER)  # as the scheduler runs it, on its thread
    # The plan's window (28 November) has ended: the ticker's row says so, as the bot.
    (row,) = [e for e in store.audit_entries(run_id=run.id) if e.subcommand == "window_ended"]
    assert row.user_id == "bot"
    assert row.correlation_id
    said = [
        r.getMessage() for r in caplog.records if getattr(r, "correlation_id", None) == row.correlation_id
    ]
    assert said == [f"{RUN_TICKER}: ticked {run.id}: window_ended"]


def escalations(store: Store) -> int:
    return sum(e.subcommand == "escalated" for e in store.audit_entries())


def test_the_run_ticker_runs_when_its_interval_comes_due_once_for_the_intervals_it_missed(
    store: Store, slack_stub: SlackStub, bots: list[Bot]
) -> None:
    start = utc(2026, 12, 1, 4)
    bot = new_bot(bots, store, slack_stub, start)
    run = bot.runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY")).run

    def tick(moment: datetime) -> list[str]:
        bot.clock.set(moment)
        return [d.detail for d in bot.triggers.run_due(moment) if d.kind == RUN_TICKER]

    # At once when the bot starts (a run that moved while it was down goes on), then every 20 s.
    # The plan's window (28 November) has ended: the first tick says so, once.
    assert tick(start) == [f"{run.id}: window_ended"]
    assert tick(start + timedelta(seconds=19)) == []
    assert tick(start + timedelta(seconds=20)) == [""]  # due, with nothing to escalate yet
    # The plan escalates after 15 minutes: the 44 ticks missed since run as one, which escalates.
    ((detail,),) = [tick(start + timedelta(minutes=15))]
    assert detail.endswith(": escalated")
    assert escalations(store) == 1
    # The next tick is on the original 20 s grid, after the instant it was coalesced at.
    assert tick(start + timedelta(minutes=15, seconds=19)) == []
    assert tick(start + timedelta(minutes=15, seconds=20)) == [""]
    assert escalations(store) == 1


def test_started_unpaused_the_run_ticker_runs_on_its_own_thread(store: Store, slack_stub: SlackStub) -> None:
    clock = FakeClock(datetime.now(UTC))
    service = AnnouncementService(store=store, clock=clock)
    runs = RunService(store=store, directory=StaticDirectory(), clock=clock)
    triggers = Triggers(announcements=service, runs=runs, clock=clock, tick_seconds=0.1)
    triggers.start()
    try:
        runs.start("eks-nodegroups", Actor(user_id="U0PRIMARY"))
        # The run service is told 16 minutes passed; APScheduler's thread ticks in real time.
        clock.advance(timedelta(minutes=16))
        wait_until(lambda: escalations(store) == 1, timeout=10, what="the ticker to escalate the gate")
    finally:
        triggers.shutdown()


def test_a_bot_stopped_while_a_job_lists_the_jobs_waits_for_it_and_stops(
    store: Store, slack_stub: SlackStub
) -> None:
    """SIGTERM while one of the scheduler's jobs runs and lists the jobs (as a sync does): the bot
    waits for the job, then stops. APScheduler's own wait held the lock that listing needs, and a
    replica that took the lead as it was stopping hung there until it was killed."""
    started, go = threading.Event(), threading.Event()
    triggers: list[Triggers] = []

    def job(_now: datetime) -> None:
        if started.is_set():
            return
        started.set()
        go.wait(10)
        triggers[0].sync()

    now = lambda: datetime.now(UTC)  # noqa: E731 - the scheduler's thread runs the timer for real
    service = AnnouncementService(
        store=store,
        clock=now,
        poster=SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)),
        channel="C0ANNOUNCE",
    )
    runs = RunService(store=store, directory=StaticDirectory(), clock=now)
    triggers.append(Triggers(announcements=service, runs=runs, clock=now, timers=[("slow", 0.05, job)]))
    triggers[0].start()
    assert started.wait(10), "the timer never ran"
    stopper = threading.Thread(target=triggers[0].shutdown, daemon=True)
    stopper.start()
    time.sleep(0.3)  # the stop is under way (nothing to wait on: it waits for the job)
    go.set()
    stopper.join(15)
    assert not stopper.is_alive(), "the bot did not stop: its shutdown waits for a job that waits for it"
