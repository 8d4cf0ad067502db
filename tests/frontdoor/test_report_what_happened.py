"""The run report tells what happened to the nodes and to the people, not only to the steps: the
nodes a drain left cordoned when the run was aborted and people's answer to the offer to uncordon
them; the roster as it was handed on; the pauses people made (not time spent waiting for people);
and a skip two people voted, by both. The runs are driven through the run service and the job
service on a real store, posting to the loopback Slack stub, and the report built from the store."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import SlackDirectory, SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext
from bot.core.delivery import Deliveries
from bot.core.jobs.base import JobRegistry, Progress, Tick
from bot.core.jobs.service import AFTER_ABORT, JobService
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.capabilities import AfterAbortOffer, StepLongActions
from bot.core.runs.cards import RunCards
from bot.core.runs.handoffs import handoff
from bot.core.runs.report import build_report, render
from bot.core.runs.service import Actor, RunService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PEOPLE = {"U0PRIMARY": "Priya", "U0SHADOW": "Sam Shadow", "U0COORD": "Cora", "U0NIA": "Nia"}
PLAN = """\
name: roll
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [U0COORD]
steps:
  - id: prepare
    title: Prepare
    gate: {approve: [primary, shadow]}
    done: {any_of: [primary, shadow]}
  - id: drain-old
    title: Drain the old nodes
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-shared, version: "1.30.1"}}]
"""
NODES = ("ip-10-0-2-1", "ip-10-0-2-2", "ip-10-0-2-3")


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ShapedDrain:
    """A drain whose stored progress has the real drain's shape (`bot.core.jobs.drain`: `order`,
    `cordoned`, each node's state and times): it cordons the first node and starts draining it,
    then waits (the abort comes meanwhile)."""

    clock: FakeClock
    kind: str = "drain"
    #: Set: the drain ends at its second tick, the last node skipped by people, leaving this.
    leaving: str = ""
    #: Who skipped the last node and why, as the real drain keeps it (`skip`).
    skip: Mapping[str, str] | None = None

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        return {"order": list(NODES), "cordoned": [], "nodes": {n: {"state": "pending"} for n in NODES}}

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        return []

    def tick(self, cluster: Any, progress: Progress, *, now: datetime, decision: Any = None) -> Tick:
        first = progress["nodes"][NODES[0]]
        if first["state"] == "pending":
            first.update(state="draining", cordoned_at=_iso(now), began=_iso(now))
            progress["cordoned"] = [NODES[0]]
        elif self.leaving:
            for name in NODES:
                state = "skipped" if name == NODES[-1] else "done"
                progress["nodes"][name].update(
                    state=state, cordoned_at=_iso(now), began=_iso(now), ended=_iso(now)
                )
                if state == "skipped" and self.skip is not None:
                    progress["nodes"][name]["skip"] = dict(self.skip)
            return Tick(progress=progress, done=True, ok=True, detail="2/3 drained", left_behind=self.leaving)
        return Tick(progress=progress, wait=30)


@dataclass
class Uncordon:
    kind: str = "uncordon"

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        return {"todo": args["node"].split(","), "uncordoned": []}

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        return []

    def tick(self, cluster: Any, progress: Progress, *, now: datetime, decision: Any = None) -> Tick:
        progress["uncordoned"] = list(progress["todo"])
        return Tick(progress=progress, done=True, ok=True, detail="uncordoned")


class StillCordoned:
    """The cluster as the offer reads it: every node asked about still cordoned."""

    def get_json(self, path: str, query: object = None) -> dict[str, Any]:
        return {"metadata": {"name": path.rsplit("/", 1)[-1]}, "spec": {"unschedulable": True}}


@dataclass
class World:
    store: Store
    clock: FakeClock
    runs: RunService
    jobs: JobService
    stub: SlackStub

    def as_(self, who: str, change: Any) -> R.Run:
        return self.runs.apply(self.run_id, change, Actor(user_id=who)).run

    run_id: str = ""

    def click(self, step: str, who: str, decision: str = "approve", reason: str = "") -> None:
        sr = self.runs.load(self.run_id).step_run(step)
        ref = R.ButtonRef(run_id=self.run_id, step_id=step, epoch=sr.epoch, decision=decision)
        if decision == "skip":
            out = self.runs.paused_click(ref, Actor(user_id=who), reason=reason)
        else:
            out = self.runs.click(ref, Actor(user_id=who), reason=reason)
        assert not out.message or "refused" not in out.message, out.message

    def report(self, fmt: str) -> str:
        directory = SlackDirectory(make_web_client(BOT_TOKEN, self.stub.api_url))
        return render(
            build_report(self.store, self.run_id, now=self.clock(), directory=directory), fmt
        ).decode()


@pytest.fixture
def world(tmp_path: Path, slack_stub: SlackStub) -> Iterator[World]:
    for user, name in PEOPLE.items():
        slack_stub.users[user] = {"id": user, "name": name.lower(), "profile": {"display_name": name}}
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="roll", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    clock = FakeClock(T0)
    deliveries = Deliveries(
        store=store,
        poster=SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)),
        clock=clock,
        owner="proc-a",
    )
    jobs = JobService(
        store=store,
        registry=JobRegistry(jobs={"drain": ShapedDrain(clock), "uncordon": Uncordon()}),
        deliveries=deliveries,
        directory=StaticDirectory(),
        clock=clock,
        owner="proc-a",
        steps=lambda: runs,
    )
    runs = RunService(
        store=store,
        directory=StaticDirectory(),
        clock=clock,
        cards=RunCards(
            deliveries=deliveries,
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
            live=jobs.live_sections,
        ),
        actions=default_registry(),
        action_context=ActionContext(
            take_snapshot=lambda *_: None,
            compare_snapshots=lambda *_: None,
            start_job=lambda request: jobs.start(request, cluster=request.cluster),
        ),
        long_actions=StepLongActions(store, jobs),
        listeners=(AfterAbortOffer(jobs),),
    )
    w = World(store=store, clock=clock, runs=runs, jobs=jobs, stub=slack_stub)
    w.run_id = runs.start("roll", Actor(user_id="U0PRIMARY")).run.id
    yield w
    store.close()


def _to_the_drain(w: World) -> None:
    w.click("prepare", "U0PRIMARY")
    w.click("prepare", "U0SHADOW")
    w.clock.advance(timedelta(minutes=5))
    w.click("prepare", "U0PRIMARY")  # done
    w.clock.advance(timedelta(minutes=2))
    w.click("drain-old", "U0PRIMARY")
    w.click("drain-old", "U0SHADOW")


def test_nodes_left_cordoned_after_an_abort_are_in_the_findings_the_node_table_and_the_json(
    world: World,
) -> None:
    w = world
    _to_the_drain(w)
    (drain,) = [j for j in w.store.jobs() if j.kind == "drain"]
    assert w.jobs.claim(drain)
    w.clock.advance(timedelta(minutes=1))
    w.jobs.advance(drain.id, cluster=None)  # plan
    w.jobs.advance(drain.id, cluster=None)  # the first node cordoned, draining
    w.clock.advance(timedelta(minutes=4))
    w.as_("U0PRIMARY", lambda r: R.abort(r, by="U0PRIMARY", reason="rollback", now=w.clock()))
    w.jobs.advance(drain.id, cluster=None)  # the abort stops the drain
    (offer,) = [j for j in w.store.jobs(states=("live",)) if j.step_id == AFTER_ABORT]
    assert w.jobs.claim(offer)
    assert w.jobs.advance(offer.id, cluster=StillCordoned()).waiting_for_people

    md = w.report("md")
    assert (
        "1 node(s) the run cordoned are still cordoned after the abort; the offer to uncordon them is "
        "not answered yet: ip-10-0-2-1" in md
    )
    assert "| ip-10-0-2-1 | cordoned (its drain stopped by the abort; not answered yet) |" in md

    w.clock.advance(timedelta(minutes=3))
    w.jobs.decide(
        offer.id,
        choice_key="abort-uncordon",
        option="leave",
        user_id="U0COORD",
        reason="the cloud replaces them",
    )
    assert w.jobs.advance(offer.id, cluster=StillCordoned()).done
    md = w.report("md")
    assert (
        "- 1 node(s) left cordoned after the abort, by @Cora's answer: the cloud replaces them (ip-10-0-2-1)"
        in md
    )
    assert "| ip-10-0-2-1 | cordoned (its drain stopped by the abort; left cordoned) |" in md
    assert "draining" not in md.split("## Nodes")[1].split("## Unhealthy pods")[0]
    data = json.loads(w.report("json"))
    (node,) = [n for n in data["nodes"] if n["name"] == "ip-10-0-2-1"]
    assert (node["state"], node["after_abort"]) == ("cordoned", "left cordoned")
    assert node["stopped_at"] == "2026-11-28T13:12:00Z"
    assert data["after_abort"] == {
        "nodes": ["ip-10-0-2-1"],
        "answer": "left cordoned",
        "by": "U0COORD",
        "reason": "the cloud replaces them",
        "at": "2026-11-28T13:15:00Z",
    }
    html = w.report("html")
    assert "cordoned (its drain stopped by the abort; left cordoned)" in html
    assert "left cordoned after the abort, by @Cora's answer: the cloud replaces them (ip-10-0-2-1)" in html


def test_hand_offs_pauses_and_a_skip_two_people_voted_are_in_the_report(world: World) -> None:
    w = world
    w.clock.advance(timedelta(minutes=3))
    w.as_("U0PRIMARY", lambda r: handoff(r, role="primary", user_id="U0NIA", by="U0PRIMARY", now=w.clock()))
    w.clock.advance(timedelta(minutes=2))
    w.as_("U0COORD", lambda r: R.pause(r, by="U0COORD", reason="overnight: resume at 08:00", now=w.clock()))
    w.clock.advance(timedelta(hours=10))
    w.as_("U0NIA", lambda r: R.resume(r, by="U0NIA", now=w.clock(), reason="morning"))
    w.clock.advance(timedelta(minutes=4))
    w.click("prepare", "U0NIA")
    w.click("prepare", "U0SHADOW")
    w.clock.advance(timedelta(minutes=5))
    w.click("prepare", "U0NIA", decision="reject", reason="the PDBs are wrong")  # done: failed
    w.clock.advance(timedelta(minutes=6))
    w.click("prepare", "U0NIA", decision="skip", reason="PDBs fixed by hand")
    w.click("prepare", "U0SHADOW", decision="skip", reason="checked in the console")

    md = w.report("md")
    assert "- **Roster**: coordinator: @Cora; primary: @Nia; shadow: @Sam Shadow" in md
    assert "- **Hand-offs**: primary: @Priya → @Nia at 2026-11-28 13:03:00 UTC (by @Priya)" in md
    assert (
        "- **Paused**: 1 time(s), 10h00m in all, not counted as waiting for people: "
        "2026-11-28 13:05:00 UTC – 2026-11-28 23:05:00 UTC by @Cora, resumed by @Nia" in md
    )
    assert "2026-11-28 13:03:00 UTC primary handed to @Nia from @Priya by @Priya" in md
    assert (
        "2026-11-28 13:05:00 UTC paused by @Cora (overnight: resume at 08:00); resumed by @Nia (morning) "
        "at 2026-11-28 23:05:00 UTC" in md
    )
    assert (
        "- prepare failed and was skipped by @Nia and @Sam Shadow (PDBs fixed by hand; checked in the console): "
        "reported failed by @Nia: the PDBs are wrong\n" in md
    )
    assert "- prepare: skipped by @Nia and @Sam Shadow: PDBs fixed by hand; checked in the console" in md
    assert "U0NIA+U0SHADOW" not in md.split("## Audit excerpt")[0]
    assert "paused by people" in md  # the Gantt's span
    data = json.loads(w.report("json"))
    (step,) = [s for s in data["steps"] if s["step_id"] == "prepare"]
    # The 10 hours paused are not 10 hours of people being slow.
    assert step["paused_seconds"] == 36000
    assert step["waiting_seconds"] < 3600
    assert data["pauses"] == [
        {
            "at": "2026-11-28T13:05:00Z",
            "by": "U0COORD",
            "reason": "overnight: resume at 08:00",
            "until": "2026-11-28T23:05:00Z",
            "resumed_by": "U0NIA",
            "resume_reason": "morning",
        }
    ]
    assert data["handoffs"] == [
        {
            "at": "2026-11-28T13:03:00Z",
            "role": "primary",
            "to": "U0NIA",
            "by": "U0PRIMARY",
            "was": ["U0PRIMARY"],
            "beside": "",
        }
    ]
    html = w.report("html")
    assert "<th>paused</th>" in html
    assert "by @Nia and @Sam Shadow" in html


def test_a_drain_that_completed_leaving_a_node_cordoned_says_so_in_the_findings(world: World) -> None:
    w = world
    drains = w.jobs.registry.jobs["drain"]
    assert isinstance(drains, ShapedDrain)
    drains.leaving = "1 node(s) skipped, still cordoned: ip-10-0-2-3"
    drains.skip = {
        "by": "U0PRIMARY",
        "reason": "its PDB is the payments team's; they fix it after the window",
    }
    _to_the_drain(w)
    (drain,) = [j for j in w.store.jobs() if j.kind == "drain"]
    assert w.jobs.claim(drain)
    for _ in range(4):
        w.clock.advance(timedelta(minutes=1))
        if w.jobs.advance(drain.id, cluster=None).done:
            break
    md = w.report("md")
    assert "- drain-old succeeded, leaving for people: 1 node(s) skipped, still cordoned: ip-10-0-2-3\n" in md
    # Who left it cordoned, by name, and why: it read "skipped by people", no one and no reason.
    assert (
        "- ip-10-0-2-3: skipped by @Priya (its PDB is the payments team's; they fix it after the window); "
        "it stays cordoned\n" in md
    )
