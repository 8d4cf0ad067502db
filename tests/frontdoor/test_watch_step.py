"""A plan step with a `watch` action (issue 13), in a real `upgrade-bot run --http` on the sim:
the click only starts the watch (the step stays running), the triggers front door drives it into
the RUN's thread, and its verdict commits the step — target reached: succeeded; a stop condition:
failed and the run paused. A `kill -9` mid-watch resumes the step instead of interrupting it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.records import StepState
from tests.support.bot_process import PRIMARY, RunBot
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

OPS = "C0OPS"


def plan(name: str, watch_args: str) -> str:
    return f"""\
name: {name}
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
channels: {{operations: {OPS}}}
roster:
  primary: [U0PRIMARY]
steps:
  - id: ng-shared
    title: Roll ng-shared
    gate: {{any_of: [primary]}}
    actions: [{{watch: {{{watch_args}}}}}]
  - id: after
    title: After
    gate: {{any_of: [primary]}}
    actions: [{{snapshot: {{label: after}}}}]
"""


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    team = tmp_path / "team-templates"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "watch-ok.yaml").write_text(
        plan("watch-ok", 'nodegroup: ng-shared, version: "1.25.16", settle: 1s, timeout: 2h')
    )
    (team / "plans" / "watch-stop.yaml").write_text(
        plan("watch-stop", 'nodegroup: ng-shared, version: "1.25.16", crashloop_after: 1s, timeout: 2h')
    )
    config = write_config(
        f"templates_dir: {team}\nchannels: {{operations: {OPS}}}\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
    )
    slack_stub.users[PRIMARY] = {"id": PRIMARY}
    b = RunBot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


def _step_state(bot: RunBot, step: str) -> StepState:
    return bot.run().step_run(step).state


def _advance(sim: Any, steps: int) -> None:
    for _ in range(steps):
        sim.control.advance(60)
        time.sleep(0.3)


def _run_card_ts(stub: SlackStub) -> str:
    cards = [
        m for m in stub.posted(OPS) if m["text"].startswith(":clipboard: *Upgrade run") and not m["thread_ts"]
    ]
    assert len(cards) == 1
    return str(cards[0]["ts"])


def test_watch_step_succeeds_when_the_target_holds_and_survives_kill9(
    bot: RunBot, slack_stub: SlackStub, sim_eks: Any
) -> None:
    assert "loaded" in bot.command("plan load watch-ok")
    assert "started" in bot.command("start watch-ok")
    bot.click(PRIMARY, bot.gate("ng-shared"))
    assert _step_state(bot, "ng-shared") is StepState.RUNNING
    wait_until(lambda: bot.store().watches(), timeout=30, what="the step's watch")
    sim_eks.control.replace_node_group("ng-shared", "1.25.16")
    _advance(sim_eks, 5)
    bot.kill9()
    bot.start()
    # Read-only and still live: resumed, not interrupted (on a loaded machine the replacement may
    # already have reached the target by the time the restarted bot is asked).
    assert _step_state(bot, "ng-shared") in {StepState.RUNNING, StepState.SUCCEEDED}
    _advance(sim_eks, 40)
    wait_until(
        lambda: _step_state(bot, "ng-shared") is StepState.SUCCEEDED, timeout=90, what="the step to succeed"
    )
    run_thread = _run_card_ts(slack_stub)
    watch_cards = [m for m in slack_stub.posted(OPS) if "*Watch on prod*" in m["text"]]
    assert len(watch_cards) == 1
    assert watch_cards[0]["thread_ts"] == run_thread  # in the run's thread, not a second card
    thread = [m["text"] for m in slack_stub.posted(OPS) if m["thread_ts"] == run_thread]
    assert any("Target reached" in t for t in thread)
    assert bot.run().state.value == "active"


def test_watch_step_fails_and_pauses_the_run_on_a_stop_condition(
    bot: RunBot, slack_stub: SlackStub, sim_eks: Any
) -> None:
    assert "loaded" in bot.command("plan load watch-stop")
    assert "started" in bot.command("start watch-stop")
    sim_eks.control.inject_fault(
        {"type": "crash_loop", "match": {"namespace": "payments"}, "crash_after": "5s"}
    )
    bot.click(PRIMARY, bot.gate("ng-shared"))
    _advance(sim_eks, 3)
    wait_until(lambda: _step_state(bot, "ng-shared") is StepState.FAILED, timeout=90, what="the step to fail")
    run = bot.run()
    assert run.state.value == "paused"
    assert "CrashLoopBackOff" in run.step_run("ng-shared").note
