"""What people see of the evidence in Slack (issue 39 item 6): the card's Now line while a step
waits on Alertmanager, each new alert listed with its labels, and the next step's gate showing
the evidence it is decided on — the real `alerts` job against the sim's Alertmanager facade, the
real store, the real slack_sdk client against the stub, every payload validated with slack_sdk's
Block Kit models."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext
from bot.core.delivery import Deliveries
from bot.core.evidence.matchers import parse_matcher
from bot.core.evidence.view import AlertRow, AlertsView, AnalysisView, Point, StoredEvidence
from bot.core.jobs.alerts import AlertsJob, Evidence
from bot.core.jobs.base import JobRegistry
from bot.core.jobs.service import JobService
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.capabilities import StepLongActions
from bot.core.runs.cards import RunCards
from bot.core.runs.report import AlertsLane, EvidenceStep, build_report, to_html, to_json, to_markdown
from bot.core.runs.service import Actor, RunService
from bot.records import SignalSource, StepState
from bot.resources import BUILTIN_TEMPLATES
from bot.sim.cluster import SimCluster
from tests.support import blockkit
from tests.support.browser import chromium, console_errors
from tests.support.clock import FakeClock
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

__all__ = ["chromium"]

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
PLAN = """\
name: settle
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T14:00", end: "2026-11-29T18:00", timezone: UTC}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: settle
    title: No new alerts
    gate: {any_of: [primary]}
    actions: [{alerts: {settle: 10m, timeout: 30m}}]
  - id: next-group
    title: Next node group
    gate: {approve: [primary, shadow]}
"""


@dataclass
class _Named:
    """The kube adapter's one attribute the alerts job reads: the cluster's configured name."""

    name: str


@dataclass
class World:
    store: Store
    runs: RunService
    jobs: JobService
    clock: FakeClock
    stub: SlackStub


@pytest.fixture
def world(tmp_path: Path, slack_stub: SlackStub, sim_small: SimCluster) -> Iterator[World]:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="settle", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    clock = FakeClock(T0)
    am = Alertmanager(SignalSource(url=f"{sim_small.url}/alertmanager"))
    evidence = Evidence({"prod": (am, (parse_matcher('cluster="prod"'),))})
    deliveries = Deliveries(
        store=store,
        poster=SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)),
        clock=clock,
        owner="proc",
    )
    jobs = JobService(
        store=store,
        registry=JobRegistry(jobs={"alerts": AlertsJob(lambda: evidence)}),
        deliveries=deliveries,
        directory=StaticDirectory(),
        clock=clock,
        owner="proc",
        steps=lambda: runs,
    )

    def unavailable(*_: Any) -> Any:
        raise AssertionError("not used")

    runs = RunService(
        store=store,
        directory=StaticDirectory(),
        clock=clock,
        cards=RunCards(
            deliveries=deliveries,
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
            live=jobs.live_sections,
            evidence=StoredEvidence(store),
        ),
        actions=default_registry(),
        action_context=ActionContext(
            take_snapshot=unavailable,
            compare_snapshots=unavailable,
            start_job=lambda request: jobs.start(request, cluster=request.cluster),
        ),
        long_actions=StepLongActions(store, jobs),
    )
    yield World(store=store, runs=runs, jobs=jobs, clock=clock, stub=slack_stub)
    store.close()


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    raw = params.get("blocks") or []
    return json.loads(raw) if isinstance(raw, str) else list(raw)


def latest_card(stub: SlackStub) -> tuple[str, list[dict[str, Any]]]:
    """The run card's text and blocks as Slack shows them now (validated)."""
    calls = [
        c.params
        for c in stub.calls
        if c.method in ("chat.postMessage", "chat.update")
        and not c.params.get("thread_ts")
        and str(c.params.get("text", "")).startswith(":clipboard: *Upgrade run")
    ]
    params = calls[-1]
    return str(params["text"]), blockkit.message_blocks(params)


def gate_message(stub: SlackStub, step: str) -> list[dict[str, Any]]:
    """The blocks of the newest open gate message of `step` (validated)."""
    for call in reversed(stub.calls_to("chat.postMessage")):
        blocks = _blocks(call.params)
        if any(b.get("block_id") == "gate" for b in blocks) and f"`{step}`" in json.dumps(blocks):
            return blockkit.message_blocks(call.params)
    raise AssertionError(f"no gate message for {step}")


def tick(w: World) -> None:
    (row,) = w.store.jobs()
    assert w.jobs.advance(row.id, cluster=_Named("prod")).ticked


def test_the_card_says_what_the_step_waits_on_and_the_next_gate_shows_the_evidence(
    world: World, sim_small: SimCluster
) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    # Firing before the step: pre-existing, reported, never blocking.
    ev.fire({"alertname": "Watchdog", "cluster": "prod"}, (T0 - timedelta(hours=1)).timestamp())
    run = world.runs.start("settle", Actor(user_id="U0PRIMARY")).run
    epoch = run.step_run("settle").epoch
    world.runs.click(R.ButtonRef(run_id=run.id, step_id="settle", epoch=epoch), Actor(user_id="U0PRIMARY"))
    (row,) = world.store.jobs()
    assert world.jobs.claim(row)
    world.jobs.advance(row.id, cluster=_Named("prod"))  # planned: the baseline is taken

    world.clock.advance(timedelta(minutes=5, seconds=48))
    tick(world)
    text, blocks = latest_card(world.stub)
    assert (
        ":hourglass_flowing_sand: Now: `settle` — Waiting on evidence: alerts settle 4m12s left · 0 new"
        in text
    )
    # The job's live lines are plain text (made inert): their times name their zone.
    assert "Alerts: 0 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run" in blockkit.text_of(
        blocks
    )

    # A new alert starts firing: the Now line names it, the live section lists it with its labels.
    ev.fire(
        {"alertname": "KubeAPIErrorsHigh", "cluster": "prod", "severity": "warning", "verb": "LIST"},
        (T0 + timedelta(minutes=6)).timestamp(),
    )
    world.clock.advance(timedelta(minutes=1))
    tick(world)
    text, blocks = latest_card(world.stub)
    assert (
        "Now: `settle` — Waiting on evidence: alerts 1 new firing (KubeAPIErrorsHigh) · fails in 23m12s unless they clear"
        in text
    )
    shown = blockkit.text_of(blocks)
    assert "Alerts: 1 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run" in shown
    assert '• `KubeAPIErrorsHigh` {severity="warning", cluster="prod", verb="LIST"} since 14:08 UTC' in shown

    # It clears; after settle with nothing new the step passes and the next gate shows the evidence.
    ev.resolve({"alertname": "KubeAPIErrorsHigh", "cluster": "prod", "severity": "warning", "verb": "LIST"})
    world.clock.advance(timedelta(minutes=1))
    tick(world)
    world.clock.advance(timedelta(minutes=10))
    tick(world)
    run = world.runs.load(run.id)
    assert run.step_run("settle").state is StepState.SUCCEEDED
    gate = gate_message(world.stub, "next-group")
    context, alerts = gate[1], gate[2]
    assert context["type"] == "context"
    # The gate's times are Slack dates (each reader's own zone), the plan's zone their fallback.
    started, fired = int(T0.timestamp()), int((T0 + timedelta(minutes=6)).timestamp())
    assert alerts["text"]["text"] == (
        f":rotating_light: *Alerts: 0 new since <!date^{started}^{{time}}|2026-11-29 14:02 UTC> · 1 pre-existing"
        " · 0 silenced by this run*\n"
        "_Seen during the step, gone since:_\n"
        '• `KubeAPIErrorsHigh` {severity="warning", cluster="prod", verb="LIST"} since '
        f"<!date^{fired}^{{time}}|2026-11-29 14:08 UTC>"
    )
    assert [b["action_id"] for b in blockkit.buttons(gate)] == ["gate_approve", "gate_reject"]
    # The card no longer says it waits on evidence.
    text, _ = latest_card(world.stub)
    assert "Waiting on evidence" not in text

    # The run report's evidence panel: the step on the alert timeline with the alert it saw (gone
    # since), and the table beneath it.
    report = build_report(world.store, run.id, now=world.clock())
    (lane,) = report.alert_lanes
    assert (lane.step_id, lane.view.outcome) == ("settle", "Successful")
    assert [a.name for a in lane.view.history] == ["KubeAPIErrorsHigh"]
    html = to_html(report, charts=None)
    assert '<svg id="alert-timeline"' in html
    assert "<title>KubeAPIErrorsHigh since" in html
    assert "Alerts: 0 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run" in html
    assert '<code>KubeAPIErrorsHigh</code> {cluster="prod", severity="warning", verb="LIST"} since' in html
    # The Markdown and JSON reports tell the same evidence: the outcome, and the alert timeline
    # (new and gone since, at the baseline, silenced by the run or not).
    section = to_markdown(report).split("\n## Evidence\n", 1)[1].split("\n## ", 1)[0]
    assert "### settle: alerts — Successful" in section
    assert "Alerts: 0 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run" in section
    assert (
        "| KubeAPIErrorsHigh | cluster=prod, severity=warning, verb=LIST | 2026-11-29 14:08:00 UTC | new, gone since | no |"
        in section
    )
    assert "| Watchdog | cluster=prod | 2026-11-29 13:02:00 UTC | at the baseline | no |" in section
    (entry,) = json.loads(to_json(report))["evidence"]
    assert (entry["step_id"], entry["kind"], entry["outcome"]) == ("settle", "alerts", "Successful")
    assert [a["labels"]["alertname"] for a in entry["alerts"]["history"]] == ["KubeAPIErrorsHigh"]
    assert [a["labels"]["alertname"] for a in entry["at_baseline"]] == ["Watchdog"]
    assert entry["alerts"]["settle"] == 600.0


def test_the_markdown_and_json_reports_give_each_analysis_query_baseline_and_measurements(
    world: World,
) -> None:
    run = world.runs.start("settle", Actor(user_id="U0PRIMARY")).run
    analysis = AnalysisView(
        name="settle-4xx",
        query='sum(rate(apiserver_request_total{code=~"4.."}[5m]))',
        baseline=10.0,
        points=(
            Point(at=T0, value=10.0, phase="Successful"),
            Point(at=T0 + timedelta(minutes=1), value=None, phase="Inconclusive"),
            Point(at=T0 + timedelta(minutes=2), value=19.0, phase="Failed"),
        ),
        outcome="Failed",
        success="result < 1.2 * baseline + 5",
        count=5,
    )
    step = EvidenceStep(step_id="settle-4xx", kind="analysis", outcome="Failed",
                        summary="value 19 vs baseline 10 · 3/5 measured", analysis=analysis)  # fmt: skip
    report = dataclasses.replace(build_report(world.store, run.id, now=T0), evidence=(step,))
    section = to_markdown(report).split("\n## Evidence\n", 1)[1].split("\n## ", 1)[0]
    assert section.splitlines()[1:] == [
        "### settle-4xx: analysis — Failed",
        "",
        "value 19 vs baseline 10 · 3/5 measured",
        "",
        '- query: sum(rate(apiserver\\_request\\_total{code=~"4.."}\\[5m\\]))',
        "- success: result &lt; 1.2 \\* baseline + 5",
        "- baseline: 10",
        "",
        "| at | phase | value |",
        "|---|---|---|",
        "| 2026-11-29 14:02:00 UTC | Successful | 10 |",
        "| 2026-11-29 14:03:00 UTC | Inconclusive | no data |",
        "| 2026-11-29 14:04:00 UTC | Failed | 19 |",
        "",
    ]
    (entry,) = json.loads(to_json(report))["evidence"]
    assert entry["analysis"]["query"] == 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
    assert entry["analysis"]["baseline"] == 10.0
    assert [p["value"] for p in entry["analysis"]["points"]] == [10.0, None, 19.0]


def test_the_report_draws_each_analysis_over_time_in_chromium(
    tmp_path: Path, world: World, chromium: Any
) -> None:
    """The analysis part of the panel from view-model values (the analysis job's loader joins
    later): a line with a gap where a measurement had no data, the baseline dashed."""
    run = world.runs.start("settle", Actor(user_id="U0PRIMARY")).run
    points = tuple(
        Point(at=T0 + timedelta(minutes=i), value=v, phase=phase)
        for i, (v, phase) in enumerate(
            [
                (10.0, "Successful"),
                (11.5, "Successful"),
                (None, "Inconclusive"),
                (13.0, "Successful"),
                (19.0, "Failed"),
            ]
        )
    )
    analysis = AnalysisView(
        name="apiserver 4xx rate",
        query='sum(rate(apiserver_request_total{code=~"4.."}[5m]))',
        baseline=10.0,
        points=points,
        outcome="Failed",
        success="result < 1.2 * baseline + 5",
        reason="2 failed measurement(s): not met: result < 1.2 * baseline + 5",
        count=5,
    )
    seen = AlertRow(
        fingerprint="a1",
        labels={"alertname": "KubeAPIErrorsHigh", "cluster": "prod", "severity": "warning"},
        starts_at=T0 + timedelta(minutes=2),
    )
    lane = AlertsLane(
        step_id="settle",
        started_at=T0,
        ended_at=T0 + timedelta(minutes=4),
        view=AlertsView(since=T0, pre_existing=1, outcome="Successful", history=(seen,), history_count=1),
    )
    report = dataclasses.replace(
        build_report(world.store, run.id, now=T0 + timedelta(minutes=5)),
        analyses=(analysis,),
        alert_lanes=(lane,),
    )
    html = to_html(report, charts=None)
    page = tmp_path / "report.html"
    page.write_text(html)
    chromium.get(page.as_uri())
    assert console_errors(chromium) == []
    chart = chromium.find_element("id", "analysis-0")
    assert chart.size["width"] == 480
    # Two line segments: the measurement with no data is a gap, never a zero.
    assert len(chart.find_elements("css selector", "polyline")) == 2
    assert len(chart.find_elements("css selector", "line")) == 1  # the baseline
    headings = chromium.find_element("id", "evidence").find_elements("xpath", "following-sibling::h3")
    assert [h.text for h in headings][:2] == ["Alert timeline", "Analyses over time"]
    assert len(chromium.find_element("id", "alert-timeline").find_elements("css selector", "circle")) == 1
    # Looked at (STYLE 18): the panel as a picture, kept with the test's files.
    chromium.execute_script("document.getElementById('evidence').scrollIntoView()")
    panel = tmp_path / "evidence-panel.png"
    chromium.save_screenshot(str(panel))
    assert panel.stat().st_size > 5000
    body = chromium.find_element("tag name", "body").text
    assert "apiserver 4xx rate — Failed · value 19 vs baseline 10 · last: ▁▂·▃█" in body
