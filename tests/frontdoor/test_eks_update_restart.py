"""Issue 29's acceptance: `kill -9` of a real `upgrade-bot run --http` during `eks-update-cluster`.

After the restart the step is interrupted and waits for people; nothing is called meanwhile.
`resume` and a new approval continue the SAME job, which follows the SAME update (its id is in the
job's progress; its clientRequestToken is the run's and the job's) to the end: EKS says Successful
and the API server reports 1.25. The sim's AWS APIs received exactly one UpdateClusterVersion.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.records import StepState
from tests.support.aws import aws_calls, eks_scenario_in_step
from tests.support.bot_process import OPS, RunBot, team_plan
from tests.support.crash import approve, crash_bot, crash_mid_step
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = team_plan(
    "cp-only",
    """\
  - id: control-plane
    title: Update the EKS control plane to 1.25
    gate: {approve: [primary, shadow]}
    actions: [{eks-update-cluster: {version: "1.25"}}]
""",
)


@pytest.fixture
def sim(sim_factory: Callable[..., Any]) -> Any:
    return sim_factory(eks_scenario_in_step(), speed=0.0, seed=1)


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    plans = {"cp-only": PLAN}
    with crash_bot(
        write_config,
        slack_stub,
        bot_env,
        tmp_path,
        plans=plans,
        sim=sim,
        sim_kubeconfig=sim_kubeconfig,
        eks=True,
    ) as b:
        yield b


def _progress(bot: RunBot) -> dict[str, Any]:
    job = bot.store().job_of_step(bot.run().id, "control-plane")
    return json.loads(job.progress) if job is not None and job.progress else {}


def test_kill9_during_the_control_plane_update_then_resume_follows_the_same_update_once(
    bot: RunBot, slack_stub: SlackStub, sim: Any
) -> None:
    assert "loaded" in bot.command("plan load cp-only")
    assert "started" in bot.command("start cp-only")
    approve(bot, "control-plane")
    # The sim's clock stands still: the update stays InProgress until the test moves it. Kill the
    # bot once the job stored the update it started.
    wait_until(lambda: _progress(bot).get("update"), timeout=60, what="the job to store its update")
    update = _progress(bot)["update"]
    assert aws_calls(sim)["UpdateClusterVersion"] == 1
    # The update goes on at AWS while the bot is down.
    crash_mid_step(bot, "control-plane", while_down=lambda: sim.control.advance(5 * 60))
    time.sleep(1.0)
    assert aws_calls(sim)["UpdateClusterVersion"] == 1  # nothing called while it waits for people
    assert "active" in bot.command("resume")

    def resumed_gate() -> str | None:
        texts = [str(c.params.get("text", "")) for c in slack_stub.calls_to("chat.postMessage")]
        return next((t for t in texts if "resumes following EKS update" in t), None)

    # The re-opened gate says what approving it does now: follow the update started before the
    # crash, not call for a new one.
    gate = wait_until(resumed_gate, timeout=30, what="the resumed gate's dry run")
    assert (
        f"• resumes following EKS update {update}, which this job started before it was interrupted: "
        "no new update is called"
    ) in gate
    assert "• DescribeUpdate now: InProgress" in gate
    assert "would call eks:UpdateClusterVersion" not in gate
    approve(bot, "control-plane")

    def done() -> bool:
        sim.control.advance(60)
        return bot.run().step_run("control-plane").state is StepState.SUCCEEDED

    wait_until(done, timeout=120, interval=0.5, what="the control plane update to be followed to its end")

    calls = aws_calls(sim)
    assert calls["UpdateClusterVersion"] == 1  # exactly one update, ever
    assert calls["DescribeUpdate"] >= 2  # followed before the crash and after the resume
    assert _progress(bot)["update"] == update  # the same update, resumed
    assert _progress(bot)["status"] == "Successful"
    assert _progress(bot)["seen"].startswith("v1.25.")
    assert len(bot.store().jobs(states=("live", "interrupted", "done"))) == 1  # the same job
    detail = bot.run().step_run("control-plane").note
    assert update in detail
    assert "Successful" in detail
    assert "v1.25." in detail
    # The run's thread: the job's lines once each (none repeated after the restart).
    thread = [
        c.params["text"]
        for c in slack_stub.calls_to("chat.postMessage")
        if c.params.get("thread_ts") and c.params["channel"] == OPS
    ]
    accepted = [t for t in thread if "EKS accepted UpdateClusterVersion" in t]
    assert len(accepted) == 1
    assert update in accepted[0]
    assert [t for t, n in Counter(thread).items() if n > 1 and "control plane" in t] == []
