"""`kill -9` of a real `upgrade-bot run --http` in the middle of a drain (issue 15): restarted, the
step is interrupted and waits for people; `resume` re-opens its gate and the approval continues the
SAME job from its recorded progress — every pod evicted exactly once (counted by the sim's API),
the node group drained, the thread without duplicates."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.records import StepState
from tests.support.bot_process import COORD, OPS, RunBot, team_plan
from tests.support.crash import approve, crash_bot, crash_mid_step
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

GROUP = "ng-shared"
PLAN = team_plan(
    "drain-one",
    f"""\
  - id: drain-shared
    title: Drain {GROUP}
    gate: {{approve: [primary, shadow]}}
    actions: [{{drain: {{nodegroup: {GROUP}, allow_local_storage: "true", parallel: "2", timeout: 6s}}}}]
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
    plans = {"drain-one": PLAN}
    with crash_bot(
        write_config, slack_stub, bot_env, tmp_path, plans=plans, sim=sim_eks, sim_kubeconfig=sim_kubeconfig
    ) as b:
        yield b


def _nodes(core: client.CoreV1Api) -> list[Any]:
    return list(core.list_node(label_selector=f"eks.amazonaws.com/nodegroup={GROUP}").items)


def _group_pods(core: client.CoreV1Api) -> dict[str, str]:
    """uid → ns/name of every pod the drain must evict: on the group's nodes, not DaemonSet's."""
    nodes = {n.metadata.name for n in _nodes(core)}
    out = {}
    for pod in core.list_pod_for_all_namespaces().items:
        owners = pod.metadata.owner_references or []
        if pod.spec.node_name in nodes and not any(o.kind == "DaemonSet" for o in owners):
            out[pod.metadata.uid] = f"{pod.metadata.namespace}/{pod.metadata.name}"
    return out


def test_kill9_mid_drain_then_resume_evicts_every_pod_once_and_drains_the_group(
    bot: RunBot, slack_stub: SlackStub, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    api = config.new_client_from_config(config_file=str(sim_kubeconfig(sim_eks)), persist_config=False)
    core = client.CoreV1Api(api)
    to_evict = _group_pods(core)
    assert len(to_evict) >= 3
    assert "loaded" in bot.command("plan load drain-one")
    assert "started" in bot.command("start drain-one")
    approve(bot, "drain-shared")
    # The sim's clock stands still: evicted pods stay Terminating until it moves. Kill the bot
    # once the first evictions were accepted, with the drain far from done.
    wait_until(lambda: sim_eks.control.evictions(), timeout=60, what="the first evictions")
    down: list[int] = []

    def while_down() -> None:
        down.append(len(sim_eks.control.evictions()))
        sim_eks.control.advance(120)  # the evicted pods finish terminating while the bot is down

    crash_mid_step(bot, "drain-shared", while_down=while_down)
    (before,) = down
    assert before < len(to_evict)
    time.sleep(1.0)
    assert len(sim_eks.control.evictions()) == before  # nothing evicted while it waits for people
    assert "active" in bot.command("resume")
    approve(bot, "drain-shared")

    answered: list[str] = []

    def done() -> bool:
        sim_eks.control.advance(30)
        # The scenario's payments-api budget allows no disruption and its pods cannot move: past
        # the drain's timeout the job asks, and the coordinator deletes the pod with a reason.
        job = bot.store().job_of_step(bot.run().id, "drain-shared")
        if job is not None and job.choice and not job.decision and job.choice not in answered:
            answered.append(job.choice)
            reply = bot.command(f"choose {job.id} delete --reason single replica behind its PDB", user=COORD)
            assert "recorded" in reply
        return bot.run().step_run("drain-shared").state is StepState.SUCCEEDED

    wait_until(done, timeout=180, interval=1.0, what="the drain to finish")

    evicted = Counter(e["uid"] for e in sim_eks.control.evictions())
    assert [uid for uid, n in evicted.items() if n > 1] == []  # every pod evicted exactly once
    # Evicted, or deleted on the coordinator's answer (the pod its budget held): nothing else left.
    assert len(set(to_evict) - set(evicted)) <= 1
    assert answered
    assert all(n.spec.unschedulable for n in _nodes(core))
    assert _group_pods(core) == {}
    # The run's thread: each of the job's lines once (no line repeated after the restart).
    run_thread = [
        c.params["text"]
        for c in slack_stub.calls_to("chat.postMessage")
        if c.params.get("thread_ts") and c.params["channel"] == OPS
    ]
    job_lines = [t for t in run_thread if "drained" in t or "cordoned" in t.lower()]
    assert job_lines
    assert [t for t, n in Counter(job_lines).items() if n > 1] == []
    assert bot.store().job_of_step(bot.run().id, "drain-shared").state == "done"  # type: ignore[union-attr]
    assert len(bot.store().jobs(states=("live", "interrupted", "done"))) == 1  # the same job, resumed
