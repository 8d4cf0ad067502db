"""`app-health` judges against the run's baseline, not its own step's: the run's `pre` snapshot records the Argo CD and Flux apps unhealthy
then, with the alerts and analyses, and every `app-health` step of the run compares against it.
An app broken after the snapshot — by the upgrade's own earlier steps — fails a later app-health
step by name instead of being excused as "already unhealthy at the baseline"; the app unhealthy
before the run began is still reported, not blocking. A real `upgrade-bot run --http` on the
`gitops` sim."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.records import StepState
from bot.sim import SimCluster
from tests.support.bot_process import OPS, PRIMARY, RunBot, team_plan
from tests.support.crash import crash_bot
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = team_plan(
    "apps",
    """\
  - id: pre
    title: Snapshot before
    gate: {approve: [primary]}
    actions: [{snapshot: {label: pre}}]
  - id: apps-healthy
    title: Argo CD apps healthy
    gate: {approve: [primary]}
    actions: [{app-health: {namespaces: argocd, timeout: 30m}}]
""",
)
SHOP = {"kind": "Application", "namespace": "argocd", "name": "shop"}


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim: SimCluster,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    with crash_bot(
        write_config,
        slack_stub,
        bot_env,
        tmp_path,
        plans={"apps": PLAN},
        sim=sim,
        sim_kubeconfig=sim_kubeconfig,
    ) as b:
        yield b


def _thread(stub: SlackStub, text: str) -> list[str]:
    return [m["text"] for m in stub.posted(OPS) if m["thread_ts"] and text in m["text"]]


def test_an_app_broken_after_the_runs_snapshot_fails_a_later_app_health_step(
    bot: RunBot, slack_stub: SlackStub, sim: SimCluster
) -> None:
    assert "loaded" in bot.command("plan load apps")
    assert "started" in bot.command("start apps")
    bot.click(PRIMARY, bot.gate("pre"))
    wait_until(
        lambda: bot.run().step_run("pre").state is StepState.SUCCEEDED, timeout=60, what="the pre snapshot"
    )
    recorded = bot.store().evidence_baseline(bot.run().id)
    assert recorded is not None
    assert list(recorded.body["apps"]) == ["Application argocd/legacy"]  # Degraded before the run
    # Between the snapshot and the check, the upgrade breaks the shop.
    sim.control.inject_fault(
        {"type": "app_status", "object": SHOP, "health": "Degraded",
         "message": "Deployment shop/web: Progress deadline exceeded"}
    )  # fmt: skip
    bot.click(PRIMARY, bot.gate("apps-healthy"))
    wait_until(
        lambda: bot.run().step_run("apps-healthy").state is StepState.FAILED,
        timeout=60,
        what="the step to fail on the Application broken after the snapshot",
    )
    failed = wait_until(
        lambda: _thread(slack_stub, "app-health: 1 app(s) unhealthy"), timeout=30, what="the failure line"
    )
    assert any("Application argocd/shop: Degraded/Synced — Deployment shop/web" in t for t in failed)
    (baseline,) = _thread(slack_stub, "already unhealthy at the baseline")
    assert "the run's snapshot at " in baseline
    assert "argocd/legacy" in baseline
    assert "argocd/shop" not in baseline
