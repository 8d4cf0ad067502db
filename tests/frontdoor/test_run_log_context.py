"""A run's log lines carry its run id through the logging context (issue 44): a real
`upgrade-bot run --http --log-format json` runs a plan with a gated drain of a node group of the
sim through to the end, and every line it logged about the run — the gate's clicks, the drain
job's driver and its ticks, the step's end — names the run in `run_id`; the job's lines name
its step and job too. Nothing writes the ids into messages by hand for this to hold."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.records import StepState
from tests.support.bot_process import COORD, PRIMARY, SHADOW, RunBot, team_bot, team_plan
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

GROUP = "ng-shared"
PLAN = team_plan(
    "drain-logged",
    f"""\
  - id: drain-shared
    title: Drain {GROUP}
    gate: {{approve: [primary, shadow]}}
    actions: [{{drain: {{nodegroup: {GROUP}, allow_local_storage: "true", parallel: "4", timeout: 6s}}}}]
""",
)


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}"
    with team_bot(
        write_config,
        slack_stub,
        bot_env,
        tmp_path,
        plans={"drain-logged": PLAN},
        cluster=cluster,
        extra_args=["--log-format", "json"],
    ) as b:
        yield b


def test_every_log_line_of_a_run_carries_its_run_id_and_the_jobs_carry_step_and_job(
    bot: RunBot, sim_eks: Any
) -> None:
    assert "loaded" in bot.command("plan load drain-logged")
    assert "started" in bot.command("start drain-logged")
    run_id = bot.run().id
    for who in (PRIMARY, SHADOW):
        bot.click(who, bot.gate("drain-shared"))
    answered: list[str] = []

    def drained() -> bool:
        sim_eks.control.advance(30)
        # The scenario's payments-api budget allows no disruption: past the drain's timeout the
        # job asks, and the coordinator deletes the pod.
        job = bot.store().job_of_step(run_id, "drain-shared")
        if job is not None and job.choice and not job.decision and job.choice not in answered:
            answered.append(job.choice)
            assert "recorded" in bot.command(f"choose {job.id} delete --reason behind its PDB", user=COORD)
        return bot.run().step_run("drain-shared").state is StepState.SUCCEEDED

    wait_until(drained, timeout=180, interval=1.0, what="the drain to finish")
    wait_until(lambda: bot.run().state.value == "completed", timeout=60, what="the run to complete")
    job = bot.store().job_of_step(run_id, "drain-shared")
    assert job is not None
    err = bot.stop()

    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert lines, err[-2000:]
    # The run's work: the gate's handlers, the run service, the job's driver, the job and the
    # cluster calls it makes (nothing else touches the cluster in this test). The front door's own
    # lines (a command accepted, start-up, shutdown) belong to no run.
    run_work = (
        "bot.frontdoor.slack.gates",
        "bot.core.runs",
        "bot.frontdoor.acting",
        "bot.core.jobs",
        "bot.adapters.kube",
    )
    of_run = [e for e in lines if e["logger"].startswith(run_work) or run_id in e["message"]]
    assert len(of_run) >= 5, [e["message"] for e in lines]
    missing = [(e["logger"], e["message"]) for e in of_run if e["run_id"] != run_id]
    assert missing == []
    from_job = [e for e in lines if e["job"] is not None]
    assert from_job, "no line logged by the drain job's driver"
    assert {(e["run_id"], e["step"], e["job"]) for e in from_job} == {(run_id, "drain-shared", str(job.id))}
    # Outside the job's thread (the gate's clicks, the step's start) the step is bound too.
    assert any(e["step"] == "drain-shared" and e["job"] is None for e in lines)
