"""The `analysis` job against the simulator's Prometheus facade (the real adapter over HTTP): the
baseline taken at plan time, Argo's outcomes (Successful after `count`, Failed past
`failure_limit`, Inconclusive and Error asking people), no data never passing, the measurements
kept in progress for the panels, and a job that resumes from its stored progress (a JSON round
trip, as the jobs table keeps it) measuring on without starting over."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.prometheus import Prometheus
from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.jobs.alerts import PAUSE_KIND, Evidence
from bot.core.jobs.analysis import AnalysisJob
from bot.core.jobs.base import Decision, Progress, Tick
from bot.core.jobs.registry import job_kind
from bot.errors import UserError
from bot.records import SignalSource
from bot.sim.cluster import SimCluster

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
Q = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'


@dataclass
class _Named:
    """The kube adapter's one attribute this job reads: the cluster's configured name."""

    name: str


def _job(sim: SimCluster) -> AnalysisJob:
    evidence = Evidence(prometheuses={"prod": Prometheus(SignalSource(url=f"{sim.url}/prometheus"))})
    return AnalysisJob(lambda: evidence)


def _stored(progress: Progress) -> Progress:
    """What the jobs table gives back: the progress as JSON, read again."""
    loaded: Progress = json.loads(json.dumps(progress, sort_keys=True))
    return loaded


def _run(job: AnalysisJob, progress: Progress, minutes: int, *, start: int = 0) -> list[Tick]:
    ticks: list[Tick] = []
    for i in range(start, start + minutes):
        tick = job.tick(_Named("prod"), _stored(progress), now=T0 + timedelta(minutes=i))
        ticks.append(tick)
        progress = tick.progress
        if tick.done or tick.choice is not None:
            break
    return ticks


def test_successful_after_count_measurements_against_the_plan_time_baseline(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 10.0)
    job = _job(sim_small)
    progress = job.plan(
        _Named("prod"), {"query": Q, "success": "result < 1.2 * baseline + 5", "count": "3"}, now=T0
    )
    assert (progress["baseline"], progress["baseline_from"]) == (10.0, "plan")
    ev.set_query(Q, 14.0)
    ticks = _run(job, progress, 5)
    assert [t.done for t in ticks] == [False, False, True]
    last = ticks[-1]
    assert last.ok is True
    assert last.detail.startswith("analysis: Successful after 3 measurement(s)")
    stored = last.progress["measurements"]
    assert [(m["phase"], m["value"]) for m in stored] == [("Successful", 14.0)] * 3
    assert stored[0]["at"] == "2026-11-29T14:02:00Z"
    # The card shows query, value, baseline and the short series.
    assert ticks[1].card[0] == "Waiting on evidence: Analysis: 2 measurement(s) · value 14 · baseline 10"
    assert ticks[1].card[1].endswith(": 14 14")


def test_a_value_past_its_baseline_fails_after_failure_limit(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 2.0)
    job = _job(sim_small)
    progress = job.plan(_Named("prod"), {"query": Q, "success": "result < 1.2 * baseline + 5"}, now=T0)
    ev.set_query(Q, 40.0)
    ticks = _run(job, progress, 5)
    # failure_limit 1: the first failure is tolerated, the second fails the analysis.
    assert len(ticks) == 2
    assert (ticks[-1].done, ticks[-1].ok) == (True, False)
    assert ticks[-1].detail.startswith("analysis: Failed — `sum(rate(apiserver_request_total")
    assert "was 40 against a baseline of 2" in ticks[-1].detail
    assert [p.key for p in ticks[-1].posts] == ["analysis-failed:2026-11-29T14:02:00Z:0"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("down", "HTTP 503"),
        ("401", "refused the bot's credentials (HTTP 401)"),
        ("malformed", "not JSON"),
        ("empty", "no data: the query returned an empty result"),
        ("refused", "parse error"),
    ],
)
def test_no_data_is_inconclusive_and_pauses_never_passes(
    sim_small: SimCluster, mode: str, reason: str
) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    query = Q if mode != "refused" else "sum(rate(x[5m])"
    ev.set_query(Q, 3.0)
    job = _job(sim_small)
    progress = job.plan(_Named("prod"), {"query": query, "success": "result < 100", "count": "2"}, now=T0)
    if mode == "empty":
        ev.set_query(Q, None)
    elif mode in ("down", "401", "malformed"):
        ev.prometheus_mode = mode
    ticks = _run(job, progress, 6)
    assert not any(t.done for t in ticks)
    asked = ticks[-1]
    assert asked.choice is not None
    assert asked.choice.key == f"{PAUSE_KIND}:analysis:1"
    assert reason in asked.choice.question
    assert [o.id for o in asked.choice.options] == ["wait", "waive", "abort"]
    assert asked.card[0].startswith("Waiting on evidence: analysis Inconclusive")
    assert {m["phase"] for m in asked.progress["measurements"]} == {"Inconclusive"}


def test_wait_measures_a_fresh_round_and_abort_fails_the_step(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 3.0)
    job, cluster = _job(sim_small), _Named("prod")
    progress = job.plan(cluster, {"query": Q, "success": "result < 100", "count": "2"}, now=T0)
    ev.prometheus_mode = "down"
    asked = _run(job, progress, 4)[-1]
    assert asked.choice is not None
    ev.prometheus_mode = "up"
    # Wait: a new round from now, and Prometheus is back: two good measurements pass.
    again = job.tick(
        cluster,
        _stored(asked.progress),
        now=T0 + timedelta(minutes=5),
        decision=Decision(choice_key=asked.choice.key, option="wait", by="U1"),
    )
    assert again.progress["round"] == 1
    done = _run(job, again.progress, 3, start=6)[-1]
    assert (done.done, done.ok) == (True, True)
    # The series keeps the inconclusive measurements of the first round.
    assert [m["round"] for m in done.progress["measurements"]] == [0, 0, 1, 1]

    aborted = job.tick(
        cluster,
        _stored(asked.progress),
        now=T0 + timedelta(minutes=5),
        decision=Decision(choice_key=asked.choice.key, option="abort", by="U1"),
    )
    assert (aborted.done, aborted.ok) == (True, False)
    assert "aborted while Inconclusive" in aborted.detail


def test_a_condition_that_cannot_be_decided_is_error_after_four_in_a_row(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 3.0)
    job = _job(sim_small)
    # result[0] on a single number cannot be decided: an Error measurement each time.
    progress = job.plan(_Named("prod"), {"query": Q, "success": "result[0] < 5", "count": "10"}, now=T0)
    ticks = _run(job, progress, 10)
    assert len(ticks) == 4
    asked = ticks[-1]
    assert asked.choice is not None
    assert "is in Error: 4 errors in a row" in asked.choice.question
    waived = job.tick(
        _Named("prod"),
        _stored(asked.progress),
        now=T0 + timedelta(minutes=5),
        decision=Decision(choice_key=asked.choice.key, option="waive", by="U2", reason="known metric rename"),
    )
    assert (waived.done, waived.ok) == (True, True)
    assert waived.audit == (("evidence:waived", "analysis: waived by <@U2> (known metric rename)"),)


def test_a_resumed_job_keeps_its_baseline_and_measurements(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 10.0)
    job = _job(sim_small)
    progress = job.plan(_Named("prod"), {"query": Q, "success": "result <= baseline", "count": "4"}, now=T0)
    first = _run(job, progress, 2)
    # The bot dies here; the value moves, but the stored baseline is the one compared against.
    ev.set_query(Q, 9.0)
    again = AnalysisJob(
        lambda: Evidence(prometheuses={"prod": Prometheus(SignalSource(url=f"{sim_small.url}/prometheus"))})
    )
    rest = _run(again, first[-1].progress, 4, start=2)
    assert (rest[-1].done, rest[-1].ok) == (True, True)
    assert rest[-1].progress["baseline"] == 10.0
    assert [m["value"] for m in rest[-1].progress["measurements"]] == [10.0, 10.0, 9.0, 9.0]
    # Not due yet: no measurement is taken twice within an interval.
    early = job.tick(_Named("prod"), _stored(first[0].progress), now=T0 + timedelta(seconds=30))
    assert len(early.progress["measurements"]) == 1
    assert early.wait == 30.0


def test_a_recorded_baseline_wins_over_the_value_now(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    sim_small.sim.evidence.set_query(Q, 50.0)
    recorded = {"taken_at": "2026-11-29T13:55:00Z", "alerts": None, "analysis": {Q: 12.5}, "errors": {}}
    progress = _job(sim_small).plan(
        _Named("prod"),
        {"query": Q, "success": "result < baseline", BASELINE_ARG: json.dumps(recorded)},
        now=T0,
    )
    assert (progress["baseline"], progress["baseline_from"]) == (12.5, "snapshot")
    assert progress["baseline_at"] == "2026-11-29T13:55:00Z"
    # A query the snapshot has no value for (its source gave none) takes the value now.
    other = _job(sim_small).plan(
        _Named("prod"),
        {
            "query": Q,
            "success": "result < baseline",
            BASELINE_ARG: json.dumps({**recorded, "analysis": {Q: None}}),
        },
        now=T0,
    )
    assert (other["baseline"], other["baseline_from"]) == (50.0, "plan")


def test_analysis_is_a_plan_kind_that_refuses_bad_arguments_with_a_reason() -> None:
    kind = job_kind("analysis")
    assert kind is not None
    assert not kind.mutating
    kind.check({"query": Q, "success": "result < 1.2 * baseline + 5", "interval": "30s", "count": "5"})
    with pytest.raises(UserError, match="an analysis needs success, failure or both"):
        kind.check({"query": Q})
    with pytest.raises(UserError, match=r"success: .*calls os\.system, which conditions do not have"):
        kind.check({"query": Q, "success": "os.system('x') == 0"})
    with pytest.raises(UserError, match="query: give the PromQL"):
        kind.check({"query": " ", "success": "result < 1"})
    with pytest.raises(UserError, match="count: must be between 1 and 100"):
        kind.check({"query": Q, "success": "result < 1", "count": "0"})


def test_a_cluster_without_prometheus_is_not_refused_but_measures_nothing() -> None:
    """The lead's decision: a person check, never a pass (tests/test_evidence_no_source.py)."""
    job = AnalysisJob(lambda: Evidence())
    progress = job.plan(_Named("prod"), {"query": Q, "success": "result < 1"}, now=T0)
    assert progress["no_source"].startswith("No Prometheus configured for prod: nothing measured.")
    assert progress["measurements"] == []


def test_the_measurements_the_job_keeps_are_what_the_gate_and_the_report_draw(sim_small: SimCluster) -> None:
    """The panels' loader reads the job's stored progress as the jobs table keeps it: the query,
    the baseline, every measurement (no data as a gap, never a zero) and the outcome."""
    from bot.core.evidence.view import analysis_lines, analysis_view, step_view

    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 10.0)
    job = _job(sim_small)
    progress = job.plan(
        _Named("prod"), {"query": Q, "success": "result < 1.2 * baseline + 5", "count": "3"}, now=T0
    )
    ev.set_query(Q, 12.0)
    ticks = _run(job, progress, 2)
    ev.set_query(Q, 13.0)
    ticks += _run(job, ticks[-1].progress, 5, start=2)
    assert ticks[-1].done
    assert ticks[-1].ok
    stored = _stored(ticks[-1].progress)

    view = analysis_view(stored, name="settle-4xx", done=True, ok=True)
    assert (view.query, view.baseline, view.outcome, view.count) == (Q, 10.0, "Successful", 3)
    assert [p.value for p in view.points] == [12.0, 12.0, 13.0]
    assert view.points[0].at == T0
    assert step_view("analysis", stored, done=True, ok=True, name="settle-4xx").analyses == (view,)
    text = "\n".join(analysis_lines(view, markup=False))
    assert "settle-4xx" in text
    assert "13" in text
    assert "baseline 10" in text
