"""Silences as leases: a drain step's `silence:` held in the sim's Alertmanager facade through the
real adapter — created only after the first healthy check with `createdBy upgrade-bot/RUN/STEP`,
re-extended to now+25m keeping its id, cut to a 5-minute tail when the step pauses or ends or the
job is interrupted (a restart, an abort), never past `max`, adopted by id by a job that resumes
from its stored progress, and an Alertmanager error that never blocks the drain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.core.evidence.leases import HOLD, TAIL
from bot.core.evidence.matchers import parse_matcher
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.background import BACKGROUND_ARG, SILENCE_ARG
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.trail import TRAIL, make_trail
from bot.core.runs.plans import parse_plan
from bot.core.tenure import Tenure, guard_silences
from bot.errors import PlanInvalid
from bot.records import SignalSource
from bot.sim.cluster import SimCluster
from tests.support.clock import FakeMonotonic
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import node, pod

# Tomorrow, never a fixed date: the sim's clock only moves forward from the real time it starts
# at, so a T0 that has passed cannot be jumped to (this test failed once its date went by).
T0 = (datetime.now(UTC) + timedelta(days=1)).replace(hour=14, minute=2, second=0, microsecond=0)
LABELS = ("eks.amazonaws.com/nodegroup",)
ALERTS = '[{"name": "alerts", "args": {}}]'


class Clock:
    """The bot's clock, and the sim's with it (its Alertmanager facade judges silences by it)."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        sim.clock.set_speed(0.0)
        self.now = T0

    @property
    def now(self) -> datetime:
        return self._now

    @now.setter
    def now(self, value: datetime) -> None:
        self._now = value
        self.sim.clock.jump_to(value.timestamp())
        assert self.sim.clock.now() == value.timestamp(), "the sim's clock never goes back"

    def __call__(self) -> datetime:
        return self._now


class NamedCluster(FakeCluster):
    name = "prod"


def _setup(
    sim: SimCluster, *, max_: str = "4h", tenure: Tenure | None = None
) -> tuple[JobDriver, NamedCluster, Clock, Alertmanager]:
    am = Alertmanager(SignalSource(url=f"{sim.url}/alertmanager"))
    # As `assemble` builds it: the silence writes made only while this replica leads.
    source = am if tenure is None else guard_silences(am, tenure, timeout=tenure.fit(10.0))
    evidence = Evidence({"prod": (source, (parse_matcher('cluster="prod"'),))})
    job = default_jobs(LABELS, evidence=evidence).get("drain")
    assert job is not None
    fake = NamedCluster(
        nodes=[node(n, "workers") for n in ("n1", "n2")],
        pods=[pod("shop", f"web-{n}", owner=("ReplicaSet", "web-5d8f"), node_name=n) for n in ("n1", "n2")],
    )
    clock = Clock(sim.sim)
    silence = '{"matchers": ["alertname=~\\"KubeNode.*\\""], "max": "' + max_ + '"}'
    driver = JobDriver(
        job, fake, {"nodegroup": "workers", BACKGROUND_ARG: ALERTS, SILENCE_ARG: silence}, now=clock
    )
    # As the job service adds it after planning: who and why.
    driver.progress[TRAIL] = make_trail(run_id="R1", step_id="drain-ng-1", job_id=7, approved_by=["U1"])
    return driver, fake, clock, am


def _lease(driver: JobDriver) -> dict[str, Any]:
    lease: dict[str, Any] = driver.progress["background"]["silence"]
    return lease


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_lease_is_held_extended_cut_to_its_tail_and_never_past_max(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    driver, fake, clock, am = _setup(sim_small, max_="40m")
    assert _lease(driver)["id"] is None  # planned: no check has run yet
    driver.tick()  # the first healthy check
    lease = _lease(driver)
    assert lease["id"] is not None
    assert lease["created_by"] == "upgrade-bot/R1/drain-ng-1"
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert (held.created_by, held.state) == ("upgrade-bot/R1/drain-ng-1", "active")
    assert held.starts_at == T0
    assert held.ends_at == T0 + HOLD
    first_id = lease["id"]
    clock.now += timedelta(minutes=3)
    driver.tick()
    assert _lease(driver)["id"] == first_id  # re-extended, the same silence
    assert _at(_lease(driver)["ends_at"]) == clock.now + HOLD
    # Never past max (40m from its start): 30 minutes on, it is extended only up to T0+40m.
    for minutes in (10, 20, 30):
        clock.now = T0 + timedelta(minutes=minutes)
        driver.tick()
    assert _at(_lease(driver)["ends_at"]) == T0 + timedelta(minutes=40)
    [held] = [s for s in am.silences() if s.id == first_id]
    assert held.ends_at == T0 + timedelta(minutes=40)
    # A new alert the silence matches: Alertmanager suppresses it by the run's silence, the gate
    # counts it as new (silenced by this run), and the drain pauses before n2, the lease cut.
    sim_small.sim.evidence.fire(
        {"alertname": "KubeNodeNotReady", "cluster": "prod"}, (clock.now + timedelta(seconds=1)).timestamp()
    )
    clock.now += timedelta(seconds=20)
    fake.finish("shop/web-n1")
    driver.run(max_wait=0.0)
    assert driver.choice is not None
    assert "new alert KubeNodeNotReady started firing" in driver.choice.question
    [alert] = [
        a
        for a in sim_small.sim.evidence.gettable_alerts(
            {"active": True, "silenced": True, "inhibited": True, "unprocessed": True}, []
        )
        if a["labels"]["alertname"] == "KubeNodeNotReady"
    ]
    assert alert["status"]["silencedBy"] == [first_id]
    seen = driver.progress["background"]["checks"][0]["state"]["seen"]
    assert (seen["new"], seen["silenced_by_run"]) == (1, 1)
    assert _at(_lease(driver)["ends_at"]) == clock.now + TAIL
    # Abort: the step ends; the lease is no longer than its tail.
    driver.tick(Decision(choice_key=driver.choice.key, option="abort", by="U1"))
    assert driver.done
    [held] = [s for s in am.silences() if s.id == first_id]
    assert held.ends_at <= clock.now + TAIL


def test_an_interrupted_job_cuts_its_lease_and_a_resumed_one_adopts_it_by_id(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    driver, _fake, clock, am = _setup(sim_small)
    driver.tick()
    held_id = _lease(driver)["id"]
    # The bot is killed; the new leader interrupts the stale job (JobService.interrupt calls the
    # job's `release` with its stored progress): only the tail is left.
    clock.now += timedelta(minutes=2)
    driver.job.release(NamedCluster(), driver.progress, now=clock.now)  # type: ignore[attr-defined]
    [held] = [s for s in am.silences() if s.id == held_id]
    assert held.ends_at == clock.now + TAIL
    # People resume the step: the same job from its stored progress holds the SAME silence again.
    clock.now += timedelta(minutes=1)
    driver.tick()
    assert _lease(driver)["id"] == held_id
    [held] = [s for s in am.silences() if s.id == held_id]
    assert held.ends_at == clock.now + HOLD


def test_an_alertmanager_error_never_blocks_the_drain_and_the_gate_shows_it(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    driver, _fake, clock, _am = _setup(sim_small)
    driver.tick()
    # Alertmanager refuses writes from here on (and reads: the background check asks people).
    sim_small.sim.evidence.alertmanager_mode = "401"
    clock.now += timedelta(minutes=3)
    lease = _lease(driver)
    from bot.core.evidence import leases

    kept = leases.hold(_am, lease, now=clock.now, healthy=True, created_by=lease["created_by"])
    assert kept["id"] == lease["id"]
    assert kept["error"] == "Alertmanager refused the bot's credentials (HTTP 401)"
    assert leases.line(kept) == (
        "Silence: Alertmanager error — Alertmanager refused the bot's credentials (HTTP 401) (the step goes on)"
    )


def test_the_lease_line_says_until_when_in_utc_and_no_time_it_does_not_know() -> None:
    from bot.core.evidence import leases

    held = {"id": "s1", "ends_at": "2026-11-29T14:27:00Z", "error": "", "spent": False}
    assert leases.line(held) == "Silence s1 held until 14:27 UTC"
    # No stored end (never the case once put): no time at all, not the wall clock's.
    assert leases.line({**held, "ends_at": None}) == "Silence s1 held"


PLAN = """\
name: bg
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T22:00", end: "2026-11-30T02:00", timezone: UTC}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: drain
    title: Drain
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: workers}}]
    background: [alerts]
    silence: {matchers: ['alertname=~"KubeNode.*"'], max: 2h}
"""


def test_the_plan_loader_carries_the_silence_and_refuses_a_bad_one() -> None:
    step = parse_plan(PLAN).step("drain")
    assert step.actions[0].args[SILENCE_ARG] == '{"matchers": ["alertname=~\\"KubeNode.*\\""], "max": "2h"}'
    with pytest.raises(PlanInvalid, match="needs a background: check"):
        parse_plan(PLAN.replace("    background: [alerts]\n", ""))
    with pytest.raises(PlanInvalid, match="is not a matcher like"):
        parse_plan(PLAN.replace("alertname=~", "alertname=="))
    with pytest.raises(PlanInvalid, match="max must be longer than 0 and at most 7d"):
        parse_plan(PLAN.replace("max: 2h", "max: 30d"))


def test_a_replica_that_no_longer_leads_puts_no_silence_and_the_drain_goes_on(sim_small: SimCluster) -> None:
    """Issue 38: every side effect is checked against this replica's own lease — the silence too.
    A replica whose lease says it no longer leads (paused past its lease, a successor elected)
    neither creates nor extends the silence; the lease records why, the step is not blocked."""
    assert sim_small.sim is not None
    monotonic = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=monotonic, room=10.0)
    tenure.renewed(started=100.0, finished=100.1, duration=timedelta(seconds=15), leading=False)
    driver, fake, clock, am = _setup(sim_small, tenure=tenure)
    driver.tick()  # the first healthy check: the silence would be created now
    lease = _lease(driver)
    assert lease["id"] is None
    assert "silence not changed" in lease["error"]
    assert "does not lead" in lease["error"]
    assert [s for s in am.silences() if s.created_by.startswith("upgrade-bot/")] == []
    # The same replica leading again (its next renewal) holds the silence as usual.
    tenure.renewed(started=100.2, finished=100.3, duration=timedelta(seconds=15), leading=True)
    clock.now += timedelta(minutes=1)
    driver.tick()
    lease = _lease(driver)
    assert lease["id"] is not None
    assert lease["error"] == ""
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert held.created_by == "upgrade-bot/R1/drain-ng-1"
    fake.finish("shop/web-n1")
    fake.finish("shop/web-n2")
    driver.run(max_wait=0.0)
    assert driver.choice is None
    assert driver.done


def test_a_silence_put_just_before_the_bot_died_is_found_by_its_created_by_cut_or_adopted(
    sim_small: SimCluster,
) -> None:
    # The bot is killed after Alertmanager answered the first put and before the job's progress
    # (with the silence's id) was saved: a crashed tick, whose progress is not stored.
    assert sim_small.sim is not None
    driver, _fake, clock, am = _setup(sim_small)
    driver.tick(crash=True)
    assert _lease(driver)["id"] is None
    [put] = [s for s in am.silences() if s.created_by == "upgrade-bot/R1/drain-ng-1"]
    # The new leader interrupts the stale job from what was stored: the silence is found by its
    # createdBy and cut to its tail, not left to run its 25 minutes.
    clock.now += timedelta(minutes=2)
    released = driver.job.release(NamedCluster(), driver.progress, now=clock.now)  # type: ignore[attr-defined]
    assert released["background"]["silence"]["id"] == put.id
    [held] = [s for s in am.silences() if s.id == put.id]
    assert held.ends_at == clock.now + TAIL
    # People resume the step from the same stored progress: it holds that silence again, and
    # Alertmanager has no second one of this step.
    clock.now += timedelta(minutes=1)
    driver.tick()
    assert _lease(driver)["id"] == put.id
    ours = [s for s in am.silences() if s.created_by == "upgrade-bot/R1/drain-ng-1" and s.state == "active"]
    assert [s.id for s in ours] == [put.id]
    assert ours[0].ends_at == clock.now + HOLD
