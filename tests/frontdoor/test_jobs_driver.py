"""The cluster-job service and its driver, with a job of the test's own (the `Job` protocol is the
bot's own interface) over a real SQLite store and the Slack stub: the approval only stores the job,
the driver advances it into the run's thread and card, a driver that dies leaves the step
interrupted, `resume` continues the SAME job from its stored progress (each write once), people
answer its question only in the roles it names, and `abort` offers to uncordon what was cordoned."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext
from bot.core.delivery import DEAD_AFTER, DEAD_AFTER_FAILURES, Deliveries, failure_reason
from bot.core.duties import Duties, Lane
from bot.core.jobs.base import Choice, ChoiceOption, Decision, JobRegistry, Progress, Tick
from bot.core.jobs.common import RESUMED_AT, iso
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.service import AFTER_ABORT, RETRY_SECONDS, JobService, choice_json, choice_of
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.capabilities import AfterAbortOffer, StepLongActions
from bot.core.runs.cards import RunCards
from bot.core.runs.paused import ending
from bot.core.runs.plans import parse_plan
from bot.core.runs.service import Actor, RunService
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.errors import (
    POISON_ATTEMPTS,
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    PlanInvalid,
    SlackCallFailed,
    SlackOutcomeUnknown,
    TemporaryError,
    UserError,
    describe,
)
from bot.frontdoor.acting import JOBS, JobDuty
from bot.frontdoor.metrics import Metrics
from bot.frontdoor.rehearse import exit_status, last_line
from bot.logsetup import correlation, install_filters
from bot.records import JobRow, StepState
from bot.resources import BUILTIN_TEMPLATES
from tests.support import blockkit, kube_objects
from tests.support.bot_process import bot_command
from tests.support.clock import FakeClock
from tests.support.jobs import FakeCluster
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
OPS = "C0OPS"
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
  - id: drain-old
    title: Drain the old nodes
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-shared, version: "1.30.1"}}]
  - id: after
    title: After
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
"""


@dataclass
class World:
    """What the fake job's writes did to 'the cluster': each node cordoned and drained, counted."""

    writes: list[str] = field(default_factory=list)
    cordoned: set[str] = field(default_factory=set)
    drained: set[str] = field(default_factory=set)


class FakeDrain:
    """A drain of three nodes keeping the contract's rule: intent stored first, then the write,
    and a write is issued only when its effect is absent. Node n2 asks people once."""

    kind = "drain"

    def __init__(
        self,
        world: World,
        *,
        ask_on: str = "",
        failures: list[Exception] | None = None,
        left_behind: str = "",
    ) -> None:
        self.world = world
        self.ask_on = ask_on
        #: What its end leaves for people (a node people chose to skip, still cordoned).
        self.left_behind = left_behind
        #: What the next ticks raise, one each (a bug a node's state triggers, the cluster away).
        self.failures = failures if failures is not None else []

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        if args.get("nodegroup") == "missing":
            raise UserError("no node group missing")
        if args.get("nodegroup") == "read-only":
            # What the kube adapter raises when the act role is not bound (RBAC proven in testbed).
            raise ClusterForbidden(
                "cluster prod: the bot is not allowed to PATCH /api/v1/nodes/n1 (forbidden)", status=403
            )
        return {"nodes": dict.fromkeys(("n1", "n2", "n3"), "pending"), "cordoned": []}

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        return [f"cordon and drain {n}" for n in progress["nodes"]]

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        nodes: dict[str, str] = progress["nodes"]
        if self.failures:
            raise self.failures.pop(0)
        for name, state in nodes.items():
            if state == "pending":
                nodes[name] = "draining"  # intent, stored before the write
                return Tick(progress=progress, wait=0)
            if state == "draining":
                if name == self.ask_on and decision is None and not progress.get("asked"):
                    progress["asked"] = True
                    return Tick(
                        progress=progress,
                        choice=Choice(
                            key=f"drain-timeout:{name}:1",
                            # As a cloud job asks a second person (`bot.core.jobs.cloud`): by id.
                            question=f"{name} is not drained after 15m; U0SHADOW asks to delete its pods",
                            options=(
                                ChoiceOption(id="wait", label="Wait longer"),
                                ChoiceOption(
                                    id="delete",
                                    label="Delete",
                                    roles=("coordinator",),
                                    needs_reason=True,
                                    not_by=("U0SHADOW",),
                                ),
                            ),
                        ),
                    )
                if name not in self.world.drained:  # the effect is absent: write now
                    self.world.writes.append(name)
                    self.world.cordoned.add(name)
                    self.world.drained.add(name)
                nodes[name] = "done"
                progress["cordoned"] = sorted(set(progress["cordoned"]) | {name})
                extra = (f"{decision.option} by {decision.by}",) if decision else ()
                return Tick(
                    progress=progress,
                    posts=(type(self)._post(name),),
                    audit=(("drain", f"node {name}: drained {' '.join(extra)}".strip()),),
                    card=(f"{sum(s == 'done' for s in nodes.values())}/3 nodes drained",),
                    wait=0,
                )
        return Tick(
            progress=progress, done=True, ok=True, detail="3/3 nodes drained", left_behind=self.left_behind
        )

    @staticmethod
    def _post(name: str) -> Any:
        from bot.core.jobs.base import Post

        return Post(key=f"drained:{name}", text=f"{name} drained")


class FakeUncordon:
    """Uncordons the nodes it is given, one per tick, each once."""

    kind = "uncordon"

    def __init__(self, world: World) -> None:
        self.world = world

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        return {"todo": args["node"].split(","), "uncordoned": []}

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        return [f"uncordon {n}" for n in progress["todo"]]

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        left = [n for n in progress["todo"] if n not in progress["uncordoned"]]
        if not left:
            return Tick(progress=progress, done=True, ok=True, detail="uncordoned")
        if left[0] in self.world.cordoned:
            self.world.cordoned.discard(left[0])
            self.world.writes.append(f"uncordon {left[0]}")
        progress["uncordoned"].append(left[0])
        return Tick(progress=progress, wait=0)


@dataclass
class Setup:
    store: Store
    runs: RunService
    clock: FakeClock
    stub: SlackStub
    world: World
    tmp: Path

    def jobs(
        self,
        owner: str,
        *,
        ask_on: str = "",
        duties: Duties | None = None,
        failures: list[Exception] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        dead_after_failures: int = DEAD_AFTER_FAILURES,
        dead_after: timedelta = DEAD_AFTER,
        sdk_retries: bool = True,
        left_behind: str = "",
        drain: Any = None,
    ) -> JobService:
        """A JobService as one process would have it (`owner`), bound to a fresh RunService (as
        `bot.frontdoor.assemble` binds them); with `duties`, driven by that engine. Without
        `sdk_retries`, each attempt is one call (the client's own handler retries a 5xx twice,
        after 0.5 s and 1 s). `drain`: the job that drains (default: the fake one)."""
        deliveries = Deliveries(
            store=self.store,
            poster=SlackGateway(make_web_client(BOT_TOKEN, self.stub.api_url, sdk_retries=sdk_retries)),
            clock=self.clock,
            owner=owner,
            telemetry=telemetry,
            dead_after_failures=dead_after_failures,
            dead_after=dead_after,
        )
        jobs = JobService(
            store=self.store,
            registry=JobRegistry(
                jobs={
                    "drain": drain
                    or FakeDrain(self.world, ask_on=ask_on, failures=failures, left_behind=left_behind),
                    "uncordon": FakeUncordon(self.world),
                }
            ),
            deliveries=deliveries,
            directory=StaticDirectory(),
            clock=self.clock,
            owner=owner,
            steps=lambda: runs,
            on_change=(lambda: duties.wake(JOBS)) if duties is not None else None,
            telemetry=telemetry,
        )
        if duties is not None:
            duties.add(JobDuty(jobs, connect=lambda name: _Closable()))
        runs = RunService(
            store=self.store,
            directory=StaticDirectory(),
            clock=self.clock,
            cards=RunCards(
                deliveries=deliveries,
                renderer=Renderer([BUILTIN_TEMPLATES]),
                clock=self.clock,
                live=jobs.live_sections,
            ),
            actions=default_registry(),
            action_context=_context(jobs),
            long_actions=StepLongActions(self.store, jobs),
            listeners=(AfterAbortOffer(jobs),),
        )
        self.runs = runs
        return jobs


def job_lane(jobs: JobService) -> Lane:
    """The jobs' lane of a duty engine of their own (leading, outside any fence)."""
    return Duties().add(JobDuty(jobs, connect=lambda name: _Closable()))


def _context(jobs: JobService) -> ActionContext:
    def unavailable(*_: Any) -> Any:
        raise AssertionError("not used")

    return ActionContext(
        take_snapshot=unavailable,
        compare_snapshots=unavailable,
        start_job=lambda request: jobs.start(request, cluster=request.cluster),
    )


@pytest.fixture
def setup(tmp_path: Path, slack_stub: SlackStub) -> Iterator[Setup]:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="roll", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    s = Setup(store=store, runs=None, clock=FakeClock(T0), stub=slack_stub, world=World(), tmp=tmp_path)  # type: ignore[arg-type]
    yield s
    store.close()


def approve(runs: RunService, run_id: str, step: str, *people: str) -> R.Run:
    run = runs.load(run_id)
    for who in people:
        sr = run.step_run(step)
        runs.click(R.ButtonRef(run_id=run_id, step_id=step, epoch=sr.epoch), Actor(user_id=who))
        run = runs.load(run_id)
    return run


class Nodes:
    """The cluster as abort's uncordon offer reads it: every node still cordoned, but `gone`."""

    def __init__(self, gone: Sequence[str] = ()) -> None:
        self.gone = set(gone)

    def get_json(self, path: str, query: object = None) -> dict[str, Any]:
        name = path.rsplit("/", 1)[-1]
        if name in self.gone:
            raise ClusterError(f"nodes {name} not found", status=404)
        return {"metadata": {"name": name}, "spec": {"unschedulable": True}}


def claimed_drain(setup: Setup, jobs: JobService) -> tuple[R.Run, JobRow]:
    """The `roll` plan started, its drain approved by both, and its job claimed by `jobs`."""
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    (row,) = setup.store.jobs()
    assert jobs.claim(row)
    return run, row


def drive(jobs: JobService, job_id: int, *, limit: int = 50, cluster: Any = None) -> str:
    """Advance a claimed job until it ends, waits for people, or is lost; what stopped it."""
    cluster = cluster if cluster is not None else Nodes()
    for _ in range(limit):
        step = jobs.advance(job_id, cluster=cluster)
        if step.done:
            return "done"
        if step.lost:
            return "lost"
        if step.waiting_for_people:
            return "waiting"
    raise AssertionError("the job never stopped")


def thread(stub: SlackStub) -> list[str]:
    return [c.params["text"] for c in stub.calls_to("chat.postMessage") if c.params.get("thread_ts")]


def test_the_approval_only_stores_the_job_and_the_driver_finishes_the_step(setup: Setup) -> None:
    jobs = setup.jobs("proc-a")
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    run = approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    assert run.step_run("drain-old").state is StepState.RUNNING
    (row,) = setup.store.jobs()
    assert (row.kind, row.step_id, row.owner, setup.world.writes) == ("drain", "drain-old", "", [])
    assert jobs.claim(row)
    assert drive(jobs, row.id) == "done"
    run = setup.runs.load(run.id)
    assert run.step_run("drain-old").state is StepState.SUCCEEDED
    assert "3/3 nodes drained" in run.step_run("drain-old").note
    assert setup.world.writes == ["n1", "n2", "n3"]
    lines = thread(setup.stub)
    for node in ("n1", "n2", "n3"):
        assert lines.count(f"{node} drained") == 1
    audit = [e.detail for e in setup.store.audit_entries(limit=100) if e.subcommand == "drain"]
    assert any("node n2: drained" in d for d in audit)
    assert any(d.startswith("started: drain") for d in audit)


def test_a_dead_driver_interrupts_the_step_and_resume_continues_the_same_job_once(setup: Setup) -> None:
    first = setup.jobs("proc-a")
    run, row = claimed_drain(setup, first)
    for _ in range(3):  # plan, n1 intent, n1 drained: then the process dies
        first.advance(row.id, cluster=None)
    assert setup.world.writes == ["n1"]

    # Another process (a restart, or the next leader) finds the job with a stale heartbeat.
    setup.clock.advance(timedelta(minutes=1))
    second = setup.jobs("proc-b")
    runner = job_lane(second)
    assert runner.scan() == []  # not driven: interrupted
    assert setup.store.job(row.id).state == "interrupted"  # type: ignore[union-attr]
    run = setup.runs.load(run.id)
    assert run.step_run("drain-old").state is StepState.INTERRUPTED
    assert run.state is R.RunState.PAUSED

    # People resume: the gate opens again; the approval continues the SAME job from its progress.
    setup.runs.apply(
        run.id, lambda r: R.resume(r, by="U0PRIMARY", now=setup.clock()), Actor(user_id="U0PRIMARY")
    )
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    (again,) = setup.store.jobs()
    assert again.id == row.id
    # Its progress as it was, plus the resume, from which its timers count again.
    resumed = json.loads(again.progress)
    assert resumed.pop(RESUMED_AT) == iso(setup.clock())
    assert resumed["nodes"]["n1"] == "done"
    assert second.claim(again)
    assert drive(second, row.id) == "done"
    assert setup.world.writes == ["n1", "n2", "n3"]  # n1 not drained twice
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED
    assert thread(setup.stub).count("n1 drained") == 1


def test_a_job_interrupted_after_its_step_shows_so_on_the_card(setup: Setup) -> None:
    # A restart: the run's recovery interrupts the step first, while the job row is still live.
    first = setup.jobs("proc-a")
    run, row = claimed_drain(setup, first)
    first.advance(row.id, cluster=None)
    setup.clock.advance(timedelta(minutes=1))
    setup.runs.apply(run.id, lambda r: R.recover(r, now=setup.clock()), Actor(user_id="bot"))
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.INTERRUPTED
    edits = len(setup.stub.calls_to("chat.update"))
    # Then the job scan finds the job's stale heartbeat: the card is published again, saying so.
    assert job_lane(setup.jobs("proc-b")).scan() == []
    after = setup.stub.calls_to("chat.update")[edits:]
    assert after, "the card was not published when the job was interrupted"
    assert "(interrupted: `/upgrade resume` continues it)" in after[-1].params["text"]


def test_the_driver_threads_claim_and_finish_a_job_on_their_own(setup: Setup) -> None:
    duties = Duties()
    setup.jobs("proc-a", duties=duties)
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    wait_until(
        lambda: setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED,
        timeout=30,
        what="the driver to finish the step",
    )
    duties.shutdown()
    assert setup.world.writes == ["n1", "n2", "n3"]


def test_the_bots_own_audit_rows_of_a_job_carry_the_correlation_id_of_its_drivers_log_lines(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    install_filters(caplog.handler)  # the correlation id on each record, as the bot's handler has it
    caplog.set_level(logging.INFO)
    duties = Duties()
    setup.jobs("proc-a", duties=duties)
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    with correlation("c11c0001"):  # the second approval's click, as the router binds it
        approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    wait_until(
        lambda: setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED,
        timeout=30,
        what="the driver to finish the step",
    )
    duties.shutdown()
    rows = [e for e in setup.store.audit_entries(run_id=run.id) if e.kind == "action" and e.user_id == "bot"]
    # The job's start is the click's work; what the job did then ("node n2: drained"), its driver's.
    (started,) = [e for e in rows if e.detail.startswith("started: drain")]
    assert started.correlation_id == "c11c0001"
    done = [e for e in rows if e is not started]
    assert any("node n2: drained" in e.detail for e in done), rows
    cids = {e.correlation_id for e in done}
    assert len(cids) == 1, cids
    (cid,) = cids
    assert cid not in ("", "c11c0001")
    # A reader of the audit log finds the job's lines in the log by it.
    said = [r.getMessage() for r in caplog.records if getattr(r, "correlation_id", None) == cid]
    assert any(m.startswith("driving job ") for m in said), said


def test_a_question_waits_for_people_in_the_roles_it_names(setup: Setup) -> None:
    jobs = setup.jobs("proc-a", ask_on="n2")
    _run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "waiting"
    writes = list(setup.world.writes)
    assert drive(jobs, row.id) == "waiting"  # nothing more happens while nobody answered
    assert setup.world.writes == writes
    question = [c for c in setup.stub.calls_to("chat.postMessage") if "n2 is not drained" in c.params["text"]]
    assert len(question) == 1
    # The person who asked is named as a person (it read "U0SHADOW asks"), and so are the people who
    # may answer, in the post that asks (an edit of the card pings nobody).
    assert "n2 is not drained after 15m; <@U0SHADOW> asks to delete its pods\n" in question[0].params["text"]
    assert (
        "\nWho can answer: the primary <@U0PRIMARY> · the shadow <@U0SHADOW> · the coordinator <@U0COORD>\n"
        in question[0].params["text"]
    )
    blocks = (
        json.loads(question[0].params["blocks"])
        if isinstance(question[0].params["blocks"], str)
        else question[0].params["blocks"]
    )
    buttons = [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["job_choice_wait", "job_choice_delete"]
    # Deleting pods cannot be taken back: a danger button, behind Slack's confirmation dialog
    # (slack_sdk's models check its limits).
    (delete,) = [
        b for b in blockkit.buttons(blockkit.message_blocks(question[0].params)) if b.get("style") == "danger"
    ]
    assert delete["action_id"] == "job_choice_delete"
    assert delete["confirm"]["style"] == "danger"
    assert "You will be asked why" in delete["confirm"]["text"]["text"]
    key = "drain-timeout:n2:1"
    with pytest.raises(UserError, match="coordinator"):
        jobs.decide(row.id, choice_key=key, option="delete", user_id="U0PRIMARY", reason="stuck")
    with pytest.raises(UserError, match="reason"):
        jobs.decide(row.id, choice_key=key, option="delete", user_id="U0COORD")
    with pytest.raises(UserError, match="not an answer"):
        jobs.decide(row.id, choice_key=key, option="force", user_id="U0COORD")
    # The refusal says what the person holds; it is asked before a reason's modal opens too.
    asked = setup.store.job(row.id)  # the job as it is now, with its question
    assert asked is not None
    assert jobs.refusal(asked, jobs_option(jobs, row.id, "delete"), "U0PRIMARY").endswith(
        "; you are the primary"
    )
    jobs.decide(row.id, choice_key=key, option="delete", user_id="U0COORD", reason="PDB of a dead app")
    with pytest.raises(UserError, match="already answered"):
        jobs.decide(row.id, choice_key=key, option="wait", user_id="U0PRIMARY")
    # The question's message lost its buttons and says what was chosen, by whom.
    (edit,) = [c for c in setup.stub.calls_to("chat.update") if c.params["ts"] == question[0].response["ts"]]
    assert "Answered: *Delete*, by <@U0COORD>: _PDB of a dead app_" in edit.params["text"]
    assert not [b for b in blockkit.message_blocks(edit.params) if b["type"] == "actions"]
    assert drive(jobs, row.id) == "done"
    assert setup.world.writes == ["n1", "n2", "n3"]
    audit = [e.detail for e in setup.store.audit_entries(limit=100)]
    assert any("delete by U0COORD" in d for d in audit)
    assert any("decided: drain-timeout:n2:1: delete by U0COORD (PDB of a dead app)" in d for d in audit)


def test_the_drains_thread_names_who_answered_its_question_as_a_mention_and_their_words_as_text(
    setup: Setup,
) -> None:
    """The drain's answer lines ("node n1: U0PRIMARY chose to wait") showed the raw id: a job's
    lines are made inert, which keeps the cluster's names and people's words from pinging, and
    kept the bot's own mention of the answerer from showing as a name too."""
    cluster = FakeCluster(
        nodes=[kube_objects.node("n1", "ng-shared")],
        pods=[kube_objects.pod("shop", "web-a", owner=("ReplicaSet", "web-5d8f"), node_name="n1")],
    )
    cluster.blocked.add("shop/web-a")
    jobs = setup.jobs("proc-a", drain=DrainJob(("eks.amazonaws.com/nodegroup",)))
    _run, row = claimed_drain(setup, jobs)
    for _ in range(5):  # cordoned, its pod's eviction refused by the budget, again and again
        jobs.advance(row.id, cluster=cluster)
    setup.clock.advance(timedelta(minutes=16))
    assert drive(jobs, row.id, cluster=cluster) == "waiting"
    key = "drain-timeout:n1:1"
    jobs.decide(
        row.id, choice_key=key, option="skip", user_id="U0SHADOW", reason="<@U0BOSS> <!channel> said so"
    )
    assert drive(jobs, row.id, cluster=cluster) == "done"
    (line,) = [t for t in thread(setup.stub) if "chose to skip" in t]
    assert (
        line
        == "node n1: <@U0SHADOW> (&lt;@U0BOSS&gt; &lt;!channel&gt; said so) chose to skip it; it stays cordoned"
    )
    audit = [e.detail for e in setup.store.audit_entries(limit=100)]
    assert any(
        d.endswith("node n1, round 1: skip by U0SHADOW (<@U0BOSS> <!channel> said so)") for d in audit
    ), [d for d in audit if "round 1" in d]


def test_skipping_a_drained_node_needs_a_reason_and_an_empty_one_is_refused(setup: Setup) -> None:
    """ "Skip this node" leaves it cordoned and undrained: it took no reason, so the thread, the audit
    row and the report said who but never why."""
    cluster = FakeCluster(
        nodes=[kube_objects.node("n1", "ng-shared")],
        pods=[kube_objects.pod("shop", "web-a", owner=("ReplicaSet", "web-5d8f"), node_name="n1")],
    )
    cluster.blocked.add("shop/web-a")
    jobs = setup.jobs("proc-a", drain=DrainJob(("eks.amazonaws.com/nodegroup",)))
    _run, row = claimed_drain(setup, jobs)
    for _ in range(5):
        jobs.advance(row.id, cluster=cluster)
    setup.clock.advance(timedelta(minutes=16))
    assert drive(jobs, row.id, cluster=cluster) == "waiting"
    for empty in ("", "   "):
        with pytest.raises(UserError, match=r"^“Skip this node” needs a reason: say why$"):
            jobs.decide(
                row.id, choice_key="drain-timeout:n1:1", option="skip", user_id="U0SHADOW", reason=empty
            )
    assert drive(jobs, row.id, cluster=cluster) == "waiting"  # nothing was decided
    # The question says so, and its button asks (Slack's confirmation, then the reason's modal).
    (question,) = [c for c in setup.stub.calls_to("chat.postMessage") if "What now?" in c.params["text"]]
    assert "• *Skip this node* — primary or shadow (with a reason)" in question.params["text"]


def test_a_question_of_an_interrupted_job_is_answered_only_after_the_resume(setup: Setup) -> None:
    jobs = setup.jobs("proc-a", ask_on="n2")
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "waiting"
    # The process dies with the question open; the next one interrupts the job and its step.
    setup.clock.advance(timedelta(minutes=1))
    second = setup.jobs("proc-b")
    assert job_lane(second).scan() == []
    assert setup.store.job(row.id).state == "interrupted"  # type: ignore[union-attr]
    key = "drain-timeout:n2:1"
    # An answer now would be acted on the moment the step is approved again, unsaid on its gate.
    with pytest.raises(
        UserError, match=f"job {row.id} was interrupted with its step: nothing is asked or done"
    ):
        second.decide(row.id, choice_key=key, option="delete", user_id="U0COORD", reason="PDB of a dead app")
    assert setup.store.job(row.id).decision == ""  # type: ignore[union-attr]
    setup.runs.apply(
        run.id, lambda r: R.resume(r, by="U0PRIMARY", now=setup.clock()), Actor(user_id="U0PRIMARY")
    )
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    assert second.claim(setup.store.job(row.id))  # type: ignore[arg-type]
    assert drive(second, row.id) == "waiting"  # the question stands
    second.decide(row.id, choice_key=key, option="delete", user_id="U0COORD", reason="PDB of a dead app")
    assert drive(second, row.id) == "done"


def test_an_answer_that_confirms_a_request_needs_a_second_person(setup: Setup) -> None:
    """Four eyes on a choice: an option may name who cannot pick it (the person whose request it
    confirms, as for EKS's update with force); the refusal is a short reason, the answer stored."""
    jobs = setup.jobs("proc-a")
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    choice = Choice(
        key="insights-force:1.25:1:confirm",
        question="U0PRIMARY asks to update with force past the upgrade insights in ERROR",
        options=(
            ChoiceOption(
                id="force", label="Confirm update with force", needs_reason=True, not_by=("U0PRIMARY",)
            ),
            ChoiceOption(id="stop", label="Stop (fail the step)"),
        ),
    )
    row = JobRow(
        id=0,
        run_id=run.id,
        step_id=AFTER_ABORT,
        kind="eks-update-cluster",
        cluster="prod",
        args="{}",
        choice=choice_json(choice),
        started_by=f"run:{run.id}",
        started_at=setup.clock(),
    )
    job_id = setup.store.create_job(row)
    with pytest.raises(UserError) as same:
        jobs.decide(job_id, choice_key=choice.key, option="force", user_id="U0PRIMARY", reason="mine")
    assert same.value.user_message == "“Confirm update with force” needs a second person: you asked for it"
    jobs.decide(job_id, choice_key=choice.key, option="force", user_id="U0SHADOW", reason="checked the APIs")
    audit = [e.detail for e in setup.store.audit_entries(limit=100)]
    assert any(f"decided: {choice.key}: force by U0SHADOW (checked the APIs)" in d for d in audit)


def drain_n1_then_abort(setup: Setup, *, dies_before_its_offer: bool = False) -> tuple[JobService, R.Run]:
    """proc-a's drain cordons and drains n1, then the primary aborts the run; with
    `dies_before_its_offer`, proc-a is killed right after the abort's commit, before its offer."""
    jobs = setup.jobs("proc-a")
    run, row = claimed_drain(setup, jobs)
    for _ in range(3):
        jobs.advance(row.id, cluster=None)  # n1 cordoned and drained
    if dies_before_its_offer:
        setup.runs.listeners = ()
    setup.runs.apply(
        run.id,
        lambda r: R.abort(r, by="U0PRIMARY", reason="rollback", now=setup.clock()),
        Actor(user_id="U0PRIMARY"),
    )
    return jobs, run


def test_abort_offers_to_uncordon_what_the_run_cordoned(setup: Setup) -> None:
    jobs, run = drain_n1_then_abort(setup)
    offers = [j for j in setup.store.jobs(states=("live",)) if j.step_id == AFTER_ABORT]
    assert len(offers) == 1
    offer = offers[0]
    assert (offer.kind, json.loads(offer.args)) == ("uncordon", {"node": "n1"})
    assert jobs.claim(offer)
    assert drive(jobs, offer.id) == "waiting"
    assert any("Uncordon them?" in t for t in thread(setup.stub))
    with pytest.raises(UserError, match="primary or shadow"):
        jobs.decide(offer.id, choice_key="abort-uncordon", option="go", user_id="U0COORD")
    jobs.decide(offer.id, choice_key="abort-uncordon", option="go", user_id="U0SHADOW")
    assert drive(jobs, offer.id) == "done"
    assert setup.world.writes[-1] == "uncordon n1"
    assert setup.world.cordoned == set()
    # A second abort's offer left alone: the coordinator may say leave them.
    assert jobs.cordoned_by_run(run.id) == []


def cards(stub: SlackStub) -> list[str]:
    """The run card's texts as posted, then edited, in order (the card is the channel's message)."""
    (posted,) = [c for c in stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]
    ts = posted.response["ts"]
    return [posted.params["text"]] + [
        c.params["text"] for c in stub.calls_to("chat.update") if c.params["ts"] == ts
    ]


def test_a_drain_that_left_a_node_cordoned_is_not_a_plain_done_on_the_card_nor_at_the_end(
    setup: Setup,
) -> None:
    jobs = setup.jobs("proc-a", left_behind="1 node(s) skipped, still cordoned: n2")
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"
    step = setup.runs.load(run.id).step_run("drain-old")  # read back from the store
    assert (step.state, step.left_behind) == (StepState.SUCCEEDED, "1 node(s) skipped, still cordoned: n2")
    card = cards(setup.stub)[-1]
    assert (
        ":warning: `drain-old` Drain the old nodes — succeeded, *not all done:* 1 node(s) skipped, "
        "still cordoned: n2" in card
    )
    approve(setup.runs, run.id, "after", "U0PRIMARY")
    run = approve(setup.runs, run.id, "after", "U0SHADOW")
    assert run.state is R.RunState.COMPLETED
    card = cards(setup.stub)[-1]
    assert "Run *completed with 1 step not all done* · 2 done" in card
    assert ":warning: *Not all done by 1 step that succeeded* — left for people:" in card
    assert "• `drain-old`: 1 node(s) skipped, still cordoned: n2" in card
    # Kept in full among the finished steps, not folded into "N done".
    assert ":warning: `drain-old` Drain the old nodes — succeeded, *not all done:*" in card
    assert ending(run).honest == "completed with 1 step not all done"
    assert exit_status(run) == 3
    assert "not all done: drain-old (1 node(s) skipped, still cordoned: n2)" in last_line("roll", run)
    (said,) = [t for t in thread(setup.stub) if "Run completed" in t]
    assert said.startswith("Run completed, not all done:\n:warning: *Not all done by 1 step")  # no :tada:


def test_a_clean_drain_is_a_plain_done(setup: Setup) -> None:
    jobs = setup.jobs("proc-a")
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"
    approve(setup.runs, run.id, "after", "U0PRIMARY")
    run = approve(setup.runs, run.id, "after", "U0SHADOW")
    assert (run.state, run.step_run("drain-old").left_behind) == (R.RunState.COMPLETED, "")
    assert "Not all done" not in cards(setup.stub)[-1]
    assert (ending(run).honest, exit_status(run)) == ("completed", 0)


def test_an_abort_under_a_running_action_says_it_stopped_it_not_that_the_bot_did(setup: Setup) -> None:
    jobs, run = drain_n1_then_abort(setup)
    (drain,) = [j for j in setup.store.jobs() if j.step_id == "drain-old"]
    drive(jobs, drain.id)  # its next tick finds the run ended
    step = setup.runs.load(run.id).step_run("drain-old")
    assert step.note == "the run was aborted while its action ran"
    posts = [c.params for c in setup.stub.calls_to("chat.postMessage") if c.params.get("thread_ts")]
    stopped = [
        p for p in posts if "`drain-old` stopped: the run was aborted while its action ran" in p["text"]
    ]
    assert len(stopped) == 1
    assert not stopped[0].get("reply_broadcast")  # the abort itself went to the channel
    # Not "the bot stopped while its action ran; resume to re-approve it" of a run nobody can resume.
    assert not [p for p in posts if "resume to re-approve" in p["text"] or "was interrupted" in p["text"]]


def test_an_offer_the_aborting_process_died_before_making_is_made_once_by_the_next_scan(
    setup: Setup,
) -> None:
    jobs, run = drain_n1_then_abort(setup, dies_before_its_offer=True)
    assert [j for j in setup.store.jobs(states=("live",)) if j.step_id == AFTER_ABORT] == []

    setup.clock.advance(timedelta(minutes=1))
    second = setup.jobs("proc-b")
    runner = job_lane(second)
    runner.scan()
    runner.scan()
    runner.stop_all()
    offers = [j for j in setup.store.jobs(states=("live", "done")) if j.step_id == AFTER_ABORT]
    assert [(o.kind, json.loads(o.args)) for o in offers] == [("uncordon", {"node": "n1"})]
    # The replica that aborted, had it lived, offers nothing more: one offer per run.
    assert jobs.offer_after_abort(run.id, cluster="prod") is None
    assert jobs.offer_uncordon(run.id, cluster="prod", nodes=["n1"]) is None
    offered = [e.detail for e in setup.store.audit_entries(limit=100) if "after the abort" in e.detail]
    assert len(offered) == 1


def test_an_abort_long_ago_or_with_nothing_cordoned_owes_no_offer(setup: Setup) -> None:
    drain_n1_then_abort(setup, dies_before_its_offer=True)
    setup.clock.advance(timedelta(days=8))
    assert setup.jobs("proc-b").offer_owed() == []
    other = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    setup.runs.apply(
        other.id,
        lambda r: R.abort(r, by="U0PRIMARY", reason="not today", now=setup.clock()),
        Actor(user_id="U0PRIMARY"),
    )
    assert setup.jobs("proc-c").offer_owed() == []  # it never cordoned anything


def test_the_offer_can_be_declined(setup: Setup) -> None:
    jobs = setup.jobs("proc-a")
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    offer_id = jobs.offer_uncordon(run.id, cluster="prod", nodes=["n7"])
    offer = setup.store.job(offer_id)
    assert offer is not None
    assert jobs.claim(offer)
    assert drive(jobs, offer_id) == "waiting"
    jobs.decide(offer_id, choice_key="abort-uncordon", option="leave", user_id="U0COORD")
    assert drive(jobs, offer_id) == "done"
    ended = setup.store.job(offer_id)
    assert ended is not None
    assert ended.ok
    assert "left as it is by <@U0COORD>: 1 node(s) still cordoned: n7" in ended.detail
    (said,) = [t for t in thread(setup.stub) if "left cordoned after the abort" in t]
    assert said.startswith(":warning: 1 node(s) left cordoned after the abort, by <@U0COORD>'s answer: n7")
    # What returns them is a command that can be copied whole: the nodes, the cluster, the reason's slot.
    assert '`/upgrade action uncordon node=n7 --cluster prod --reason "…"` uncordons them' in said
    # The run's card keeps the trace, after the offer is done.
    setup.runs.publish(setup.runs.load(run.id))
    card = cards(setup.stub)[-1]
    assert (
        ":warning: *after-abort* — 1 node(s) left cordoned, by <@U0COORD>'s answer to the offer to "
        "uncordon them" in card
    )
    assert "> n7" in card


def test_aborts_offer_asks_about_the_nodes_still_cordoned_not_those_the_cloud_removed(setup: Setup) -> None:
    """It offered to uncordon 11 nodes of which 9 were terminated after their drains; now it asks
    about those still cordoned, says how many are gone, and asks nothing when none is left."""
    jobs = setup.jobs("proc-a")
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    offer_id = jobs.offer_uncordon(run.id, cluster="prod", nodes=["n1", "n2", "n3"])
    offer = setup.store.job(offer_id)
    assert offer is not None
    assert jobs.claim(offer)
    assert drive(jobs, offer_id, cluster=Nodes(gone=["n1", "n2"])) == "waiting"
    (asked,) = [t for t in thread(setup.stub) if "Uncordon them?" in t]
    assert "The run was aborted with 1 node(s) its jobs cordoned: n3. (2 more of the 3 it cordoned" in asked
    assert "are no longer in the cluster: nothing to do for them.) Uncordon them?" in asked
    waiting = setup.store.job(offer_id)
    assert waiting is not None
    assert "Uncordon 1 node(s)" in waiting.choice

    # The run is over (as its offer says) before the plan starts again: one run of a plan at a time.
    setup.runs.apply(
        run.id,
        lambda r: R.abort(r, by="U0PRIMARY", reason="test", now=r.created_at),
        Actor(user_id="U0PRIMARY"),
    )
    other = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    none_id = jobs.offer_uncordon(other.id, cluster="prod", nodes=["n4"])
    none = setup.store.job(none_id)
    assert none is not None
    assert jobs.claim(none)
    assert drive(jobs, none_id, cluster=Nodes(gone=["n4"])) == "done"
    ended = setup.store.job(none_id)
    assert ended is not None
    assert (ended.ok, ended.detail) == (
        True,
        "nothing to uncordon: the nodes its jobs cordoned are gone or schedulable",
    )


def test_a_plan_refuses_a_cluster_action_behind_one_person_unless_it_is_a_dry_run() -> None:
    one = PLAN.replace("gate: {approve: [primary, shadow]}", "gate: {any_of: [primary]}")
    with pytest.raises(PlanInvalid, match="needs two people"):
        parse_plan(one)
    dry = one.replace('version: "1.30.1"}', 'version: "1.30.1", dry_run: "true"}')
    assert parse_plan(dry).step("drain-old").actions[0].args["dry_run"] == "true"
    two_long = PLAN.replace(
        'actions: [{drain: {nodegroup: ng-shared, version: "1.30.1"}}]',
        'actions: [{drain: {nodegroup: ng-shared}}, {wait-nodegroup: {nodegroup: ng-shared, version: "1.30.1"}}]',
    )
    with pytest.raises(PlanInvalid, match="one long action per step"):
        parse_plan(two_long)


def test_a_job_whose_plan_is_refused_fails_its_step_with_the_reason(setup: Setup) -> None:
    setup.store.save_plan(
        name="roll",
        text=PLAN.replace("nodegroup: ng-shared", "nodegroup: missing"),
        loaded_by="U0PRIMARY",
        loaded_at=T0,
    )
    jobs = setup.jobs("proc-a")
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"
    run = setup.runs.load(run.id)
    assert run.step_run("drain-old").state is StepState.FAILED
    assert "no node group missing" in run.step_run("drain-old").note
    assert run.state is R.RunState.PAUSED


def test_a_dry_run_lists_what_would_happen_and_writes_nothing(setup: Setup) -> None:
    setup.store.save_plan(
        name="roll",
        text=PLAN.replace('version: "1.30.1"}', 'version: "1.30.1", dry_run: "true"}'),
        loaded_by="U0PRIMARY",
        loaded_at=T0,
    )
    jobs = setup.jobs("proc-a")
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    (row,) = setup.store.jobs()
    assert row.dry_run
    jobs.claim(row)
    assert drive(jobs, row.id) == "done"
    assert setup.world.writes == []
    (listing,) = [t for t in thread(setup.stub) if t.startswith(":mag: Dry run")]
    assert "cordon and drain n2" in listing
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED


class _Closable:
    def close(self) -> None:
        pass


def test_a_job_the_api_forbids_fails_its_step_with_the_refusal_named(setup: Setup) -> None:
    setup.store.save_plan(
        name="roll",
        text=PLAN.replace("nodegroup: ng-shared", "nodegroup: read-only"),
        loaded_by="U0PRIMARY",
        loaded_at=T0,
    )
    jobs = setup.jobs("proc-a")
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"  # not retried for ever: a 403 is not temporary
    run = setup.runs.load(run.id)
    assert run.step_run("drain-old").state is StepState.FAILED
    assert "not allowed to PATCH /api/v1/nodes/n1" in run.step_run("drain-old").note
    assert setup.world.writes == []
    # Said in the channel once, by the step's failure (the job's own line stays in the thread).
    broadcast = [
        c.params["text"]
        for c in setup.stub.calls_to("chat.postMessage")
        if c.params.get("reply_broadcast") and "not allowed to PATCH /api/v1/nodes/n1" in c.params["text"]
    ]
    assert len(broadcast) == 1, broadcast


def test_a_plan_refuses_action_values_the_action_would_refuse_with_their_line() -> None:
    with pytest.raises(PlanInvalid) as bad:
        parse_plan(PLAN.replace('version: "1.30.1"}', 'version: "1.30.1", timeout: soon}'))
    assert "steps[0](drain-old).actions.drain: timeout: 'soon' is not a duration" in bad.value.user_message
    both = PLAN.replace("nodegroup: ng-shared,", "nodegroup: ng-shared, node: n1,")
    with pytest.raises(PlanInvalid, match="either node"):
        parse_plan(both)
    watch = PLAN.replace(
        'actions: [{drain: {nodegroup: ng-shared, version: "1.30.1"}}]', "actions: [{watch: {settle: later}}]"
    )
    with pytest.raises(PlanInvalid, match="settle: 'later' is not a duration"):
        parse_plan(watch)


def _poison(node: str) -> KeyError:
    """What a bug in a job raises on a node's odd state: the same place every time."""
    try:
        {}[node]  # raised from here: every failure has the same origin
    except KeyError as exc:
        return exc
    raise AssertionError("unreachable")


def test_a_tick_that_fails_the_same_way_every_time_interrupts_the_job_once_with_the_error_posted(
    setup: Setup,
) -> None:
    metrics = Metrics()
    jobs = setup.jobs("proc-a", failures=[_poison("n1") for _ in range(10)], telemetry=metrics)
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    (row,) = setup.store.jobs()
    assert jobs.claim(row)
    assert not jobs.advance(row.id, cluster=None).lost  # the plan
    for _ in range(POISON_ATTEMPTS - 1):  # tried again, the cluster's back-off apart
        step = jobs.advance(row.id, cluster=None)
        assert (step.lost, step.wait) == (False, RETRY_SECONDS)
        assert setup.store.job(row.id).state == "live"  # type: ignore[union-attr]
    assert jobs.advance(row.id, cluster=None).lost  # the last time: set aside, the driver stops

    job = setup.store.job(row.id)
    assert job is not None
    assert job.state == "interrupted"
    assert f"failed {POISON_ATTEMPTS} times in a row: KeyError" in job.detail
    run = setup.runs.load(run.id)
    assert run.step_run("drain-old").state is StepState.INTERRUPTED
    assert run.state is R.RunState.PAUSED
    posts = [t for t in thread(setup.stub) if "drain stopped" in t]
    assert len(posts) == 1
    assert f"failed {POISON_ATTEMPTS} times in a row the same way" in posts[0]
    assert "KeyError: 'n1' at test_jobs_driver.py" in posts[0]
    assert "/upgrade resume" in posts[0]
    assert b'upgrade_bot_jobs_set_aside_total{kind="drain"} 1.0' in metrics.exposition()
    assert setup.world.writes == []

    # Not driven again, not posted again: the next scan (and a restart's) leaves it to people.
    assert job_lane(jobs).scan() == []
    assert job_lane(setup.jobs("proc-b")).scan() == []
    assert len([t for t in thread(setup.stub) if "drain stopped" in t]) == 1
    assert setup.store.job(row.id).state == "interrupted"  # type: ignore[union-attr]


def test_a_tick_that_fails_differently_or_on_the_cluster_is_not_set_aside(setup: Setup) -> None:
    # The cluster away (waited out, as ever), a bug twice, another bug, the first again twice.
    away: list[Exception] = [ClusterUnreachable("cluster prod: no answer in 10s")] * (POISON_ATTEMPTS * 2)
    bugs = [_poison("n1"), _poison("n1"), ValueError("another bug"), _poison("n2"), _poison("n2")]
    jobs = setup.jobs("proc-a", failures=away + bugs)
    run, row = claimed_drain(setup, jobs)
    jobs.advance(row.id, cluster=None)  # the plan
    for _ in away:
        step = jobs.advance(row.id, cluster=None)
        assert (step.lost, step.wait) == (False, RETRY_SECONDS)
    assert drive(jobs, row.id) == "done"  # never POISON_ATTEMPTS the same way in a row
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED
    assert setup.world.writes == ["n1", "n2", "n3"]
    assert not [t for t in thread(setup.stub) if "stopped" in t]


def test_a_job_whose_cluster_does_not_answer_says_so_on_the_card_then_once_in_the_thread(
    setup: Setup,
) -> None:
    """The card read "running" for minutes while every tick failed to reach the cluster (the log
    alone said so): now the job's first card line says since when, at once, and past a minute the
    thread says it once; when the cluster answers again the thread says so and the job goes on."""
    away: list[Exception] = [ClusterUnreachable("cluster prod (context p) refused the connection")] * 4
    jobs = setup.jobs("proc-a", failures=away)
    _run, row = claimed_drain(setup, jobs)
    jobs.advance(row.id, cluster=None)  # the plan
    moved = setup.store.job(row.id).updated_at  # type: ignore[union-attr]
    for _ in away:
        setup.clock.advance(timedelta(seconds=30))
        assert jobs.advance(row.id, cluster=None).wait == RETRY_SECONDS
    job = setup.store.job(row.id)
    assert job is not None
    first = json.loads(job.card)[0]
    assert first == (
        f":warning: no answer from cluster prod since {moved:%H:%M} UTC (cluster prod (context p) refused the "
        "connection); retrying every 5 s, from where the job stopped"
    )
    assert sum(1 for line in json.loads(job.card) if "no answer from cluster" in line) == 1
    said = [t for t in thread(setup.stub) if "cannot reach cluster prod" in t]
    assert len(said) == 1  # 60 s out and more: said once, not at each retry
    assert said[0].startswith(
        f":warning: drain (job {row.id}) cannot reach cluster prod since {moved:%H:%M} UTC"
    )
    assert drive(jobs, row.id) == "done"
    back = [t for t in thread(setup.stub) if "answers again" in t]
    assert len(back) == 1
    assert back[0].startswith(f":white_check_mark: cluster prod answers again (drain, job {row.id}), after ")
    assert back[0].endswith("m without an answer; the job goes on")


def test_a_cluster_that_refuses_the_credentials_says_to_renew_them_not_that_it_does_not_answer(
    setup: Setup,
) -> None:
    """A 401 (an expired token) read "no answer from cluster prod …; retrying every 5 s", as if
    waiting could mend it."""
    refused: list[Exception] = [
        ClusterError("cluster prod: GET /api/v1/pods failed: 401 Unauthorized", status=401)
    ] * 3
    jobs = setup.jobs("proc-a", failures=refused)
    _run, row = claimed_drain(setup, jobs)
    jobs.advance(row.id, cluster=None)
    moved = setup.store.job(row.id).updated_at  # type: ignore[union-attr]
    for _ in refused:
        setup.clock.advance(timedelta(seconds=30))
        assert jobs.advance(row.id, cluster=None).wait == RETRY_SECONDS
    job = setup.store.job(row.id)
    assert job is not None
    assert json.loads(job.card)[0] == (
        f":warning: credentials refused by cluster prod since {moved:%H:%M} UTC (cluster prod: GET "
        "/api/v1/pods failed: 401 Unauthorized): renew the credentials of its kubeconfig (or the bot's "
        "ServiceAccount token); retrying every 5 s, from where the job stopped"
    )
    (said,) = [t for t in thread(setup.stub) if "is refused by cluster prod" in t]
    assert "Its credentials must be renewed" in said
    assert drive(jobs, row.id) == "done"
    assert len([t for t in thread(setup.stub) if "answers again" in t]) == 1


def test_a_thread_post_slack_refuses_every_time_is_set_aside_without_blocking_the_others(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    refused = "n2 drained"
    setup.stub.fail_next(
        "chat.postMessage",
        error="msg_too_long",
        times=POISON_ATTEMPTS,
        when=lambda params: params.get("text") == refused,
    )
    metrics = Metrics()
    jobs = setup.jobs("proc-a", telemetry=metrics)
    run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"

    # Tried POISON_ATTEMPTS times, then set aside; the posts after it went out, each once.
    assert [t for t in thread(setup.stub) if t.startswith("n")] == (
        ["n1 drained"] + [refused] * POISON_ATTEMPTS + ["n3 drained"]
    )
    (dead,) = setup.store.outbox_dead()
    assert (dead.run_id, dead.key, dead.attempts) == (f"job:{row.id}", "drained:n2", POISON_ATTEMPTS)
    assert "msg_too_long" in dead.failure
    assert b"upgrade_bot_outbox_set_aside_total 1.0" in metrics.exposition()
    (said,) = [r.getMessage() for r in caplog.records if "set aside as a dead letter" in r.getMessage()]
    # The log line says it in words first, then the detail: the error and where it was raised.
    assert (
        ": Slack refused chat.postMessage: msg_too_long: Slack refuses this post as it is, so a retry fails "
        "again; drop it (`upgrade-bot outbox list|retry|drop`); detail: SlackCallFailed: " in said
    ), said
    assert re.search(
        r"; detail: SlackCallFailed: Slack refused chat.postMessage: msg_too_long at \w+\.py:\d+", said
    )
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED

    # Not owed any more: neither this process's next scan nor a restart's tries it again.
    assert all(r.key != "drained:n2" for r in setup.store.unposted_messages())
    job_lane(jobs).scan()
    job_lane(setup.jobs("proc-b")).scan()
    assert thread(setup.stub).count(refused) == POISON_ATTEMPTS

    # The operator: list, retry (the next scan posts it, once), and drop only a dead letter.
    listed = outbox(setup, "list")
    assert listed.returncode == 0, listed.stderr
    assert f"job:{row.id}/drained:n2\t" in listed.stdout
    assert f"{POISON_ATTEMPTS} attempt(s)" in listed.stdout
    # What Slack said and what to do, in words: no exception class, no code location.
    assert (
        "\tSlack refused chat.postMessage: msg_too_long: Slack refuses this post as it is, so a retry "
        "fails again; drop it\t'n2 drained'\n" in listed.stdout
    ), listed.stdout
    assert not re.search(r"SlackCallFailed|\.py:\d+| in _", listed.stdout), listed.stdout
    assert outbox(setup, "retry", f"job:{row.id}/drained:n2").returncode == 0
    assert setup.store.outbox_dead() == []
    job_lane(setup.jobs("proc-c")).scan()
    assert thread(setup.stub).count(refused) == POISON_ATTEMPTS + 1
    assert setup.store.messages(f"job:{row.id}")["drained:n2"].ts
    refused_drop = outbox(setup, "drop", f"job:{row.id}/drained:n2")
    assert refused_drop.returncode == 1
    assert "is not a dead letter" in refused_drop.stderr
    assert "Traceback" not in refused_drop.stderr


def _raised(exc: Exception) -> str:
    """`describe` of `exc` raised here: with where it was raised, as the outbox stores it."""
    try:
        raise exc
    except Exception as raised:
        return describe(raised)


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (
            TemporaryError("Slack is not answering chat.postMessage right now (HTTP 500)"),
            "Slack is not answering chat.postMessage right now (HTTP 500): retry it once Slack answers again",
        ),
        (
            SlackOutcomeUnknown("Slack did not answer chat.postMessage in time"),
            "Slack did not answer chat.postMessage in time: it may be in the thread already; look there "
            "before you retry it (else drop it)",
        ),
        (
            SlackCallFailed("chat.postMessage", "not_in_channel", "the bot is not in that channel"),
            "the bot is not in that channel: Slack refuses it the same way each time; retry it once that "
            "is mended, or drop it",
        ),
        (KeyError("value"), "an unexpected error (a bug: the log has its detail): retry it, or drop it"),
    ],
)
def test_a_dead_letters_failure_is_said_in_words_with_what_to_do(exc: Exception, said: str) -> None:
    failure = _raised(exc)
    assert re.search(r" at \w+\.py:\d+ in _raised$", failure)  # the detail the log keeps
    assert failure_reason(failure) == said


def card_text(setup: Setup, run_id: str) -> str:
    """The run card's text as Slack holds it now (its last edit)."""
    card = setup.store.messages(run_id)["card"]
    (message,) = [m for m in setup.stub.posted() if m["ts"] == card.ts]
    return str(message["text"])


@pytest.mark.parametrize("limit", ["failures", "time"])
def test_a_thread_post_slack_answers_500_for_ever_is_set_aside_within_its_limit_and_the_run_goes_on(
    setup: Setup, limit: str
) -> None:
    """Issue 38: a post Slack answered 500 for ever held up every later post of its run. Set aside
    after N failures or T seconds of them, the card says so, and the next posts go out in order."""
    failing = "n2 drained"
    setup.stub.fail_next("chat.postMessage", status=500, times=1000, when=lambda p: p.get("text") == failing)
    by_count = limit == "failures"
    jobs = setup.jobs(
        "proc-a",
        dead_after_failures=4 if by_count else 1000,
        dead_after=timedelta(hours=1) if by_count else timedelta(seconds=90),
        sdk_retries=False,
    )
    run = setup.runs.start("roll", Actor(user_id="U0PRIMARY")).run
    approve(setup.runs, run.id, "drain-old", "U0PRIMARY", "U0SHADOW")
    (row,) = setup.store.jobs()
    assert jobs.claim(row)
    ticks = 0
    first_failure = None
    # Each tick tries the owed posts in order; the run's clock moves 30 s between ticks.
    while not setup.store.outbox_dead():
        ticks += 1
        assert ticks <= 12, "the failing post was never set aside"
        jobs.advance(row.id, cluster=None)
        if first_failure is None and failing in thread(setup.stub):
            first_failure = setup.clock()
        if not setup.store.outbox_dead():  # in order: nothing overtakes the failing post
            assert "n3 drained" not in thread(setup.stub)
        setup.clock.advance(timedelta(seconds=30))
    # By count: the 4th failure. By time: the first failure 90 s or more after the first one —
    # the 4th as well, 30 s apart. (This client retries nothing itself: one call an attempt.)
    tried = thread(setup.stub).count(failing)
    assert tried == 4
    (dead,) = setup.store.outbox_dead()
    assert (dead.run_id, dead.key, dead.attempts) == (f"job:{row.id}", "drained:n2", 4)
    assert dead.failing_since == first_failure
    assert "HTTP 500" in dead.failure

    # The posts after it went out, once each and in order, and the job finished.
    drained = [t for t in thread(setup.stub) if t.startswith("n") and t != failing]
    assert drained == ["n1 drained", "n3 drained"]
    assert sum("`drain-old` succeeded" in t for t in thread(setup.stub)) == 1
    assert setup.runs.load(run.id).step_run("drain-old").state is StepState.SUCCEEDED
    # The run's card says it, in a line that fits what Slack validates.
    text = card_text(setup, run.id)
    assert ":warning: 1 thread post could not be delivered (Slack 500 since <!date^" in text
    assert "see `upgrade-bot outbox`" in text
    card = setup.store.messages(run.id)["card"]
    (edit,) = [c for c in setup.stub.calls_to("chat.update") if c.params["ts"] == card.ts][-1:]
    assert "could not be delivered" in json.dumps(edit.params.get("blocks"))
    # Not tried again by anyone until an operator retries it.
    job_lane(setup.jobs("proc-b")).scan()
    assert thread(setup.stub).count(failing) == tried


def test_an_operator_drops_a_dead_thread_post_for_good(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    setup.stub.fail_next(
        "chat.postMessage", error="msg_too_long", times=50, when=lambda p: p.get("text") == "n1 drained"
    )
    jobs = setup.jobs("proc-a")
    _run, row = claimed_drain(setup, jobs)
    assert drive(jobs, row.id) == "done"
    assert [(r.run_id, r.key) for r in setup.store.outbox_dead()] == [(f"job:{row.id}", "drained:n1")]
    assert outbox(setup, "drop", f"job:{row.id}/drained:n1").returncode == 0
    assert setup.store.outbox_dead() == []
    assert outbox(setup, "retry", f"job:{row.id}/drained:n1").returncode == 1
    bad = outbox(setup, "retry", "no-slash")
    assert bad.returncode == 2
    assert "is not an outbox row (SUBJECT/KEY" in bad.stderr
    job_lane(setup.jobs("proc-b")).scan()
    assert thread(setup.stub).count("n1 drained") == POISON_ATTEMPTS  # never posted again


def outbox(setup: Setup, *args: str) -> subprocess.CompletedProcess[str]:
    """`upgrade-bot outbox …` as an operator runs it, against the test's own database."""
    config = setup.tmp / "upgrade-bot.yaml"
    config.write_text(f"data_dir: {setup.tmp / 'data'}\ndatabase_url: sqlite:///{setup.tmp / 'bot.db'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    return subprocess.run(
        [*bot_command(), "outbox", *args, "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def jobs_option(jobs: JobService, job_id: int, option: str) -> ChoiceOption:
    """The open question's option `option` of job `job_id`."""
    row = jobs.store.job(job_id)
    assert row is not None
    choice = choice_of(row.choice)
    assert choice is not None
    return next(o for o in choice.options if o.id == option)
