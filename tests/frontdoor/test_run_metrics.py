"""A run's work in Prometheus (issue 31 item 5): a real `upgrade-bot run --http` against the sim
runs a plan (a snapshot, then a drain behind the primary's and the shadow's gate), and its
`/metrics`, parsed as a scraper would, shows the run, its steps, the time its gates waited for
people, the drain's evictions and drained nodes, snapshot and check durations, the Kubernetes API
requests by verb and result, and the build; no `_created` series."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot import __version__
from bot.records import RunState
from tests.support.bot_process import COORD, PRIMARY, SHADOW, RunBot, team_bot, team_plan
from tests.support.scrape import Samples, scrape
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

GROUP = "ng-shared"
PLAN = team_plan(
    "metered",
    f"""\
  - id: snapshot-pre
    title: Snapshot before
    gate: {{approve: [primary]}}
    actions: [{{snapshot: {{label: pre}}}}]
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
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}"
    with team_bot(write_config, slack_stub, bot_env, tmp_path, plans={"metered": PLAN}, cluster=cluster) as b:
        yield b


def _sum(samples: Samples, name: str, **labels: str) -> float:
    return sum(
        value
        for (n, got), value in samples.items()
        if n == name and all((k, v) in got for k, v in labels.items())
    )


def _group_nodes(bot: RunBot, kubeconfig: Path) -> list[Any]:
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    try:
        return list(
            client.CoreV1Api(api).list_node(label_selector=f"eks.amazonaws.com/nodegroup={GROUP}").items
        )
    finally:
        api.close()


def test_metrics_after_a_run_show_its_steps_gates_evictions_and_kubernetes_requests(
    bot: RunBot, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    before = scrape(f"{bot.url}/metrics")
    assert before[("upgrade_bot_build_info", (("version", __version__),))] == 1
    assert before[("upgrade_bot_runs_ended_total", (("outcome", "completed"),))] == 0
    assert before[("upgrade_bot_evictions_total", (("result", "evicted"),))] == 0
    assert not [name for name, _ in before if name.endswith("_created")]

    assert "Pre-flight check of" in bot.command("check --to 1.25")  # a check, timed
    assert "loaded" in bot.command("plan load metered")
    assert "started" in bot.command("start metered")
    time.sleep(1.0)  # a gate that waits: people are not instant
    bot.click(PRIMARY, bot.gate("snapshot-pre"))
    for who in (PRIMARY, SHADOW):
        bot.click(who, bot.gate("drain-shared"))

    answered: list[str] = []

    def done() -> bool:
        sim_eks.control.advance(30)  # the evicted pods finish terminating
        # The scenario's payments-api budget allows no disruption: past the drain's timeout the
        # job asks, and the coordinator deletes the pod with a reason.
        store = bot.store()
        try:
            job = store.job_of_step(bot.run().id, "drain-shared")
        finally:
            store.close()
        if job is not None and job.choice and not job.decision and job.choice not in answered:
            answered.append(job.choice)
            bot.command(f"choose {job.id} delete --reason single replica behind its PDB", user=COORD)
        return bool(bot.run().state is RunState.COMPLETED)

    wait_until(done, timeout=180, interval=1.0, what="the run to complete")
    samples: Samples = wait_until(
        lambda: (
            s
            if (s := scrape(f"{bot.url}/metrics"))[
                ("upgrade_bot_runs_ended_total", (("outcome", "completed"),))
            ]
            == 1
            else None
        ),
        timeout=30,
        what="the run's end counted",
    )

    assert samples[("upgrade_bot_runs_started_total", ())] == 1
    assert samples[("upgrade_bot_steps_total", (("outcome", "succeeded"),))] == 2
    assert samples[("upgrade_bot_steps_total", (("outcome", "failed"),))] == 0
    # Two gates passed: the snapshot's after a second, the drain's after both approvals.
    assert samples[("upgrade_bot_gate_wait_seconds_count", ())] == 2
    assert samples[("upgrade_bot_gate_wait_seconds_sum", ())] >= 1.0
    # Each eviction the API accepted, counted once; the budget's refusals (429) as blocked.
    accepted = sim_eks.control.evictions()
    assert len(accepted) >= 3
    assert samples[("upgrade_bot_evictions_total", (("result", "evicted"),))] == len(accepted)
    assert samples[("upgrade_bot_evictions_total", (("result", "blocked"),))] >= 1
    assert samples[("upgrade_bot_nodes_drained_total", ())] == len(_group_nodes(bot, sim_kubeconfig(sim_eks)))
    assert samples[("upgrade_bot_work_duration_seconds_count", (("kind", "snapshot"),))] == 1
    assert samples[("upgrade_bot_work_duration_seconds_count", (("kind", "check"),))] == 1
    # The API requests the bot made: reads that succeeded, evictions created, a 429 among them.
    assert _sum(samples, "upgrade_bot_kube_requests_total", verb="get", result="200") > 10
    assert _sum(samples, "upgrade_bot_kube_requests_total", verb="post", result="201") >= 3
    assert _sum(samples, "upgrade_bot_kube_requests_total", verb="post", result="429") >= 1
    assert _sum(samples, "upgrade_bot_kube_request_duration_seconds_count", verb="get") > 10
    assert not [name for name, _ in samples if name.endswith("_created")]


def _gauges(samples: Samples) -> dict[str, float]:
    return {
        "active": samples[("upgrade_bot_runs_in_progress", (("state", "active"),))],
        "gates": samples[("upgrade_bot_open_gates", ())],
        "oldest": samples[("upgrade_bot_open_gate_oldest_wait_seconds", ())],
        "cordoned": samples[("upgrade_bot_cordoned_nodes", ())],
        "drains": samples[("upgrade_bot_jobs_running", (("kind", "drain"),))],
        "leader": samples[("upgrade_bot_leader", ())],
    }


def test_the_gauges_show_the_run_its_open_gate_the_drain_and_the_cordoned_nodes_while_they_last(
    bot: RunBot, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    idle = _gauges(scrape(f"{bot.url}/metrics"))
    assert idle == {"active": 0, "gates": 0, "oldest": 0, "cordoned": 0, "drains": 0, "leader": 1}
    assert "loaded" in bot.command("plan load metered")
    assert "started" in bot.command("start metered")
    # The first gate opened: one run, one gate, waiting longer with every scrape.
    waiting = wait_until(
        lambda: g if (g := _gauges(scrape(f"{bot.url}/metrics")))["oldest"] > 0 else None,
        timeout=30,
        what="the open gate's wait",
    )
    assert (waiting["active"], waiting["gates"], waiting["drains"]) == (1, 1, 0)
    bot.click(PRIMARY, bot.gate("snapshot-pre"))
    for who in (PRIMARY, SHADOW):
        bot.click(who, bot.gate("drain-shared"))
    # The drain runs (the budget-held pod keeps it going until the coordinator answers): the job is
    # counted, the group's nodes are held cordoned, no gate is open.
    nodes = len(_group_nodes(bot, sim_kubeconfig(sim_eks)))
    draining = wait_until(
        lambda: g if (g := _gauges(scrape(f"{bot.url}/metrics")))["cordoned"] == nodes else None,
        timeout=60,
        what="the group's nodes counted cordoned",
    )
    assert (draining["active"], draining["gates"], draining["oldest"], draining["drains"]) == (1, 0, 0, 1)

    answered: list[str] = []

    def done() -> bool:
        sim_eks.control.advance(30)
        store = bot.store()
        try:
            job = store.job_of_step(bot.run().id, "drain-shared")
        finally:
            store.close()
        if job is not None and job.choice and not job.decision and job.choice not in answered:
            answered.append(job.choice)
            bot.command(f"choose {job.id} delete --reason single replica behind its PDB", user=COORD)
        return bool(bot.run().state is RunState.COMPLETED)

    wait_until(done, timeout=180, interval=1.0, what="the run to complete")
    # Ended: nothing in progress any more (the drained nodes leave with the old node group).
    assert _gauges(scrape(f"{bot.url}/metrics")) == idle
