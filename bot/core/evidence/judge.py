"""How evidence decides: the pure rules behind the `alerts` and `analysis` plan actions, with the
outcomes of Argo Rollouts' AnalysisRun: Successful, Failed, Inconclusive (pause and ask people) and
Error (too many consecutive errors: pause and ask). Nothing here reads a clock or the network:
the jobs pass in what they read and when.

No data never passes: an `EvidenceUnavailable` reading is an Inconclusive measurement, and an
analysis whose every measurement was inconclusive ends Inconclusive, never Successful."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from bot.core.evidence.conditions import Condition, ConditionError
from bot.core.evidence.view import at_time
from bot.errors import EvidenceUnavailable
from bot.records import Alert, Sample

#: Argo Rollouts' default consecutiveErrorLimit: the fourth error in a row pauses.
CONSECUTIVE_ERROR_LIMIT = 4


class Outcome(StrEnum):
    RUNNING = "Running"
    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"
    ERROR = "Error"


# ----- alerts: {settle, ignore, timeout} -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AlertBaseline:
    """What was firing at the snapshot: fingerprint → (labels, startsAt)."""

    alerts: Mapping[str, tuple[Mapping[str, str], datetime]]
    taken_at: datetime

    @classmethod
    def of(cls, alerts: Iterable[Alert], taken_at: datetime) -> AlertBaseline:
        return cls(alerts={a.fingerprint: (dict(a.labels), a.starts_at) for a in alerts}, taken_at=taken_at)


@dataclass(frozen=True, kw_only=True)
class AlertVerdict:
    outcome: Outcome
    #: Alerts not in the baseline that started after the step began (silenced ones included).
    new: tuple[Alert, ...] = ()
    #: Firing now and already in the baseline: reported, never blocking.
    pre_existing: int = 0
    #: New alerts held only by this run's silences (still counted as new).
    silenced_by_run: int = 0
    reason: str = ""
    #: When the step may pass if nothing new appears (settle after the last new alert cleared).
    quiet_since: datetime | None = None


def judge_alerts(
    alerts: Sequence[Alert],
    *,
    baseline: AlertBaseline,
    step_started: datetime,
    now: datetime,
    settle: timedelta,
    timeout: timedelta,
    ignore: re.Pattern[str] | None = None,
    run_silences: frozenset[str] = frozenset(),
    quiet_since: datetime | None = None,
    background: bool = False,
) -> AlertVerdict:
    """One poll of `alerts: {settle, ignore, timeout}`.

    A new alert is a fingerprint not in the baseline whose startsAt is after the step began; it
    counts even when only this run's silences hold it. `severity="critical"` fails at once, and
    so does any new alert in the background of a disruptive step (pause before the next node).
    Otherwise the step passes after `settle` with nothing new, and fails at `timeout` while new
    alerts still fire."""
    new: list[Alert] = []
    pre = 0
    for a in alerts:
        if ignore is not None and ignore.search(a.name):
            continue
        if a.fingerprint in baseline.alerts:
            pre += 1
        elif a.starts_at > step_started:
            new.append(a)
    new.sort(key=lambda a: (a.starts_at, a.fingerprint))
    by_run = sum(1 for a in new if a.silenced_by and set(a.silenced_by) <= run_silences)
    base = AlertVerdict(outcome=Outcome.RUNNING, new=tuple(new), pre_existing=pre, silenced_by_run=by_run)
    critical = [a for a in new if a.severity == "critical"]
    if critical:
        return replace(
            base, outcome=Outcome.FAILED, reason=f"critical alert {_names(critical)} started firing"
        )
    if new and background:
        return replace(base, outcome=Outcome.FAILED, reason=f"new alert {_names(new)} started firing")
    if new:
        if now - step_started >= timeout:
            return replace(
                base, outcome=Outcome.FAILED, reason=f"still firing after {_span(timeout)}: {_names(new)}"
            )
        return replace(base, reason=f"waiting: {_names(new)} firing")
    since = quiet_since or step_started
    if now - since >= settle:
        return replace(base, outcome=Outcome.SUCCESSFUL, quiet_since=since)
    return replace(base, quiet_since=since, reason=f"settling until {at_time(since + settle)}")


def _names(alerts: Sequence[Alert]) -> str:
    names = sorted({a.name or a.fingerprint for a in alerts})
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _span(d: timedelta) -> str:
    minutes = int(d.total_seconds() // 60)
    return f"{minutes}m" if minutes else f"{int(d.total_seconds())}s"


# ----- analysis: {query, success, failure?, interval, count, failure_limit, inconclusive_limit} ----


@dataclass(frozen=True, kw_only=True)
class Measurement:
    at: datetime
    phase: Outcome
    value: float | list[float] | None = None
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class AnalysisSpec:
    query: str
    success: Condition | None
    failure: Condition | None = None
    interval: timedelta = timedelta(minutes=1)
    count: int = 5
    failure_limit: int = 1
    inconclusive_limit: int = 1

    def __post_init__(self) -> None:
        if self.success is None and self.failure is None:
            raise ConditionError("an analysis needs success, failure or both")


@dataclass(frozen=True, kw_only=True)
class AnalysisState:
    measurements: tuple[Measurement, ...] = ()
    outcome: Outcome = Outcome.RUNNING
    reason: str = ""
    consecutive_errors: int = field(default=0)


def value_of(samples: Sequence[Sample]) -> float | list[float]:
    """A single sample is a number; several, a list in label order (result[0] picks one)."""
    if len(samples) == 1:
        return samples[0].value
    ordered = sorted(samples, key=lambda s: sorted(s.labels.items()))
    return [s.value for s in ordered]


def measure(
    spec: AnalysisSpec,
    reading: Sequence[Sample] | EvidenceUnavailable,
    *,
    baseline: float | list[float] | None,
    at: datetime,
) -> Measurement:
    """One measurement, Argo's rules: failure true → Failed; success true → Successful; only one of
    them given and not met → the other; both given, neither met → Inconclusive. No data is
    Inconclusive; a condition that cannot be evaluated is Error."""
    if isinstance(reading, EvidenceUnavailable):
        return Measurement(at=at, phase=Outcome.INCONCLUSIVE, message=reading.reason)
    value = value_of(reading)
    try:
        failed = spec.failure.holds(value, baseline) if spec.failure is not None else None
        succeeded = spec.success.holds(value, baseline) if spec.success is not None else None
    except ConditionError as exc:
        return Measurement(at=at, phase=Outcome.ERROR, value=value, message=str(exc))
    if failed:
        return Measurement(at=at, phase=Outcome.FAILED, value=value, message=f"failure: {spec.failure.expr}")  # type: ignore[union-attr]
    if succeeded:
        return Measurement(at=at, phase=Outcome.SUCCESSFUL, value=value)
    if succeeded is False and failed is None:
        return Measurement(at=at, phase=Outcome.FAILED, value=value, message=f"not met: {spec.success.expr}")  # type: ignore[union-attr]
    if failed is False and succeeded is None:
        return Measurement(at=at, phase=Outcome.SUCCESSFUL, value=value)
    return Measurement(
        at=at, phase=Outcome.INCONCLUSIVE, value=value, message="neither success nor failure met"
    )


def advance(spec: AnalysisSpec, state: AnalysisState, m: Measurement) -> AnalysisState:
    """The run after one more measurement (Argo's AnalysisRun assessment)."""
    ms = (*state.measurements, m)
    errors = state.consecutive_errors + 1 if m.phase is Outcome.ERROR else 0
    failed = sum(1 for x in ms if x.phase is Outcome.FAILED)
    inconclusive = sum(1 for x in ms if x.phase is Outcome.INCONCLUSIVE)
    successful = sum(1 for x in ms if x.phase is Outcome.SUCCESSFUL)
    new = AnalysisState(measurements=ms, consecutive_errors=errors)
    if errors >= CONSECUTIVE_ERROR_LIMIT:
        return replace(new, outcome=Outcome.ERROR, reason=f"{errors} errors in a row: {m.message}")
    # Argo: Failed once failures exceed failureLimit, Inconclusive once they exceed its limit.
    if failed > spec.failure_limit:
        return replace(new, outcome=Outcome.FAILED, reason=f"{failed} failed measurement(s): {m.message}")
    if inconclusive > spec.inconclusive_limit:
        return replace(new, outcome=Outcome.INCONCLUSIVE, reason=m.message or "inconclusive")
    done = len([x for x in ms if x.phase is not Outcome.ERROR]) >= spec.count
    if done:
        if successful == 0:
            return replace(new, outcome=Outcome.INCONCLUSIVE, reason="no successful measurement")
        return replace(new, outcome=Outcome.SUCCESSFUL)
    return new
