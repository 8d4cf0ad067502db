"""The evidence gate's rules: new alerts against a baseline, and analyses with Argo Rollouts'
outcomes over CEL conditions. No data never passes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.core.evidence.conditions import Condition, ConditionError
from bot.core.evidence.judge import (
    AlertBaseline,
    AlertVerdict,
    AnalysisSpec,
    AnalysisState,
    Outcome,
    advance,
    judge_alerts,
    measure,
)
from bot.errors import EvidenceUnavailable
from bot.records import Alert, Sample

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)


def _alert(
    fp: str, name: str, starts: datetime, severity: str = "warning", silenced: tuple[str, ...] = ()
) -> Alert:
    return Alert(
        fingerprint=fp,
        labels={"alertname": name, "severity": severity},
        starts_at=starts,
        state="suppressed" if silenced else "active",
        silenced_by=silenced,
    )


OLD = _alert("aa", "Watchdog", T0 - timedelta(hours=3))
BASE = AlertBaseline.of([OLD], T0)


def _judge(alerts: list[Alert], now: datetime, **kw: Any) -> AlertVerdict:
    return judge_alerts(
        alerts,
        baseline=BASE,
        step_started=T0,
        settle=timedelta(minutes=10),
        timeout=timedelta(minutes=30),
        now=now,
        **kw,
    )


def test_pre_existing_alerts_do_not_fail_and_the_step_passes_after_settle() -> None:
    still = _judge([OLD], T0 + timedelta(minutes=5))
    assert (still.outcome, still.pre_existing, still.new) == (Outcome.RUNNING, 1, ())
    done = _judge([OLD], T0 + timedelta(minutes=10))
    assert done.outcome is Outcome.SUCCESSFUL


def test_settling_says_until_when_in_utc_never_a_bare_time_of_some_zone() -> None:
    # "settling until 14:12" read as local time by a team elsewhere; from a Tokyo-zoned start,
    # it said 23:12.
    assert _judge([OLD], T0 + timedelta(minutes=5)).reason == "settling until 14:12 UTC"
    tokyo = judge_alerts(
        [OLD],
        baseline=BASE,
        step_started=T0.astimezone(ZoneInfo("Asia/Tokyo")),
        settle=timedelta(minutes=10),
        timeout=timedelta(minutes=30),
        now=T0 + timedelta(minutes=5),
    )
    assert tokyo.reason == "settling until 14:12 UTC"


def test_a_new_critical_alert_fails_at_once_even_when_only_this_runs_silence_holds_it() -> None:
    new = _alert("bb", "KubeAPIErrorsHigh", T0 + timedelta(minutes=1), "critical", silenced=("s1",))
    v = _judge([OLD, new], T0 + timedelta(minutes=2), run_silences=frozenset({"s1"}))
    assert (v.outcome, [a.fingerprint for a in v.new], v.silenced_by_run) == (Outcome.FAILED, ["bb"], 1)
    assert v.reason == "critical alert KubeAPIErrorsHigh started firing"


def test_a_new_warning_waits_then_fails_at_timeout_and_fails_at_once_in_the_background() -> None:
    new = _alert("cc", "NodeNotReady", T0 + timedelta(minutes=1))
    assert _judge([new], T0 + timedelta(minutes=11)).outcome is Outcome.RUNNING
    late = _judge([new], T0 + timedelta(minutes=30))
    assert (late.outcome, late.reason) == (Outcome.FAILED, "still firing after 30m: NodeNotReady")
    bg = _judge([new], T0 + timedelta(minutes=2), background=True)
    assert (bg.outcome, bg.reason) == (Outcome.FAILED, "new alert NodeNotReady started firing")


def test_an_alert_that_started_before_the_step_or_is_ignored_is_not_new() -> None:
    earlier = _alert("dd", "CPUThrottlingHigh", T0 - timedelta(minutes=1))
    ignored = _alert("ee", "InfoInhibitor", T0 + timedelta(minutes=1), "critical")
    v = _judge([earlier, ignored], T0 + timedelta(minutes=10), ignore=re.compile("^InfoInhibitor$"))
    assert (v.outcome, v.new) == (Outcome.SUCCESSFUL, ())


def _spec(**kw: object) -> AnalysisSpec:
    args: dict[str, object] = {
        "query": "q",
        "success": Condition("result < 1.2 * baseline + 5"),
        "count": 3,
        "failure_limit": 0,
        "inconclusive_limit": 0,
    }
    args.update(kw)
    return AnalysisSpec(**args)  # type: ignore[arg-type]


def _run(
    spec: AnalysisSpec, readings: list[float | EvidenceUnavailable], baseline: float | None = 10.0
) -> AnalysisState:
    state = AnalysisState()
    for i, r in enumerate(readings):
        reading = r if isinstance(r, EvidenceUnavailable) else [Sample(labels={}, value=r, at=T0)]
        state = advance(spec, state, measure(spec, reading, baseline=baseline, at=T0 + timedelta(minutes=i)))
        if state.outcome is not Outcome.RUNNING:
            break
    return state


def test_an_analysis_passes_after_count_good_measurements_and_fails_past_its_limit() -> None:
    assert _run(_spec(), [12.0, 16.9, 1.0]).outcome is Outcome.SUCCESSFUL
    failed = _run(_spec(), [12.0, 17.5, 1.0])
    assert (failed.outcome, len(failed.measurements)) == (Outcome.FAILED, 2)
    assert _run(_spec(failure_limit=1), [17.5, 1.0, 1.0]).outcome is Outcome.SUCCESSFUL


@pytest.mark.parametrize(
    "reason",
    ["Prometheus is unreachable (NewConnectionError)", "no data: the query returned an empty result"],
)
def test_no_data_is_inconclusive_never_a_pass(reason: str) -> None:
    state = _run(_spec(), [1.0, EvidenceUnavailable(reason)])
    assert (state.outcome, state.reason) == (Outcome.INCONCLUSIVE, reason)
    # Even when inconclusives are tolerated, a run without a single good measurement is not a pass.
    gone = _run(_spec(inconclusive_limit=5), [EvidenceUnavailable(reason)] * 3)
    assert (gone.outcome, gone.reason) == (Outcome.INCONCLUSIVE, "no successful measurement")


def test_four_consecutive_errors_pause() -> None:
    # A null baseline makes the arithmetic an error each time.
    state = _run(_spec(count=10), [1.0] * 10, baseline=None)
    assert (state.outcome, len(state.measurements)) == (Outcome.ERROR, 4)
    assert state.reason.startswith("4 errors in a row")


def test_both_conditions_neither_met_is_inconclusive() -> None:
    spec = _spec(success=Condition("result < 1"), failure=Condition("result > 5"))
    assert _run(spec, [3.0]).outcome is Outcome.INCONCLUSIVE


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("result >", "is not a valid condition"),
        ("__import__('os').system('x') == 0", "calls __import__('os').system, which conditions do not have"),
        ("status == 1", "names status; a condition may use only result and baseline"),
        ("result.__class__ == 1", "attribute is not part of a condition"),
        ("[x for x in [1]] == [1]", "write &&, ||, !, true, false, null"),
        ("result > 1 and true", "write &&, ||, !, true, false, null"),
        ("result ** 99999999 > 1", "pow is not part of a condition"),
    ],
)
def test_a_bad_condition_is_refused_with_a_reason(expr: str, message: str) -> None:
    with pytest.raises(ConditionError, match=re.escape(message)):
        Condition(expr)


def test_vectors_are_indexed_and_whole_numbers_mix_with_doubles() -> None:
    assert Condition("result[0] > 1 && result[1] + 1 == 3").holds([2.0, 2.0], None) is True
    assert Condition("'5' == '5' && result * 2 == 3").holds(1.5, None) is True
