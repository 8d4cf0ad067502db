"""The `analysis` job: a PromQL query measured `count` times, `interval` apart, and judged by the
rules of Argo Rollouts' AnalysisTemplate (`bot.core.evidence.judge.measure` / `advance`) —
`analysis: {query, success, failure?, interval: 1m, count: 5, failure_limit: 1, inconclusive_limit: 1}`.
It writes nothing.

Outcomes: Successful (the step passes), Failed (the step fails, naming the value and the
condition), Inconclusive and Error (4 errors in a row) stop and ask people with a `Choice` keyed
`evidence_inconclusive:analysis:N`: Wait (measure a fresh round), Waive (with a reason, audited),
Abort (the step fails). No data never passes: unreachable, 401/403, a malformed answer, an empty
result or a refused query is an Inconclusive measurement (`EvidenceUnavailable`).

`baseline` is the query's value when the job is planned — or, when the run's `pre` snapshot
recorded one for this query, that value (`bot.core.evidence.baseline`), so a resumed run compares
against the same figure. Without any, the first answer Prometheus gives becomes it.

Every measurement is kept in the job's progress (the jobs table), the shape the gate and report
panels read (docs/evidence-gate.md, "Stored measurements"):

    {"query": "sum(rate(...))", "success": "result < 1.2 * baseline + 5", "failure": "",
     "interval": 60, "count": 5, "failure_limit": 1, "inconclusive_limit": 1,
     "started": "2026-11-29T14:02:00Z", "baseline": 12.5, "baseline_from": "snapshot",
     "baseline_at": "2026-11-29T13:55:00Z", "round": 0, "next_at": "2026-11-29T14:03:00Z",
     "measurements": [{"at": "…", "phase": "Successful", "value": 13.0, "message": "", "round": 0}],
     "outcome": "Running", "reason": "", "asked": 0}
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.evidence.conditions import Condition, ConditionError
from bot.core.evidence.judge import (
    AnalysisSpec,
    AnalysisState,
    Measurement,
    Outcome,
    advance,
    measure,
    value_of,
)
from bot.core.evidence.ports import MetricSource
from bot.core.evidence.view import WAITING_ON_EVIDENCE
from bot.core.jobs.alerts import PAUSE_KIND, Evidence, answered, no_data_choice
from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import duration_arg, int_arg, iso
from bot.core.jobs.nosource import NoSource, person_check, unmeasured
from bot.core.kube.objects import parse_iso
from bot.errors import EvidenceUnavailable, UserError, clip

DEFAULT_INTERVAL = timedelta(minutes=1)
DEFAULT_COUNT = 5
MAX_QUERY = 1000
#: Measurements kept in progress: a sparkline's worth, and a bounded row however long people wait.
KEEP = 120


def _condition(args: Mapping[str, str], name: str) -> Condition | None:
    text = str(args.get(name, "")).strip()
    if not text:
        return None
    try:
        return Condition(text)
    except ConditionError as exc:
        raise UserError(f"{name}: {exc}") from None


def spec_of(args: Mapping[str, str]) -> AnalysisSpec:
    """The analysis the arguments describe; UserError with a short reason when they do not."""
    query = str(args.get("query", "")).strip()
    if not query:
        raise UserError("query: give the PromQL to measure")
    if len(query) > MAX_QUERY:
        raise UserError(f"query: {len(query)} characters is too long (at most {MAX_QUERY})")
    success, failure = _condition(args, "success"), _condition(args, "failure")
    if success is None and failure is None:
        raise UserError(
            "an analysis needs success, failure or both (e.g. success: result < 1.2 * baseline + 5)"
        )
    return AnalysisSpec(
        query=query,
        success=success,
        failure=failure,
        interval=duration_arg(args, "interval", DEFAULT_INTERVAL),
        count=int_arg(args, "count", DEFAULT_COUNT, low=1, high=100),
        failure_limit=int_arg(args, "failure_limit", 1, low=0, high=100),
        inconclusive_limit=int_arg(args, "inconclusive_limit", 1, low=0, high=100),
    )


def check_args(args: Mapping[str, str]) -> None:
    spec_of(args)


def _spec(progress: Mapping[str, Any]) -> AnalysisSpec:
    return AnalysisSpec(
        query=progress["query"],
        success=Condition(progress["success"]) if progress.get("success") else None,
        failure=Condition(progress["failure"]) if progress.get("failure") else None,
        interval=timedelta(seconds=float(progress["interval"])),
        count=int(progress["count"]),
        failure_limit=int(progress["failure_limit"]),
        inconclusive_limit=int(progress["inconclusive_limit"]),
    )


def _stored(m: Measurement, round_: int) -> dict[str, Any]:
    return {"at": iso(m.at), "phase": str(m.phase), "value": m.value, "message": m.message, "round": round_}


def _loaded(raw: Mapping[str, Any]) -> Measurement:
    return Measurement(
        at=parse_iso(raw["at"]) or datetime.min,
        phase=Outcome(raw["phase"]),
        value=raw.get("value"),
        message=str(raw.get("message", "")),
    )


def state_of(progress: Mapping[str, Any]) -> AnalysisState:
    """The current round's assessment, replayed from the stored measurements (a Wait starts a new
    round, so the measurements before it stay in the series but no longer count)."""
    spec = _spec(progress)
    state = AnalysisState()
    for raw in progress.get("measurements", []):
        if int(raw.get("round", 0)) == int(progress.get("round", 0)):
            state = advance(spec, state, _loaded(raw))
    return state


def _figure(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "[" + ", ".join(_figure(v) for v in value[:5]) + (", …" if len(value) > 5 else "") + "]"
    return f"{float(value):.4g}"


class AnalysisJob:
    """`analysis`: see the module docstring."""

    kind = "analysis"
    #: The job service hands `plan` the run's recorded baseline (`BASELINE_ARG`).
    uses_baseline = True

    def __init__(self, evidence: Callable[[], Evidence]) -> None:
        self._evidence = evidence

    def _source(self, cluster: Any) -> MetricSource:
        return self._evidence().metrics(str(getattr(cluster, "name", "")))

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        spec = spec_of(args)
        progress: Progress = {
            "query": spec.query,
            "success": spec.success.expr if spec.success is not None else "",
            "failure": spec.failure.expr if spec.failure is not None else "",
            "interval": spec.interval.total_seconds(),
            "count": spec.count,
            "failure_limit": spec.failure_limit,
            "inconclusive_limit": spec.inconclusive_limit,
            "started": iso(now),
            "baseline": None,
            "baseline_from": "",
            "baseline_at": None,
            "round": 0,
            "next_at": iso(now),
            "measurements": [],
            "outcome": str(Outcome.RUNNING),
            "reason": "",
            "asked": 0,
        }
        try:
            source = self._source(cluster)
        except NoSource as exc:
            progress = unmeasured(progress, exc)
            # The question names what to look at by eye.
            progress["no_source"] = f"{progress['no_source']}: `{clip(spec.query, 200)}`"
            return progress
        recorded = json.loads(str(args.get(BASELINE_ARG) or "{}"))
        value = (recorded.get("analysis") or {}).get(spec.query)
        if value is not None:
            progress.update(baseline=value, baseline_from="snapshot", baseline_at=recorded.get("taken_at"))
            return progress
        # No recorded baseline: the value now, before the step changes anything. Without an
        # answer, the first measurement's answer becomes it (and says so).
        with contextlib.suppress(EvidenceUnavailable):
            progress.update(
                baseline=value_of(source.query(spec.query)), baseline_from="plan", baseline_at=iso(now)
            )
        return progress

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        if progress.get("no_source"):
            return [f"would measure nothing and ask people instead: {progress['no_source']}"]
        conditions = " and ".join(
            f"{name} `{progress[name]}`" for name in ("success", "failure") if progress.get(name)
        )
        return [
            f"would measure `{clip(progress['query'], 120)}` {progress['count']} times, "
            f"{int(progress['interval'])}s apart (writing nothing), judged by {conditions} "
            f"against a baseline of {_figure(progress.get('baseline'))}"
        ]

    def _ask(self, progress: Progress, outcome: Outcome, reason: str, card: tuple[str, ...]) -> Tick:
        n = int(progress.get("asked", 0)) + 1
        new = {**progress, "asked": n, "outcome": str(outcome), "reason": reason}
        what = "Inconclusive" if outcome is Outcome.INCONCLUSIVE else "in Error"
        question = (
            f"Analysis `{clip(progress['query'], 120)}` is {what}: {reason}. "
            "No data never passes: wait and measure again, waive, or abort?"
        )
        return Tick(
            progress=new,
            card=(f"{WAITING_ON_EVIDENCE}analysis {what} — {clip(reason, 100)}", *card[1:]),
            choice=no_data_choice("analysis", n, question),
            wait=0.0,
        )

    def _card(self, progress: Mapping[str, Any]) -> tuple[str, ...]:
        ms = progress.get("measurements", [])
        series = " ".join(_figure(m.get("value")) if m.get("value") is not None else "·" for m in ms[-8:])
        return (
            f"Analysis: {len(ms)} measurement(s) · value {_figure(ms[-1].get('value')) if ms else 'none'}"
            f" · baseline {_figure(progress.get('baseline'))}",
            f"`{clip(progress['query'], 100)}`: {series or 'no measurement yet'}",
        )

    def measure(
        self, cluster: Any, progress: Progress, *, now: datetime
    ) -> tuple[Progress, AnalysisState, Measurement]:
        """One measurement, kept in the progress: the new progress, the round's assessment, and
        the measurement (also the `background:` check's poll)."""
        spec = _spec(progress)
        try:
            reading: Any = self._source(cluster).query(spec.query, None)
        except EvidenceUnavailable as exc:
            reading = exc
        if progress.get("baseline") is None and not isinstance(reading, EvidenceUnavailable):
            progress = {**progress, "baseline": value_of(reading), "baseline_from": "first measurement",
                        "baseline_at": iso(now)}  # fmt: skip
        m = measure(spec, reading, baseline=progress.get("baseline"), at=now)
        measurements = [*progress.get("measurements", []), _stored(m, int(progress.get("round", 0)))][-KEEP:]
        new: Progress = {**progress, "measurements": measurements, "next_at": iso(now + spec.interval)}
        state = state_of(new)
        new["outcome"], new["reason"] = str(state.outcome), state.reason
        return new, state, m

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        if progress.get("no_source"):
            return person_check("analysis", progress, decision)
        aborted = f"aborted while {progress.get('outcome', 'Inconclusive')}: {progress.get('reason', '')}"
        ended = answered("analysis", progress, decision, aborted=aborted)
        if ended is not None:
            return ended
        if decision is not None and decision.choice_key.startswith(f"{PAUSE_KIND}:analysis:"):
            # Wait: a fresh round of measurements, from now; the old ones stay in the series.
            progress = {**progress, "round": int(progress.get("round", 0)) + 1, "next_at": iso(now),
                        "outcome": str(Outcome.RUNNING), "reason": ""}  # fmt: skip
        due = parse_iso(progress.get("next_at")) or now
        if now < due:
            return Tick(progress=progress, card=self._card(progress), wait=(due - now).total_seconds())
        spec = _spec(progress)
        new, state, m = self.measure(cluster, progress, now=now)
        card = self._card(new)
        if state.outcome in (Outcome.SUCCESSFUL, Outcome.FAILED):
            ok = state.outcome is Outcome.SUCCESSFUL
            query, value, baseline = clip(spec.query, 120), _figure(m.value), _figure(new.get("baseline"))
            text = (
                f"analysis: Successful after {len(state.measurements)} measurement(s) of `{query}` (last "
                f"{value}, baseline {baseline})"
                if ok
                else f"analysis: Failed — `{query}` was {value} against a baseline of {baseline} ({state.reason})"
            )
            key = f"analysis-{'successful' if ok else 'failed'}:{progress['started']}:{new['round']}"
            return Tick(progress=new, posts=(Post(key=key, text=text),), card=card, done=True, ok=ok,
                        detail=clip(text, 300), wait=0.0)  # fmt: skip
        if state.outcome in (Outcome.INCONCLUSIVE, Outcome.ERROR):
            return self._ask(new, state.outcome, state.reason, card)
        return Tick(
            progress=new,
            card=(f"{WAITING_ON_EVIDENCE}{card[0]}", card[1]),
            wait=spec.interval.total_seconds(),
        )
