"""An evidence step on a cluster whose configuration names no Alertmanager or Prometheus: not
refused, never passed — a person check whose question says plainly that nothing was measured,
recorded as "not measured (no source)" in the step's note, the audit log and the evidence views;
in the `background:` of a drain it says so once and pauses nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.core.evidence.view import NOT_MEASURED, evidence_blocks, evidence_text, now_line, step_view
from bot.core.jobs.alerts import AlertsJob, Evidence
from bot.core.jobs.analysis import AnalysisJob
from bot.core.jobs.background import BACKGROUND_ARG
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import default_jobs
from bot.core.rendering import inert_naming
from bot.frontdoor.rehearse import load_plan_file
from tests.support.blockkit import message_blocks
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import node, pod

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
Q = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'


class Prod(FakeCluster):
    """The in-memory cluster under its configured name (what evidence is looked up by)."""

    name = "prod"


def test_an_alerts_step_without_alertmanager_asks_a_person_and_records_not_measured() -> None:
    job = AlertsJob(Evidence)
    progress = job.plan(Prod(), {"settle": "10m"}, now=T0)
    assert progress["outcome"] == NOT_MEASURED
    tick = job.tick(Prod(), progress, now=T0)
    assert not tick.done
    assert tick.choice is not None
    assert tick.choice.key == "evidence_no_source:alerts"
    assert tick.choice.question == (
        "No Alertmanager configured for prod: nothing measured. Confirm no new alerts by eye"
    )
    assert [o.label for o in tick.choice.options] == ["Confirmed by eye", "Not fine: fail the step"]
    assert tick.card == (
        "Not measured: No Alertmanager configured for prod: nothing measured. Confirm no new alerts by eye",
    )
    # Nothing is measured while people have not answered: it never passes by itself.
    later = job.tick(Prod(), json.loads(json.dumps(tick.progress)), now=T0 + timedelta(hours=2))
    assert not later.done
    assert later.choice is not None
    done = job.tick(
        Prod(),
        later.progress,
        now=T0,
        decision=Decision(choice_key=later.choice.key, option="confirm", by="U0SHADOW"),
    )
    assert (done.done, done.ok) == (True, True)
    assert done.detail == "alerts: not measured (no source) — checked by eye by <@U0SHADOW>"
    # The thread's line names the person as a mention (the driver keeps it, making the rest inert).
    (said,) = done.posts
    assert (said.text, said.people) == (done.detail, ("U0SHADOW",))
    assert inert_naming(said.text, said.people) == done.detail
    assert done.audit[0][0] == "evidence:by-eye"
    view = step_view("alerts", done.progress, done=True, ok=True, name="settle-alerts")
    assert view.alerts is not None
    assert view.alerts.outcome == NOT_MEASURED
    text = "\n".join(evidence_text(view))
    assert "Alerts: not measured (no source)" in text
    assert "Successful" not in text
    assert "No Alertmanager configured for prod" in text
    assert message_blocks({"blocks": evidence_blocks(view)})
    running = step_view("alerts", tick.progress, done=False, ok=False)
    assert now_line(running, T0) == "Waiting on evidence: alerts not measured (no source) — confirm by eye"


def test_an_analysis_without_prometheus_names_the_query_and_a_refusal_fails_the_step() -> None:
    job = AnalysisJob(Evidence)
    progress = job.plan(Prod(), {"query": Q, "success": "result < 1.2 * baseline + 5"}, now=T0)
    tick = job.tick(Prod(), progress, now=T0)
    assert tick.choice is not None
    assert tick.choice.key == "evidence_no_source:analysis"
    assert tick.choice.question == (
        "No Prometheus configured for prod: nothing measured. Confirm by eye that it stays near its baseline: "
        f"`{Q}`"
    )
    assert job.dry_run(Prod(), progress) == [
        f"would measure nothing and ask people instead: {tick.choice.question}"
    ]
    failed = job.tick(
        Prod(),
        tick.progress,
        now=T0,
        decision=Decision(choice_key=tick.choice.key, option="refuse", by="U0PRIMARY"),
    )
    assert (failed.done, failed.ok) == (True, False)
    assert failed.detail == "analysis: not measured (no source) — <@U0PRIMARY> did not confirm it by eye"
    view = step_view("analysis", failed.progress, done=True, ok=False, name="settle-apiserver-4xx")
    assert view.analyses[0].outcome == NOT_MEASURED
    assert evidence_text(view)[0] == ":heavy_minus_sign: *settle-apiserver-4xx* — not measured (no source)"


def test_a_drains_background_without_sources_says_so_once_and_does_not_pause() -> None:
    nodes = [node(n, "workers") for n in ("n1", "n2")]
    pods = [pod("shop", f"web-{n}", owner=("ReplicaSet", "web-5d8f"), node_name=n) for n in ("n1", "n2")]
    fake = Prod(nodes=nodes, pods=pods)
    background = json.dumps(
        [
            {"name": "alerts", "args": {"ignore": "^Watchdog$"}},
            {"name": "analysis", "args": {"query": Q, "success": "result < 1.2 * baseline + 5"}},
        ]
    )
    drain = default_jobs(("eks.amazonaws.com/nodegroup",)).get("drain")
    assert drain is not None
    driver = JobDriver(drain, fake, {"nodegroup": "workers", BACKGROUND_ARG: background}, now=lambda: T0)
    driver.run(until=lambda d: ("evict", "shop/web-n1") in fake.writes)
    fake.finish("shop/web-n1")
    driver.run(until=lambda d: ("evict", "shop/web-n2") in fake.writes)
    fake.finish("shop/web-n2")
    driver.run()
    assert driver.choice is None
    assert driver.done
    assert driver.last is not None
    assert driver.last.ok
    told = [text for key, text in driver.posts.items() if key.startswith("background-no-source:")]
    assert told == [
        "background alerts: not measured: no source — No Alertmanager configured for prod: nothing measured. "
        "Confirm no new alerts by eye. It does not pause this step.",
        "background analysis: not measured: no source — No Prometheus configured for prod: nothing measured. "
        f"Confirm by eye that it stays near its baseline: `{Q}`. It does not pause this step.",
    ]


def test_the_shipped_plans_check_alerts_and_the_apiserver_4xx_rate_in_settle_and_behind_each_node_group() -> (
    None
):
    for name, disruptive in (("eks-nodegroups", "drain"), ("eks-managed", "eks-update-nodegroup")):
        plan, _ = load_plan_file(name)
        ids = [s.id for s in plan.steps]
        settle = ids.index("watch-settle")
        assert ids[settle + 1 : settle + 4] == ["settle-alerts", "settle-apiserver-4xx", "snapshot-post"], (
            name
        )
        assert [c.name for c in plan.step("settle-alerts").actions] == ["alerts"]
        (analysis,) = plan.step("settle-apiserver-4xx").actions
        assert (analysis.args["query"], analysis.args["success"]) == (Q, "result < 1.2 * baseline + 5")
        steps = [s for s in plan.steps if any(c.name == disruptive for c in s.actions)]
        assert steps, name
        for step in steps:
            assert [c.name for c in step.background] == ["alerts", "analysis"], step.id
            assert step.background[1].args["query"] == Q
