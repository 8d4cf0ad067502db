"""Fleets for tests: a configuration of N labelled clusters, a one-step plan every child runs, and
the moves people make on a child run (complete it, fail it) through the run service itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.records import StepState

T0 = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)

#: One plain step: the primary starts it, the shadow confirms it done (four eyes).
TINY_PLAN = """\
name: tiny
cluster: placeholder
current_version: "1.29.4"
target_version: "1.30.2"
window: {start: "2026-12-01T14:00", end: "2026-12-01T17:00", timezone: Asia/Tokyo}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: drain
    title: Drain the old nodes
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
"""

#: 12 clusters in 3 stages: a canary with a soak and a four-eyes after gate, four labs with a
#: budget of one failure, seven devs.
TWELVE = """\
name: twelve
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}
plan: tiny
stages:
  - name: canary
    clusters: [ci]
    soak: 1h
    evidence: [alerts]
    after: {approve: [primary, shadow]}
  - name: lab
    selector: {env: lab}
    max_concurrency: 4
    failure_budget: 1
  - name: dev
    selector: {env: dev}
    max_concurrency: 50%
"""


def fleet_config(tmp_path: Path, *, alertmanager: str = "") -> str:
    """The clusters (ci, lab-1…4, dev-1…7) and a templates_dir holding `tiny` and `twelve`."""
    templates = tmp_path / "templates"
    (templates / "plans").mkdir(parents=True, exist_ok=True)
    (templates / "fleets").mkdir(parents=True, exist_ok=True)
    (templates / "plans" / "tiny.yaml").write_text(TINY_PLAN, encoding="utf-8")
    (templates / "fleets" / "twelve.yaml").write_text(TWELVE, encoding="utf-8")
    am = f", alertmanager: {{url: '{alertmanager}'}}" if alertmanager else ""
    lines = [
        f"templates_dir: {templates}",
        "clusters:",
        f"  ci: {{in_cluster: true, labels: {{env: ci}}{am}}}",
    ]
    lines += [f"  lab-{i}: {{in_cluster: true, labels: {{env: lab}}}}" for i in range(1, 5)]
    lines += [f"  dev-{i}: {{in_cluster: true, labels: {{env: dev}}}}" for i in range(1, 8)]
    return "\n".join(lines) + "\n"


def complete(runs: RunService, run_id: str) -> None:
    """Walk the child run to its end as its roster would: start each step, confirm it done."""
    for _ in range(20):
        run = runs.load(run_id)
        if run.state is not R.RunState.ACTIVE:
            return
        sr = next(s for s in run.steps if s.state in (StepState.AWAITING_APPROVAL, StepState.RUNNING))
        who = "U0PRIMARY" if not sr.started_by else "U0SHADOW"
        runs.click(R.ButtonRef(run_id=run_id, step_id=sr.step_id, epoch=sr.epoch), Actor(user_id=who))
    raise AssertionError(f"run {run_id} did not end")


def fail(runs: RunService, run_id: str, reason: str = "drain failed: PDB blocks eviction") -> None:
    """The child ends badly: its roster aborts it (the fleet counts it failed)."""
    runs.apply(
        run_id,
        lambda r: R.abort(r, by="U0PRIMARY", reason=reason, now=runs.clock()),
        Actor(user_id="U0PRIMARY"),
    )
