"""The report's charts as drawn (matplotlib's figure, before it is a PNG): the time axis of a run of
a minute reads in seconds, one of hours in minutes, each tick its own label; and a legend lists what
its chart drew, beside it, so that a short run's chart of a lane or two holds it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.charts import _pyplot, _steps
from bot.adapters.store import Store
from bot.core.runs.report import Report, build_report
from tests.support.report_runs import stored_run


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path}/bot.db")
    yield store
    store.close()


def _drawn_steps(report: Report, height: float) -> tuple[Any, Any]:
    """The step chart of `report` on a figure 12 in wide and `height` high (as the HTML's), drawn."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, height))
    _steps(ax, report)
    fig.tight_layout()
    fig.canvas.draw()
    return fig, ax


def _tick_labels(report: Report) -> list[str]:
    fig, ax = _drawn_steps(report, 8)
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    _pyplot().close(fig)
    return labels


def test_a_run_of_a_minute_reads_its_ticks_in_seconds_and_a_run_of_hours_in_minutes(store: Store) -> None:
    # The EKS runbook's 28 steps in 81 s, as a rehearsal on the sim's clock can go.
    short = _tick_labels(build_report(store, stored_run(store, run_id="RSHORT", pace=1 / 300)))
    assert len(short) >= 4, short
    assert len(set(short)) == len(short), short  # not "13:00" under every tick of the minute
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in short), short
    # The same runbook at its pace (almost 7 h): hours and minutes, as it always was.
    long = _tick_labels(build_report(store, stored_run(store, run_id="RLONG")))
    assert long == ["13:00", "14:00", "15:00", "16:00", "17:00", "18:00", "19:00", "20:00"], long


def test_a_one_step_charts_legend_is_beside_its_bars_and_within_its_height(store: Store) -> None:
    report = build_report(store, stored_run(store, pace=1 / 60))
    (step,) = [s for s in report.steps if s.step_id == "drain-control-plane"]
    report = dataclasses.replace(report, steps=(step,), ended_at=step.finished_at)
    # The HTML report's step chart of one step: 2.2 in high (`html_charts`).
    fig, ax = _drawn_steps(report, 2.2)
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "waiting for people",
        "working",
        "people asked",
        "approval",
    ]
    drawn, chart = legend.get_window_extent(), ax.get_window_extent()
    _pyplot().close(fig)
    assert drawn.x0 >= chart.x1  # beside the bars, never over them
    assert drawn.y0 >= chart.y0 - 1, (drawn, chart)  # not hanging below the chart
    assert drawn.y1 <= chart.y1 + 1, (drawn, chart)
