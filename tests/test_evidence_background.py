"""`background: [...]` on a disruptive step: the real drain job, wrapped as the registry wraps it,
on the in-memory cluster, with its evidence from the sim's Alertmanager and Prometheus facades
through the real adapters. A new alert during the first node's drain lets that node finish and
pauses before the next one, saying why; people wait, waive (audited) or abort. No answer from
Prometheus pauses too, never passes. The plan loader carries a step's `background:` to its job and
refuses it where it has no meaning."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.matchers import parse_matcher
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.background import BACKGROUND_ARG, parse_background
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import default_jobs
from bot.core.runs.plans import parse_plan
from bot.errors import PlanInvalid
from bot.records import SignalSource
from bot.sim.cluster import SimCluster
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import deployment, node, pod

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
LABELS = ("eks.amazonaws.com/nodegroup",)
Q = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
BACKGROUND = (
    '[{"name": "alerts", "args": {"ignore": "^Watchdog$"}},'
    ' {"name": "analysis", "args": {"query": "' + Q.replace('"', '\\"') + '",'
    ' "success": "result < 1.2 * baseline + 5", "interval": "30s"}}]'
)


class Clock:
    """The job's clock: 20 s pass on each reading (each tick), so polls fall due as they would."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=20)
        return self.now


class NamedCluster(FakeCluster):
    """The in-memory cluster under its configured name (what the evidence is looked up by)."""

    name = "prod"


def _cluster() -> NamedCluster:
    nodes = [node(n, "workers") for n in ("n1", "n2", "n3")]
    pods = [
        pod("shop", f"web-{n}", owner=("ReplicaSet", "web-5d8f"), node_name=n) for n in ("n1", "n2", "n3")
    ]
    return NamedCluster(nodes=nodes, pods=pods)


def _drain(sim: SimCluster) -> Any:
    job = default_jobs(LABELS, evidence=_evidence(sim)).get("drain")
    assert job is not None
    return job


def _evidence(sim: SimCluster) -> Evidence:
    return Evidence(
        {
            "prod": (
                Alertmanager(SignalSource(url=f"{sim.url}/alertmanager")),
                (parse_matcher('cluster="prod"'),),
            )
        },
        {"prod": Prometheus(SignalSource(url=f"{sim.url}/prometheus"))},
    )


def _states(driver: JobDriver) -> Mapping[str, str]:
    return {n: v["state"] for n, v in driver.progress["nodes"].items()}


def test_a_new_alert_pauses_the_drain_before_its_next_node_and_says_why(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.fire({"alertname": "Watchdog", "cluster": "prod"}, (T0 - timedelta(hours=2)).timestamp())
    ev.fire({"alertname": "DiskFilling", "cluster": "prod"}, (T0 - timedelta(hours=1)).timestamp())
    ev.set_query(Q, 4.0)
    fake, clock = _cluster(), Clock()
    driver = JobDriver(
        _drain(sim_small), fake, {"nodegroup": "workers", BACKGROUND_ARG: BACKGROUND}, now=clock
    )
    assert [c["name"] for c in driver.progress["background"]["checks"]] == ["alerts", "analysis"]
    driver.run(until=lambda d: ("evict", "shop/web-n1") in fake.writes)
    assert driver.last is not None
    assert (
        "Background: Alerts: 0 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run"
        in driver.last.card
    )
    # A real problem starts while n1 drains.
    ev.fire(
        {"alertname": "APIServerErrors", "cluster": "prod", "severity": "warning"}, clock.now.timestamp() + 1
    )
    driver.tick()
    fake.finish("shop/web-n1")
    driver.run()
    assert driver.choice is not None
    assert _states(driver) == {"n1": "done", "n2": "cordoned", "n3": "cordoned"}
    assert ("evict", "shop/web-n2") not in fake.writes
    assert driver.choice.key == "evidence_inconclusive:background:1"
    assert driver.choice.question.startswith(
        "The drain paused before its next node: background alerts failed — alerts: new alert APIServerErrors "
        'started firing ({alertname="APIServerErrors", cluster="prod", severity="warning"})'
    )
    assert driver.last is not None
    assert driver.last.card[0].startswith("Waiting on evidence: background alerts failed")
    # Wait: checked again, still firing: asked again, still before n2.
    driver.tick(Decision(choice_key=driver.choice.key, option="wait", by="U0PRIMARY"))
    assert driver.choice is not None
    assert driver.choice.key == "evidence_inconclusive:background:2"
    assert _states(driver)["n2"] == "cordoned"
    # Waive (with a reason): this check no longer pauses the step, which drains on.
    driver.tick(Decision(choice_key=driver.choice.key, option="waive", by="U0SHADOW", reason="known, INC-42"))
    assert ("evidence:waived", "background alerts: waived by <@U0SHADOW> (known, INC-42)") in driver.audit
    fake.finish("shop/web-n2")
    fake.finish("shop/web-n3")
    driver.run()
    assert (driver.done, driver.last.ok if driver.last else None) == (True, True)


def test_prometheus_taken_away_pauses_the_drain_and_abort_fails_it(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 4.0)
    fake, clock = _cluster(), Clock()
    only_analysis = BACKGROUND[BACKGROUND.index('{"name": "analysis"') - 1 :].replace(" {", "[{", 1)
    driver = JobDriver(
        _drain(sim_small), fake, {"nodegroup": "workers", BACKGROUND_ARG: only_analysis}, now=clock
    )
    assert driver.progress["background"]["checks"][0]["state"]["baseline"] == 4.0
    ev.prometheus_mode = "down"
    fake.finish("shop/web-n1")
    driver.run()
    assert driver.choice is not None
    # Within inconclusive_limit, but a node begins only on a reading that passes now.
    assert "background analysis is Inconclusive" in driver.choice.question
    assert "HTTP 503" in driver.choice.question
    phases = [m["phase"] for m in driver.progress["background"]["checks"][0]["state"]["measurements"]]
    assert phases[-1] == "Inconclusive"
    # Taken away before the drain began: not even a cordon.
    assert _states(driver) == {"n1": "pending", "n2": "pending", "n3": "pending"}
    assert fake.writes == []
    driver.tick(Decision(choice_key=driver.choice.key, option="abort", by="U0PRIMARY"))
    assert driver.last is not None
    assert (driver.last.done, driver.last.ok) == (True, False)
    assert driver.last.detail.startswith("drain: aborted by <@U0PRIMARY> after a background check: analysis")


def test_without_background_the_drain_is_itself() -> None:
    fake = _cluster()
    driver = JobDriver(default_jobs(LABELS).get("drain"), fake, {"nodegroup": "workers"}, now=Clock())  # type: ignore[arg-type]
    assert "background" not in driver.progress
    for n in ("n1", "n2", "n3"):
        fake.finish(f"shop/web-{n}")
    driver.run()
    assert driver.done


PLAN = """\
name: bg
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T22:00", end: "2026-11-30T02:00", timezone: UTC}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: drain
    title: Drain
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: workers}}]
    background:
      - alerts: {ignore: '^Watchdog$'}
      - analysis: {query: 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))', success: 'result < 1.2 * baseline + 5'}
"""


def test_the_plan_loader_hands_the_steps_background_to_its_disruptive_action() -> None:
    plan = parse_plan(PLAN)
    step = plan.step("drain")
    assert [c.name for c in step.background] == ["alerts", "analysis"]
    carried = parse_background(step.actions[0].args[BACKGROUND_ARG])
    assert carried == [
        ("alerts", {"ignore": "^Watchdog$"}),
        ("analysis", {"query": Q, "success": "result < 1.2 * baseline + 5"}),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("actions: [{drain: {nodegroup: workers}}]", "actions: [{snapshot: {label: pre}}]"),
         "background: only on a step whose action is drain, restart, eks-update-nodegroup"),
        (("- alerts: {ignore: '^Watchdog$'}", "- snapshot: {label: x}"),
         "'snapshot' is not evidence (background takes alerts, analysis, app-health)"),
        (("success: 'result < 1.2 * baseline + 5'", "success: 'result.foo < 1'"),
         "is not part of a condition"),
    ],
)  # fmt: skip
def test_the_plan_loader_refuses_background_where_it_means_nothing(
    change: tuple[str, str], message: str
) -> None:
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(PLAN.replace(*change))
    assert message in str(caught.value)


def test_a_restart_is_not_stamped_while_a_background_check_fails(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.set_query(Q, 4.0)
    web = deployment("shop", "web")
    web["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    fake = NamedCluster(workloads={("deployment", "shop", "web"): web})
    restart = default_jobs(LABELS, evidence=_evidence(sim_small)).get("restart")
    only_analysis = json.dumps(
        [{"name": "analysis", "args": {"query": Q, "success": "result < 1.2 * baseline + 5"}}]
    )
    driver = JobDriver(
        restart, fake, {"workloads": "deployment/shop/web", BACKGROUND_ARG: only_analysis}, now=Clock()
    )  # type: ignore[arg-type]
    ev.set_query(Q, 50.0)  # past its baseline before anything is restarted
    driver.tick()
    driver.tick()
    assert driver.choice is not None
    assert "The restart paused before its next node: background analysis" in driver.choice.question
    assert fake.writes == []
    # Waived: the restart goes ahead.
    driver.tick(
        Decision(
            choice_key=driver.choice.key, option="waive", by="U0SHADOW", reason="expected during the cutover"
        )
    )
    assert fake.writes == [("restart_workload", "deployment/shop/web")]
