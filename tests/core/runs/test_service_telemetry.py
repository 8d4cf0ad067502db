"""The run service records each action's end through its `Telemetry` (the metrics exporter in
production): by the action's name and how it ended, never by anything a plan's author typed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext, DiffSummary
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.core.telemetry import NoTelemetry
from bot.errors import ClusterUnreachable
from tests.support.clock import FakeClock
from tests.support.plans import GOOD

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


class Recorded(NoTelemetry):
    def __init__(self) -> None:
        self.actions: list[tuple[str, str]] = []

    def action(self, kind: str, result: str) -> None:
        self.actions.append((kind, result))


def never_compared(cluster: str, before: str, after: str) -> DiffSummary:
    raise AssertionError("this plan compares nothing")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="small", text=GOOD, loaded_by="U0PRIMARY", loaded_at=T0)
    yield store
    store.close()


def approve_the_snapshot_step(store: Store, take_snapshot: object) -> list[tuple[str, str]]:
    recorded = Recorded()
    service = RunService(
        store=store,
        directory=StaticDirectory(),
        clock=FakeClock(T0),
        actions=default_registry(),
        action_context=ActionContext(take_snapshot=take_snapshot, compare_snapshots=never_compared),  # type: ignore[arg-type]
        telemetry=recorded,
    )
    run = service.start("small", Actor(user_id="U0PRIMARY")).run
    service.click(R.ButtonRef(run_id=run.id, step_id="snap", epoch=1), Actor(user_id="U0PRIMARY"))
    return recorded.actions


def test_an_action_that_succeeds_is_recorded_ok(store: Store) -> None:
    def take(cluster: str, label: str, taken_by: str) -> tuple[int, str, Mapping[str, int], tuple[()]]:
        return 1, label, {"nodes": 3, "pods": 30, "workloads": 5}, ()

    assert approve_the_snapshot_step(store, take) == [("snapshot", "ok")]


def test_an_action_the_cluster_refuses_is_recorded_failed(store: Store) -> None:
    def take(cluster: str, label: str, taken_by: str) -> tuple[int, str, Mapping[str, int], tuple[()]]:
        raise ClusterUnreachable("cluster prod: the API server did not answer", cluster="prod")

    assert approve_the_snapshot_step(store, take) == [("snapshot", "failed")]


def test_an_action_that_breaks_is_recorded_as_an_error(store: Store) -> None:
    def take(cluster: str, label: str, taken_by: str) -> tuple[int, str, Mapping[str, int], tuple[()]]:
        raise KeyError("a bug")

    assert approve_the_snapshot_step(store, take) == [("snapshot", "error")]
