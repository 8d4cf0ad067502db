"""`app-health` as a plan step of a real `upgrade-bot run --http` on the `gitops` sim (issue 39
item 3): a durable job on the duty engine. `kill -9` while it waits for an app still Progressing:
restarted, the step is interrupted and waits for people; resumed, the SAME job continues with the
baseline it stored before the kill (the Application already Degraded then is reported once, never
blocking), and an Application going Degraded fails the step with the app and its message in the
thread. And the baseline is the run's, recorded with its `pre` snapshot: an app broken after it (by
the upgrade's own earlier steps) fails a later app-health step instead of being excused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.records import StepState
from bot.sim import SimCluster
from tests.support.bot_process import OPS, PRIMARY, RunBot, team_plan
from tests.support.crash import crash_bot, crash_mid_step
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = team_plan(
    "apps",
    """\
  - id: apps-healthy
    title: Argo CD apps healthy
    gate: {approve: [primary]}
    actions: [{app-health: {namespaces: argocd, timeout: 30m}}]
""",
)
#: The same check after the run's `pre` snapshot, which records the run's baseline of apps.
PLAN_PRE = team_plan(
    "apps-pre",
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
    plans = {"apps": PLAN, "apps-pre": PLAN_PRE}
    with crash_bot(
        write_config, slack_stub, bot_env, tmp_path, plans=plans, sim=sim, sim_kubeconfig=sim_kubeconfig
    ) as b:
        yield b


def _thread(stub: SlackStub, text: str) -> list[str]:
    return [m["text"] for m in stub.posted(OPS) if m["thread_ts"] and text in m["text"]]


def test_kill9_while_waiting_then_resume_keeps_the_baseline_and_a_degraded_app_fails_by_name(
    bot: RunBot, slack_stub: SlackStub, sim: SimCluster
) -> None:
    sim.control.inject_fault({"type": "app_status", "object": SHOP, "health": "Progressing"})
    assert "loaded" in bot.command("plan load apps")
    assert "started" in bot.command("start apps")
    bot.click(PRIMARY, bot.gate("apps-healthy"))
    baseline = "already unhealthy at the baseline (when this check began; reported, not blocking)"
    wait_until(lambda: _thread(slack_stub, baseline), timeout=60, what="the baseline line in the thread")
    job = bot.store().job_of_step(bot.run().id, "apps-healthy")
    assert job is not None
    crash_mid_step(bot, "apps-healthy")
    sim.control.inject_fault(
        {"type": "app_status", "object": SHOP, "health": "Degraded",
         "message": "Deployment shop/web: Progress deadline exceeded"}
    )  # fmt: skip
    assert "active" in bot.command("resume")
    bot.click(PRIMARY, bot.gate("apps-healthy"))
    wait_until(
        lambda: bot.run().step_run("apps-healthy").state is StepState.FAILED,
        timeout=90,
        what="the step to fail on the Degraded Application",
    )
    resumed = bot.store().job_of_step(bot.run().id, "apps-healthy")
    assert resumed is not None
    assert resumed.id == job.id  # the same job, from its stored progress
    failed = wait_until(
        lambda: _thread(slack_stub, "app-health: 1 app(s) unhealthy"), timeout=30, what="the failure line"
    )
    assert any(
        "Application argocd/shop: Degraded/Synced — Deployment shop/web: Progress deadline exceeded" in t
        for t in failed
    )
    assert not any("argocd/legacy" in t for t in failed)  # Degraded at the baseline: not blocking
    assert len(_thread(slack_stub, baseline)) == 1  # reported once, before and after the restart


def test_an_app_broken_after_the_runs_snapshot_fails_a_later_app_health_step(
    bot: RunBot, slack_stub: SlackStub, sim: SimCluster
) -> None:
    assert "loaded" in bot.command("plan load apps-pre")
    assert "started" in bot.command("start apps-pre")
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
