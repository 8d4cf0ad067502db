"""Issue 39's acceptance with the REAL Prometheus and Alertmanager (built from their Go modules,
started by tests/support/observability.py), driving the bot's real drain job as the registry
builds it — with its step's `background:` and `silence:` — on the in-memory cluster, on the wall
clock the real servers keep:

- a real rule on the sim's `apiserver_request_total`, which the scenario's burst of 403s changes,
  fires a real alert during the drain of the first node: the drain pauses before the next node,
  within two polls of the alert reaching Alertmanager, and says why;
- the step's silence lease (created after the first healthy check) keeps it from paging:
  Alertmanager shows it suppressed by the bot's silence id, while the gate counts it as new;
- the alert already firing at the baseline fails nothing;
- on a crash and restart the lease is cut to its tail by the interruption and adopted by id when
  the step resumes; it never outlives `max`;
- Prometheus taken away mid-step gives Inconclusive and a pause before the next node, never a pass.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.leases import HOLD, TAIL
from bot.core.evidence.matchers import parse_matcher
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.background import BACKGROUND_ARG, SILENCE_ARG
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.trail import TRAIL, make_trail
from bot.errors import EvidenceUnavailable
from bot.records import SignalSource
from bot.sim.cluster import SimCluster
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import node, pod
from tests.support.observability import Observability

LABELS = ("eks.amazonaws.com/nodegroup",)
RATE = 'sum(rate(apiserver_request_total{code=~"4.."}[10s]))'
RULES = f"""\
groups:
  - name: upgrade
    rules:
      - alert: KubeAPI4xxHigh
        expr: {RATE} > 1
        labels: {{severity: warning, cluster: prod}}
      - alert: AlwaysFiring
        expr: vector(1)
        labels: {{severity: warning, cluster: prod}}
"""


class NamedCluster(FakeCluster):
    """The in-memory cluster under its configured name (the evidence is looked up by it)."""

    name = "prod"


def _cluster() -> NamedCluster:
    return NamedCluster(
        nodes=[node(n, "workers") for n in ("n1", "n2", "n3")],
        pods=[
            pod("shop", f"web-{n}", owner=("ReplicaSet", "web-5d8f"), node_name=n) for n in ("n1", "n2", "n3")
        ],
    )


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


def _states(driver: JobDriver) -> dict[str, str]:
    return {n: v["state"] for n, v in driver.progress["nodes"].items()}


def test_a_real_alert_pauses_the_drain_before_its_next_node_while_the_lease_silences_it(
    sim_small: SimCluster, observability: Callable[..., Observability]
) -> None:
    obs = observability(scrape=f"{sim_small.url}/metrics", rules=RULES)
    am = Alertmanager(SignalSource(url=obs.alertmanager.url))
    prom = Prometheus(SignalSource(url=obs.prometheus.url))
    scope = (parse_matcher('cluster="prod"'),)
    # The baseline: AlwaysFiring fires before the step.
    _until(lambda: am.alerts(scope), lambda a: [x.name for x in a] == ["AlwaysFiring"])
    job = default_jobs(LABELS, evidence=Evidence({"prod": (am, scope)}, {"prod": prom})).get("drain")
    assert job is not None
    fake = _cluster()
    silence = json.dumps({"matchers": ['alertname="KubeAPI4xxHigh"'], "max": "2h"})
    args = {"nodegroup": "workers", BACKGROUND_ARG: '[{"name": "alerts", "args": {}}]', SILENCE_ARG: silence}
    driver = JobDriver(job, fake, args)
    driver.progress[TRAIL] = make_trail(run_id="R1", step_id="drain-workers", job_id=1, approved_by=["U1"])
    driver.run(until=lambda d: ("evict", "shop/web-n1") in fake.writes)
    lease = driver.progress["background"]["silence"]
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert (held.created_by, held.state) == ("upgrade-bot/R1/drain-workers", "active")
    assert abs((held.ends_at - datetime.now(UTC)) - HOLD) < timedelta(minutes=1)

    # The scenario's fault: a burst of 403s the apiserver counts; Prometheus' rule fires.
    _post(f"{sim_small.url}/evidence/requests", {"code": 403, "count": 1})
    _until(lambda: _has(prom, 'apiserver_request_total{code="403"}'), bool)
    _post(f"{sim_small.url}/evidence/requests", {"code": 403, "count": 600})
    _until(lambda: am.alerts(scope), lambda a: "KubeAPI4xxHigh" in [x.name for x in a], timeout=90)
    polls_before = _polls(driver)
    fake.finish("shop/web-n1")
    driver.run(timeout=90)
    assert driver.choice is not None
    assert _polls(driver) - polls_before <= 2
    assert (
        "background alerts failed — alerts: new alert KubeAPI4xxHigh started firing" in driver.choice.question
    )
    assert _states(driver) == {"n1": "done", "n2": "cordoned", "n3": "cordoned"}
    assert ("evict", "shop/web-n2") not in fake.writes
    seen = driver.progress["background"]["checks"][0]["state"]["seen"]
    # New, and held only by this run's silence; AlwaysFiring was at the baseline and fails nothing.
    assert seen == {"new": 1, "pre_existing": 1, "silenced_by_run": 1}
    [alert] = [a for a in am.alerts(scope) if a.name == "KubeAPI4xxHigh"]
    assert (alert.state, alert.silenced_by) == ("suppressed", (lease["id"],))
    # Paused: the lease keeps only its tail.
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert held.ends_at <= datetime.now(UTC) + TAIL

    # A crash and a restart: the new leader interrupts the job (its `release`: the tail again),
    # and the resumed job adopts the same silence by its id.
    job.release(fake, driver.progress, now=datetime.now(UTC))  # type: ignore[attr-defined]
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert held.ends_at <= datetime.now(UTC) + TAIL
    again = JobDriver(job, fake, progress=driver.progress)
    assert again.choice is None
    waived = again.tick(_decision(driver, "waive"))
    assert waived.choice is None
    assert again.progress["background"]["silence"]["id"] == lease["id"]
    [held] = [s for s in am.silences() if s.id == lease["id"]]
    assert held.ends_at > datetime.now(UTC) + TAIL  # held again, by id
    started = datetime.fromisoformat(again.progress["background"]["silence"]["since"].replace("Z", "+00:00"))
    assert held.ends_at <= started + timedelta(hours=2)  # never past max


def test_prometheus_taken_away_mid_drain_pauses_it_inconclusive(
    sim_small: SimCluster, observability: Callable[..., Observability]
) -> None:
    obs = observability(scrape=f"{sim_small.url}/metrics")
    prom = Prometheus(SignalSource(url=obs.prometheus.url), timeout=2)
    _until(lambda: _has(prom, 'up{job="sim"}'), bool)
    job = default_jobs(LABELS, evidence=Evidence(prometheuses={"prod": prom})).get("drain")
    assert job is not None
    fake = _cluster()
    analysis = {"query": 'up{job="sim"}', "success": "result == 1", "interval": "1s"}
    driver = JobDriver(
        job,
        fake,
        {"nodegroup": "workers", BACKGROUND_ARG: json.dumps([{"name": "analysis", "args": analysis}])},
    )
    driver.run(until=lambda d: ("evict", "shop/web-n1") in fake.writes)
    obs.stop_prometheus()
    fake.finish("shop/web-n1")
    driver.run(timeout=60)
    assert driver.choice is not None
    assert "background analysis is Inconclusive" in driver.choice.question
    assert "Prometheus is unreachable" in driver.choice.question
    assert _states(driver) == {"n1": "done", "n2": "cordoned", "n3": "cordoned"}
    phases = [m["phase"] for m in driver.progress["background"]["checks"][0]["state"]["measurements"]]
    # Before n2 began, Prometheus was asked again, and no answer is no pass.
    assert "Successful" in phases
    assert phases[-1] == "Inconclusive"


def _has(prom: Prometheus, query: str) -> bool:
    try:
        return bool(prom.query(query))
    except EvidenceUnavailable:
        return False


def _polls(driver: JobDriver) -> int:
    """How many times the background alerts check has asked Alertmanager."""
    return int(driver.progress["background"]["checks"][0]["state"].get("polls", 0))


def _decision(driver: JobDriver, option: str) -> Decision:
    assert driver.choice is not None
    return Decision(choice_key=driver.choice.key, option=option, by="U1", reason="on call agrees")
