"""The evidence gate's acceptance checks with the real Prometheus and Alertmanager: a real rule on
the simulator's `apiserver_request_total` fires a real alert into the real Alertmanager, which the
gate counts as new (even when the run's own silence suppresses it), while alerts already firing at
the baseline do not fail the step; and Prometheus taken away gives Inconclusive, never a pass."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.conditions import Condition
from bot.core.evidence.judge import (
    AlertBaseline,
    AnalysisSpec,
    AnalysisState,
    Outcome,
    advance,
    judge_alerts,
    measure,
)
from bot.core.evidence.matchers import parse_matcher
from bot.errors import EvidenceUnavailable
from bot.records import Sample, SignalSource
from bot.sim.cluster import SimCluster
from tests.support.observability import Observability

QUERY = 'sum(rate(apiserver_request_total{code=~"4.."}[10s]))'
RULES = f"""\
groups:
  - name: upgrade
    rules:
      - alert: KubeAPI4xxHigh
        expr: {QUERY} > 1
        labels: {{severity: warning, cluster: prod}}
      - alert: AlwaysFiring
        expr: vector(1)
        labels: {{severity: warning, cluster: prod}}
"""


def _post(url: str, body: Any) -> None:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def _until(read: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    value = read()
    while not ok(value):
        assert time.monotonic() < deadline, f"not reached within {timeout}s: {value!r}"
        time.sleep(0.2)
        value = read()
    return value


def _has(prom: Prometheus, query: str) -> bool:
    try:
        return bool(prom.query(query))
    except EvidenceUnavailable:
        return False


def test_a_real_rule_on_a_sim_metric_fails_the_background_check_and_the_silence_only_suppresses_it(
    sim_small: SimCluster, observability: Callable[..., Observability]
) -> None:
    obs = observability(scrape=f"{sim_small.url}/metrics", rules=RULES)
    am = Alertmanager(SignalSource(url=obs.alertmanager.url))
    scope = [parse_matcher('cluster="prod"')]
    # The baseline: what fires before the step (AlwaysFiring), taken as the snapshot takes it.
    before = _until(lambda: am.alerts(scope), lambda a: [x.name for x in a] == ["AlwaysFiring"])
    step_started = datetime.now(UTC)
    baseline = AlertBaseline.of(before, step_started)

    def poll() -> Any:
        return judge_alerts(
            am.alerts(scope),
            baseline=baseline,
            step_started=step_started,
            now=datetime.now(UTC),
            settle=timedelta(minutes=10),
            timeout=timedelta(minutes=30),
            run_silences=frozenset(silences),
            background=True,
        )

    silences: list[str] = []
    first = poll()
    assert (first.outcome, first.pre_existing, first.new) == (Outcome.RUNNING, 1, ())
    # The first healthy check: the step's silence lease starts now, held by this run.
    now = datetime.now(UTC)
    silences.append(
        am.put_silence(
            matchers=[parse_matcher('alertname="KubeAPI4xxHigh"')],
            starts_at=now,
            ends_at=now + timedelta(minutes=25),
            created_by="upgrade-bot/run-1/drain-ng-1",
            comment="upgrade-bot: drain of ng-1",
        )
    )
    # The scenario's fault: a burst of 403s the apiserver counts, which Prometheus scrapes. The
    # series exists first (a counter's first sample is no increase to rate()), then jumps.
    prom = Prometheus(SignalSource(url=obs.prometheus.url))
    _post(f"{sim_small.url}/evidence/requests", {"code": 403, "count": 1})
    _until(lambda: _has(prom, 'apiserver_request_total{code="403"}'), bool)
    _post(f"{sim_small.url}/evidence/requests", {"code": 403, "count": 600})
    verdict = _until(poll, lambda v: v.outcome is not Outcome.RUNNING)
    assert verdict.outcome is Outcome.FAILED
    assert verdict.reason == "new alert KubeAPI4xxHigh started firing"
    assert (verdict.pre_existing, [a.name for a in verdict.new], verdict.silenced_by_run) == (
        1,
        ["KubeAPI4xxHigh"],
        1,
    )
    # Alertmanager itself holds it by the run's silence id: it pages nobody.
    [held] = verdict.new
    assert (held.state, held.silenced_by) == ("suppressed", (silences[0],))


def test_prometheus_taken_away_mid_step_is_inconclusive_never_a_pass(
    sim_small: SimCluster, observability: Callable[..., Observability]
) -> None:
    obs = observability(scrape=f"{sim_small.url}/metrics")
    prom = Prometheus(SignalSource(url=obs.prometheus.url), timeout=2)
    spec = AnalysisSpec(
        query='up{job="sim"}',
        success=Condition("result == 1"),
        count=5,
        failure_limit=0,
        inconclusive_limit=0,
    )

    def reading() -> list[Sample] | EvidenceUnavailable:
        try:
            return prom.query(spec.query)
        except EvidenceUnavailable as exc:
            return exc

    first = _until(reading, lambda r: isinstance(r, list))
    state = advance(spec, AnalysisState(), measure(spec, first, baseline=None, at=datetime.now(UTC)))
    assert state.outcome is Outcome.RUNNING
    obs.stop_prometheus()
    state = advance(spec, state, measure(spec, reading(), baseline=None, at=datetime.now(UTC)))
    assert state.outcome is Outcome.INCONCLUSIVE
    assert state.reason.startswith("Prometheus is unreachable")
