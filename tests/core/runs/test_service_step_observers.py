"""The run service tells its step observers (Grafana's annotations) of each committed change of a
step's state, once each, after the commit; an observer that raises is logged with the run id and
neither the run nor the other observers notice."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext, DiffSummary
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService, StepObserver
from tests.support.clock import FakeClock
from tests.support.plans import GOOD

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


class Recording:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, int]] = []

    def step_changed(self, run: R.Run, old: R.StepRun, new: R.StepRun) -> None:
        # What the store holds at this moment: the change was committed before observers hear of it.
        self.seen.append((new.step_id, str(old.state), str(new.state), run.version))


class Broken:
    def step_changed(self, run: R.Run, old: R.StepRun, new: R.StepRun) -> None:
        raise RuntimeError("grafana adapter bug")


def never_compared(cluster: str, before: str, after: str) -> DiffSummary:
    raise AssertionError("this plan compares nothing")


def take(cluster: str, label: str, taken_by: str) -> tuple[int, str, Mapping[str, int], tuple[()]]:
    return 1, label, {"nodes": 3, "pods": 30, "workloads": 5}, ()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="small", text=GOOD, loaded_by="U0PRIMARY", loaded_at=T0)
    yield store
    store.close()


def service(store: Store, *observers: StepObserver) -> RunService:
    return RunService(
        store=store,
        directory=StaticDirectory(),
        clock=FakeClock(T0),
        actions=default_registry(),
        action_context=ActionContext(take_snapshot=take, compare_snapshots=never_compared),  # type: ignore[arg-type]
        step_observers=observers,
    )


def test_each_committed_change_of_a_step_is_observed_once_in_order(store: Store) -> None:
    recording = Recording()
    runs = service(store, recording)
    run = runs.start("small", Actor(user_id="U0PRIMARY")).run
    runs.click(R.ButtonRef(run_id=run.id, step_id="snap", epoch=1), Actor(user_id="U0PRIMARY"))
    # A stale click (the step has moved on) commits nothing, so nobody is told anything.
    runs.click(R.ButtonRef(run_id=run.id, step_id="snap", epoch=1), Actor(user_id="U0PRIMARY"))
    steps = [(step, old, new) for step, old, new, _ in recording.seen]
    assert steps[:2] == [("snap", "awaiting_approval", "running"), ("snap", "running", "succeeded")]
    assert len(steps) == len(set(steps)), steps
    # Each observation came with the run as committed: versions only go up.
    versions = [v for *_, v in recording.seen]
    assert versions == sorted(versions)
    assert runs.load(run.id).step_run("snap").state is R.StepState.SUCCEEDED


def test_an_observer_that_raises_is_logged_and_the_run_and_other_observers_go_on(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    recording = Recording()
    runs = service(store, Broken(), recording)
    run = runs.start("small", Actor(user_id="U0PRIMARY")).run
    with caplog.at_level(logging.ERROR, logger="bot.core.runs.service"):
        runs.click(R.ButtonRef(run_id=run.id, step_id="snap", epoch=1), Actor(user_id="U0PRIMARY"))
    assert runs.load(run.id).step_run("snap").state is R.StepState.SUCCEEDED
    assert ("snap", "running", "succeeded") in [(s, o, n) for s, o, n, _ in recording.seen]
    failures = [r for r in caplog.records if "step observer Broken failed" in r.getMessage()]
    assert failures
    assert all(run.id in r.getMessage() and r.exc_info for r in failures)
