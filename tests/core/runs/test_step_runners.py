"""Several replicas (issue 16): the replica that sets a step running records itself as its runner,
so a new leader's recovery leaves alone an action a live follower is still running — its result is
committed — and interrupts one whose replica is gone (also later, from the run ticker)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.records import StepState
from tests.support.clock import FakeClock

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLAN = """\
name: snap
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
roster:
  primary: [U0PRIMARY]
steps:
  - id: snapshot-pre
    title: Snapshot
    gate: {any_of: [primary]}
    actions: [{snapshot: {label: pre}}]
"""


class SlowSnapshot:
    """A snapshot that takes as long as the test says (a 150k-pod cluster on a follower)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(
        self, cluster: str, label: str, taken_by: str
    ) -> tuple[int, str, Mapping[str, int], tuple[tuple[str, str], ...]]:
        self.started.set()
        assert self.release.wait(30)
        return 1, label, {"nodes": 3, "pods": 10, "workloads": 2}, ()


def service(store: Store, clock: FakeClock, owner: str, live: set[str], snapshot: Any = None) -> RunService:
    def unused(*_: Any) -> Any:
        raise AssertionError("not used")

    runs = RunService(
        store=store,
        directory=StaticDirectory(),
        clock=clock,
        actions=default_registry(),
        action_context=ActionContext(take_snapshot=snapshot or unused, compare_snapshots=unused),
        owner=owner,
        live_runners=lambda: set(live),
    )
    return runs


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    s.save_plan(name="snap", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    yield s
    s.close()


def start_on_follower(
    store: Store, clock: FakeClock, live: set[str]
) -> tuple[RunService, SlowSnapshot, str, threading.Thread]:
    slow = SlowSnapshot()
    follower = service(store, clock, "follower-1", live, slow)
    run = follower.start("snap", Actor(user_id="U0PRIMARY")).run
    ref = R.ButtonRef(run_id=run.id, step_id="snapshot-pre", epoch=run.step_run("snapshot-pre").epoch)
    click = threading.Thread(target=follower.click, args=(ref, Actor(user_id="U0PRIMARY")))
    click.start()
    assert slow.started.wait(10)
    return follower, slow, run.id, click


def test_a_new_leader_leaves_a_live_followers_action_running_and_its_result_lands(store: Store) -> None:
    clock = FakeClock(T0)
    live = {"follower-1", "leader-2"}
    follower, slow, run_id, click = start_on_follower(store, clock, live)
    step = follower.load(run_id).step_run("snapshot-pre")
    assert (step.state, step.runner) == (StepState.RUNNING, "follower-1")

    leader = service(store, clock, "leader-2", live)
    leader.recover_all()  # the new leader's start-up recovery
    leader.tick()
    assert leader.load(run_id).step_run("snapshot-pre").state is StepState.RUNNING
    slow.release.set()
    click.join(10)
    assert leader.load(run_id).step_run("snapshot-pre").state is StepState.SUCCEEDED


def test_an_action_whose_replica_is_gone_is_interrupted_and_waits_for_people(store: Store) -> None:
    clock = FakeClock(T0)
    live = {"follower-1", "leader-2"}
    _, slow, run_id, click = start_on_follower(store, clock, live)
    leader = service(store, clock, "leader-2", live)
    leader.recover_all()
    assert leader.load(run_id).step_run("snapshot-pre").state is StepState.RUNNING
    live.discard("follower-1")  # the follower died mid-action: its heartbeats stop
    leader.tick()
    run = leader.load(run_id)
    assert run.step_run("snapshot-pre").state is StepState.INTERRUPTED
    assert run.state is R.RunState.PAUSED
    slow.release.set()
    click.join(10)
    # Had it lived on after all, its late result does not overwrite what people now decide.
    assert leader.load(run_id).step_run("snapshot-pre").state is StepState.INTERRUPTED
    late = [e for e in store.audit_entries() if e.subcommand == "late_result"]
    assert len(late) == 1
    assert late[0].outcome == "ignored"
