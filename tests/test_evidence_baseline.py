"""The baseline recorded with the run's snapshot (issue 39 item 2): the `snapshot` action, bound by
`action_context` to a real SQLite store, the sim's cluster and the sim's Alertmanager and
Prometheus facades, records the firing alerts and the value of every `analysis` query in the
plan; the job service then plans the run's `analysis` and `alerts` jobs against THAT record, not
against what the sources say when the jobs start."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.kube import Cluster
from bot.adapters.prometheus import Prometheus
from bot.adapters.store import Store
from bot.core.actions import snapshot
from bot.core.evidence.baseline import take_baseline
from bot.core.evidence.matchers import parse_matcher
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.service import JobService
from bot.core.people import StaticDirectory
from bot.core.runs.capabilities import action_context
from bot.records import ActionCall, ActionRequest, ClusterConfig, RunRow, SignalSource, StepRun, StepState
from bot.sim.cluster import SimCluster

T0 = datetime(2026, 11, 29, 13, 55, tzinfo=UTC)
Q = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
RUN = "RBASE1"
PLAN = f"""\
name: settle
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-29T22:00", end: "2026-11-30T02:00", timezone: UTC}}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: pre
    title: Snapshot before
    gate: {{any_of: [primary]}}
    actions: [{{snapshot: {{label: pre}}}}]
  - id: settle
    title: Settle
    gate: {{any_of: [primary]}}
    actions: [{{analysis: {{query: '{Q}', success: "result < 1.2 * baseline + 5"}}}}]
  - id: quiet
    title: No new alerts
    gate: {{any_of: [primary]}}
    actions: [{{alerts: {{settle: 10m}}}}]
"""


@dataclass
class _Named:
    name: str


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


def _run(store: Store) -> None:
    plan_id = store.save_plan(name="settle", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    run = RunRow(
        id=RUN, plan_id=plan_id, plan_name="settle", cluster="prod", state="active", version=1,
        roster={"primary": ("U0PRIMARY",), "shadow": ("U0SHADOW",)}, reason="", created_by="U0PRIMARY",
        created_at=T0, updated_at=T0,
    )  # fmt: skip
    steps = [
        StepRun(step_id="pre", state=StepState.SUCCEEDED, epoch=1, started_at=T0, finished_at=T0),
        StepRun(step_id="settle", state=StepState.RUNNING, epoch=1, started_at=T0 + timedelta(minutes=30)),
        StepRun(step_id="quiet", state=StepState.RUNNING, epoch=1, started_at=T0 + timedelta(minutes=30)),
    ]
    store.create_run(run, steps, audit=[])


def test_the_snapshot_records_the_baseline_and_the_jobs_compare_against_it(
    sim_small: SimCluster, tmp_path: Path
) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    watchdog = ev.fire({"alertname": "Watchdog", "cluster": "prod"}, (T0 - timedelta(hours=1)).timestamp())
    ev.set_query(Q, 10.0)
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    _run(store)
    evidence = _evidence(sim_small)
    kubeconfig = sim_small.write_kubeconfig(tmp_path / "sim.kubeconfig")
    clock = {"now": T0}
    ctx = action_context(
        store=store,
        clusters={"prod": ClusterConfig(name="prod", kubeconfig=kubeconfig)},
        connect_cluster=Cluster.connect,
        clock=lambda: clock["now"],
        restart_threshold=5,
        rules_paths=[],
        evidence=evidence,
    )
    request = ActionRequest(run_id=RUN, cluster="prod", call=ActionCall(name="snapshot", args={"label": "pre"}), step_id="pre")  # fmt: skip
    result = snapshot.run(ctx, request)
    assert result.ok
    assert result.detail.endswith("; baseline: 1 firing alert(s), 1 of 1 analysis value(s)")
    recorded = store.evidence_baseline(RUN)
    assert recorded is not None
    assert recorded.body["analysis"] == {Q: 10.0}
    assert list(recorded.body["alerts"]) == [watchdog]
    assert recorded.body["alerts"][watchdog]["labels"] == {"alertname": "Watchdog", "cluster": "prod"}

    # Half an hour later the figure has moved and another alert fires: the jobs still compare
    # against what the snapshot recorded.
    ev.set_query(Q, 30.0)
    later = ev.fire({"alertname": "Noisy", "cluster": "prod"}, (T0 + timedelta(minutes=10)).timestamp())
    clock["now"] = T0 + timedelta(minutes=30)
    jobs = JobService(
        store=store,
        registry=default_jobs(("eks.amazonaws.com/nodegroup",), evidence=evidence),
        deliveries=None,
        directory=StaticDirectory(),
        clock=lambda: clock["now"],
        owner="replica-a",
    )
    analysis = {"query": Q, "success": "result < 1.2 * baseline + 5"}
    for step, kind, args in (("settle", "analysis", analysis), ("quiet", "alerts", {"settle": "10m"})):
        jobs.start(ActionRequest(run_id=RUN, cluster="prod", call=ActionCall(name=kind, args=args), step_id=step), cluster="prod")  # fmt: skip
        row = store.job_of_step(RUN, step)
        assert row is not None
        assert row.kind == kind
        assert jobs.claim(row)
        jobs.advance(row.id, _Named("prod"))
        stored = store.job(row.id)
        assert stored is not None
        progress = json.loads(stored.progress)
        assert progress["baseline_from"] == "snapshot"
        if kind == "analysis":
            assert progress["baseline"] == 10.0
            # Measured now: 30 against the recorded 10 is past `1.2 * baseline + 5`.
            jobs.advance(row.id, _Named("prod"))
            measured = json.loads(store.job(row.id).progress)  # type: ignore[union-attr]
            assert [(m["phase"], m["value"]) for m in measured["measurements"]] == [("Failed", 30.0)]
        else:
            assert set(progress["baseline"]) == {watchdog}
            assert later not in progress["baseline"]


def test_a_source_without_an_answer_is_recorded_as_null_with_its_reason(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    sim_small.sim.evidence.alertmanager_mode = "401"
    evidence = _evidence(sim_small)
    body = take_baseline(
        alerts=evidence.alerts("prod"), metrics=evidence.metrics("prod"), queries=[Q], now=T0
    )
    assert body["alerts"] is None
    assert body["analysis"] == {Q: None}
    assert body["errors"]["alertmanager"] == "Alertmanager refused the bot's credentials (HTTP 401)"
    assert body["errors"][f"analysis:{Q}"] == "no data: the query returned an empty result"
