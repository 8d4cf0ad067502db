"""Fleets for tests: a configuration of N labelled clusters, a one-step plan every child runs, and
the moves people make on a child run (complete it, fail it) through the run service itself."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.fleets import machine as M
from bot.core.fleets.card import card
from bot.core.fleets.plan import parse_fleet, resolve
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.records import ClusterConfig, RunRow, StepState
from bot.sim.cluster import SimCluster

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


def fleet_config(tmp_path: Path, *, sim: SimCluster | None = None, unreachable: str = "") -> str:
    """The clusters (ci, lab-1…4, dev-1…7) and a templates_dir holding `tiny` and `twelve`.

    With `sim`, every cluster is that one simulated cluster (its API server answers the fleet's
    reachability check at each cluster's turn) and the canary's Alertmanager is its facade. The
    cluster named `unreachable` points at a port where nothing listens."""
    templates = tmp_path / "templates"
    (templates / "plans").mkdir(parents=True, exist_ok=True)
    (templates / "fleets").mkdir(parents=True, exist_ok=True)
    (templates / "plans" / "tiny.yaml").write_text(TINY_PLAN, encoding="utf-8")
    (templates / "fleets" / "twelve.yaml").write_text(TWELVE, encoding="utf-8")
    where = "in_cluster: true"
    am = ""
    if sim is not None:
        where = f"kubeconfig: {sim.write_kubeconfig(tmp_path / 'fleet-sim.kubeconfig')}, context: sim"
        am = f", alertmanager: {{url: '{sim.url}/alertmanager'}}"
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        "clusters: [{name: dead, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: dead, context: {cluster: dead, user: dead}}]\nusers: [{name: dead, user: {}}]\n",
        encoding="utf-8",
    )

    def at(name: str) -> str:
        return f"kubeconfig: {dead}, request_timeout: 1" if name == unreachable else where

    lines = [
        f"templates_dir: {templates}",
        "clusters:",
        f"  ci: {{{at('ci')}, labels: {{env: ci}}{am}}}",
    ]
    lines += [f"  lab-{i}: {{{at(f'lab-{i}')}, labels: {{env: lab}}}}" for i in range(1, 5)]
    lines += [f"  dev-{i}: {{{at(f'dev-{i}')}, labels: {{env: dev}}}}" for i in range(1, 8)]
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


@dataclass
class FleetCardView:
    fleet: M.Fleet
    children: dict[str, RunRow] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    steps: dict[str, str] = field(default_factory=dict)


def big_fleet_view(n: int, *, failed: int, stalled: int = 0) -> FleetCardView:
    """n clusters: a canary done, the rest in one stage mid-way, `failed` of them failed."""
    clusters = {"canary-1": ClusterConfig(name="canary-1", in_cluster=True, labels={"env": "ci"})}
    for i in range(n - 1):
        name = f"cluster-{i:02d}-eu-central"
        clusters[name] = ClusterConfig(name=name, in_cluster=True, labels={"env": "prod"})
    plan = parse_fleet(
        "name: big\nplan: p\nroster: {primary: [U0P], shadow: [U0S]}\nstages:\n"
        "  - {name: canary, clusters: [canary-1], soak: 1h, evidence: [alerts], after: {approve: [primary, shadow]}}\n"
        "  - {name: prod, selector: {env: prod}, max_concurrency: 20%, failure_budget: 2}\n"
    )
    fleet = M.new_fleet("F1A2B3C", plan, resolve(plan, clusters), by="U0P", now=T0)
    members = []
    children: dict[str, RunRow] = {}
    for i, m in enumerate(fleet.members):
        if m.stage == 0:
            members.append(replace(m, state=M.SUCCEEDED, run_id="R000000"))
            continue
        state = (
            M.FAILED
            if i <= failed
            else M.STARTED
            if i <= failed + 8
            else M.SUCCEEDED
            if i < n // 2
            else M.PENDING
        )
        run_id = f"R{i:06d}" if state != M.PENDING else ""
        reason = (
            f"drain failed in run R{i:06d}: PodDisruptionBudget payments/api blocks eviction"
            if state == M.FAILED
            else ""
        )
        members.append(replace(m, state=state, run_id=run_id, reason=reason))
        if state == M.STARTED:
            quiet = timedelta(hours=2) if i <= failed + stalled else timedelta(minutes=1)
            children[m.cluster] = RunRow(
                id=run_id, plan_id=1, plan_name="p", cluster=m.cluster, state="active", version=1, roster={},
                reason="", created_by="U0P", created_at=T0, updated_at=T0 - quiet,
            )  # fmt: skip
    fleet = replace(fleet, members=tuple(members), stage=1, phase=M.RUNNING)
    if failed > 2:
        fleet = replace(fleet, state=M.PAUSED, reason="stage prod is over its failure budget")
    versions = {m.cluster: "1.29.4 → 1.30.2" for m in fleet.members}
    steps = dict.fromkeys(children, "drain-old-nodes")
    return FleetCardView(fleet=fleet, children=children, versions=versions, steps=steps)


DOC_HEAD = """\
# The fleet card

One message per fleet run in the operations channel, edited in place; its thread gets the
milestones (a stage started or done, a soak started or passed, an approval, a failure, a skip, a
pause, the end), each once. The card shows:

- the fleet's state and, when it is paused, why (a failed canary, a stage over its failure
  budget, evidence that failed during a soak);
- the soak clock and its evidence, and who the next gate waits for (`fleet approve`);
- clusters that are stalled (a running child run with no progress for 30 minutes);
- a clusters × stages matrix: one section per stage, a line per cluster with its state, its
  control-plane versions (from its pinned plan), its child run's current step and run id.

The card carries the buttons of what people can do now:

- **Approve the before/after gate of STAGE** while the fleet waits on a stage's gate. Only the
  people the gate names count (its roles, N-of-M, four eyes: whoever started the fleet cannot
  alone let it past a stage's `after` gate), as with `fleet approve`;
- **Carry the canary's waivers** while the canary has waivers the later clusters lack (the
  carried ones are listed to the clicker; Required ones wait for a second person on each cluster,
  as `fleet carry-waivers` does);
- **Pause the fleet** (with a confirmation) while it is active, **Resume the fleet** while it is
  paused; Resume is refused while a stage is over its failure budget, with what to do instead.

A refusal (someone the gate or the roster does not name, a second approval by the same person)
comes back as one ephemeral line with a reference id, and is audited, as a run's gate buttons
are. Each button carries the fleet, the stage and what the card showed when it was drawn: a click
on a card drawn before the fleet moved on (the gate closed, the fleet paused or resumed) is
answered as stale and changes nothing.

It fits Slack's limits (50 blocks, 3,000 characters a section) at 50 clusters without cutting a
failing row: the rows that need people come first, and healthy rows (pending, succeeded, not
stalled) collapse into one line per state naming the clusters before any line is dropped.
See [fleet runs](fleets.md) for the plan and the verbs.

Both examples below are what `bot/core/fleets/card.py` builds (a test holds this page to it, and
every block passes slack_sdk's models): a fleet paused because its `prod` stage is over its
failure budget of 2, with two stalled clusters.
"""


def doc_page() -> str:
    parts = [DOC_HEAD]
    for n in (12, 50):
        text, blocks = card(big_fleet_view(n, failed=4, stalled=2), T0)
        pasted = json.dumps({"text": text, "blocks": blocks}, indent=2, ensure_ascii=False)
        parts += [f"## At {n} clusters", "", "```json", pasted, "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(doc_page())


def fail_step(runs: RunService, run_id: str, step_id: str = "drain") -> None:
    """The child's step fails (its done gate rejected): the run pauses on it, as `on_failure: pause` says."""
    for user in ("U0PRIMARY", "U0SHADOW"):
        run = runs.load(run_id)
        sr = run.step_run(step_id)
        decision = "approve" if user == "U0PRIMARY" else "reject"
        runs.click(
            R.ButtonRef(run_id=run_id, step_id=step_id, epoch=sr.epoch, decision=decision),
            Actor(user_id=user),
            reason="the PDB blocks eviction",
        )


def go_past_failed_step(runs: RunService, run_id: str, step_id: str = "drain") -> None:
    """The child's step fails, and its people skip it and resume: the run completes past it."""
    fail_step(runs, run_id, step_id)
    who = Actor(user_id="U0PRIMARY")
    runs.apply(
        run_id,
        lambda r: R.skip(r, step_id=step_id, by=who.user_id, reason="drained by hand", now=runs.clock()),
        who,
    )
    runs.apply(run_id, lambda r: R.resume(r, by=who.user_id, now=runs.clock()), who)
    complete(runs, run_id)
