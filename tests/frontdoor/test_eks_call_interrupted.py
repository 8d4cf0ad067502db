"""Issue 38, item 6: `kill -9` of a real `upgrade-bot run --http` in the middle of
`UpdateNodegroupVersion` — after EKS acted on the call, before the bot heard its answer (the sim's
AWS facade holds the answer back: `POST /aws/sim/hold`).

The job recorded the call's intent (its clientRequestToken and the updates EKS listed then) in its
stored progress before it sent it. After the restart, `resume` and a new approval, the SAME job
finds the update by `ListUpdates` and `DescribeUpdate` and follows it: the sim's AWS APIs received
exactly one UpdateNodegroupVersion, ever."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.aws import aws_calls, eks_scenario_in_step
from tests.support.bot_process import OPS, RunBot, team_plan
from tests.support.crash import approve, crash_bot, crash_mid_step
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

GROUP = "ng-shared"
PLAN = team_plan(
    "ng-only",
    f"""\
  - id: node-group
    title: Update the {GROUP} node group
    gate: {{approve: [primary, shadow]}}
    actions: [{{eks-update-nodegroup: {{nodegroup: {GROUP}}}}}]
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
    plans = {"ng-only": PLAN}
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


def _aws(sim: Any, what: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"{sim.aws_url}/sim/{what}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def _progress(bot: RunBot) -> dict[str, Any]:
    job = bot.store().job_of_step(bot.run().id, "node-group")
    return json.loads(job.progress) if job is not None and job.progress else {}


def test_kill9_mid_update_call_then_resume_finds_the_update_and_never_calls_again(
    bot: RunBot, slack_stub: SlackStub, sim: Any
) -> None:
    assert "loaded" in bot.command("plan load ng-only")
    assert "started" in bot.command("start ng-only")
    _aws(sim, "hold", {"operation": "UpdateNodegroupVersion"})
    approve(bot, "node-group")
    # EKS acted on the call (the update exists); its answer is held: the bot has not heard it.
    wait_until(lambda: aws_calls(sim).get("UpdateNodegroupVersion") == 1, timeout=60, what="the update call")
    intent = _progress(bot).get("intent")
    assert intent is not None  # stored before the call was sent
    assert intent["call"] == "UpdateNodegroupVersion"
    assert intent["token"].startswith(f"upgrade-bot-{bot.run().id}-job-")
    assert not _progress(bot).get("update")
    started: list[str] = []

    def while_down() -> None:
        _aws(sim, "release", {})
        assert sim.core.aws is not None
        started.extend(u.id for u in sim.core.aws.updates.values() if u.nodegroup == GROUP)

    crash_mid_step(bot, "node-group", while_down=while_down)
    (update,) = started
    assert "active" in bot.command("resume")

    def resumed_gate() -> str | None:
        texts = [str(c.params.get("text", "")) for c in slack_stub.calls_to("chat.postMessage")]
        return next((t for t in texts if "may have reached EKS before the interruption" in t), None)

    # The re-opened gate says the job looks for the update before it calls anything.
    gate = wait_until(resumed_gate, timeout=30, what="the resumed gate's dry run")
    assert "it first looks for that update (ListUpdates, DescribeUpdate)" in gate
    approve(bot, "node-group")
    wait_until(lambda: _progress(bot).get("update"), timeout=60, what="the job to follow an update")

    assert _progress(bot)["update"] == update  # the update the killed call started
    assert _progress(bot)["intent"]["token"] == intent["token"]
    calls = aws_calls(sim)
    assert calls["UpdateNodegroupVersion"] == 1  # exactly one call, ever
    assert calls["ListUpdates"] >= 2  # the intent's, and the look-up after the resume
    assert len(bot.store().jobs(states=("live", "interrupted", "done"))) == 1  # the same job

    def found_lines() -> list[str]:
        thread = [
            str(c.params["text"])
            for c in slack_stub.calls_to("chat.postMessage")
            if c.params.get("thread_ts") and c.params["channel"] == OPS
        ]
        return [t for t in thread if "found by ListUpdates (not called again)" in t]

    # The thread line goes out through the run's outbox, after the job's progress is stored.
    wait_until(found_lines, timeout=30, what="the thread line saying the update was found")
    found = found_lines()
    assert len(found) == 1
    assert update in found[0]
