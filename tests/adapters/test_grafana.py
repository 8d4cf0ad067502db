"""What each change of a step becomes in Grafana (`annotation_of`): a start is a point, an end a
region from the start with its outcome, a step skipped before it ran a point at its end, and a
change Grafana is not told of (a gate opening) nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.adapters.grafana import annotation_of
from bot.records import StepRun, StepState

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
MS = int(T0.timestamp() * 1000)


def test_a_failed_step_is_a_region_from_its_start_tagged_failed() -> None:
    running = StepRun(step_id="drain-ng-shared", state=StepState.RUNNING, started_at=T0)
    failed = StepRun(
        step_id="drain-ng-shared",
        state=StepState.FAILED,
        started_at=T0,
        finished_at=T0 + timedelta(minutes=3),
    )
    note = annotation_of(run_id="R1A2B3C", cluster="prod", old=running, new=failed, tags=("infra",))
    assert note is not None
    assert note.body() == {
        "time": MS,
        "timeEnd": MS + 180_000,
        "tags": ["upgrade-bot", "prod", "R1A2B3C", "drain-ng-shared", "failed", "infra"],
        "text": "R1A2B3C step `drain-ng-shared` failed (cluster prod)",
    }


def test_a_step_skipped_before_it_ran_is_a_point_at_its_end() -> None:
    waiting = StepRun(step_id="snap", state=StepState.AWAITING_APPROVAL, opened_at=T0)
    skipped = StepRun(
        step_id="snap", state=StepState.SKIPPED, opened_at=T0, finished_at=T0 + timedelta(seconds=9)
    )
    note = annotation_of(run_id="R1", cluster="prod", old=waiting, new=skipped)
    assert note is not None
    assert note.body() == {
        "time": MS + 9_000,
        "tags": ["upgrade-bot", "prod", "R1", "snap", "skipped"],
        "text": "R1 step `snap` skipped (cluster prod)",
    }


def test_a_gate_opening_is_not_annotated() -> None:
    pending = StepRun(step_id="snap")
    waiting = StepRun(step_id="snap", state=StepState.AWAITING_APPROVAL, opened_at=T0)
    assert annotation_of(run_id="R1", cluster="prod", old=pending, new=waiting) is None
