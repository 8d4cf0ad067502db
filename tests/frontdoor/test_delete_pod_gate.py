"""Issue 38, item 2, end to end through the HTTP front door, the real slack_sdk client and the Slack
stub (which validates every Block Kit payload), on the sim: a Deployment whose three pods are all
not ready (Pending: no node can take them) and a PodDisruptionBudget that wants two of them.

- The gate of `/upgrade action delete-pod … only=not-ready` says per workload how many pods remain
  ("web: 3 pods, 3 not ready → deletes 2, keeps 1, 1 remains (maxUnavailable 25% …)"), names the
  budget that holds them, and carries "Approve with force…" beside Approve and Reject.
- Force needs its own reason (a blank one is refused in the modal), and is the gate's option only
  when every approval chose it: one force and one plain approval evict, and the budget keeps
  every pod — the thread says so.
- Both approvals with force: two pods are deleted with grace period 0, the newest stays (never a
  whole workload), and the audit has each approval's reason and each forced delete's budget."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.core.runs.report import build_report
from bot.sim import SimCluster
from tests.contract.workloads import deployment, pdb
from tests.support.awaited import Bot
from tests.support.fix_buttons import (
    OPS,
    PRIMARY,
    SHADOW,
    approve_with_force,
    complete,
    fix_bot,
    scanned_by_hand,
    wait_for,
)
from tests.support.slack_stub import SlackStub

NS = "shop"


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim_eks: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim_eks, tmp_path) as started:
        yield started


def _web(core: client.CoreV1Api) -> dict[str, str]:
    pods = core.list_namespaced_pod(NS, label_selector="app=web").items
    return {p.metadata.name: p.metadata.uid for p in pods if not p.metadata.deletion_timestamp}


def _stuck_web(api: client.ApiClient, sim: SimCluster) -> dict[str, str]:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    client.AppsV1Api(api).create_namespaced_deployment(NS, deployment("web", "no-such-group", replicas=3))
    policy.create_namespaced_pod_disruption_budget(NS, pdb("web", minAvailable=2))

    def settled() -> bool:
        status = policy.read_namespaced_pod_disruption_budget("web", NS).status
        return len(_web(core)) == 3 and bool(status and status.expected_pods == 3)

    wait_for(settled, what="3 Pending web pods and their budget", tick=lambda: sim.control.advance(5))
    return _web(core)


def _run(bot: Bot, text: str) -> str:
    bot.command(text)
    return str(bot.services.store.runs()[0].id)


def _gate_post(bot: Bot, step: str) -> dict[str, Any]:
    value = bot.gate(step)
    return next(p for p in reversed(bot.posts()) if value in json.dumps(p.get("blocks") or []))


def _thread(bot: Bot) -> list[str]:
    return [str(p["text"]) for p in bot.posts() if p.get("thread_ts") and p.get("channel") == OPS]


def test_all_pods_not_ready_the_gate_counts_them_and_only_a_unanimous_force_passes_the_budget(
    bot: tuple[Bot, Path], sim_eks: SimCluster
) -> None:
    front, kubeconfig = bot
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    pods = _stuck_web(api, sim_eks)
    duties, _, runner = scanned_by_hand(front)
    try:
        ask = f"action delete-pod workload=deployment/{NS}/web only=not-ready --reason stuck pods"
        run_id = _run(front, ask)
        gate = _gate_post(front, "delete-pod")
        shown = json.dumps(gate["blocks"], ensure_ascii=False)
        assert (
            "web: 3 pods, 3 not ready → deletes 2, keeps 1, 1 remains (maxUnavailable 25%, replicas 3 of"
            f" Deployment {NS}/web)"
        ) in shown
        assert f"PodDisruptionBudget {NS}/web (disruptionsAllowed 0)" in shown
        actions = next(b for b in gate["blocks"] if b["type"] == "actions")["elements"]
        assert [(e["action_id"], e["text"]["text"]) for e in actions] == [
            ("gate_approve", "Approve start"),
            ("gate_force", "Approve with force…"),
            ("gate_reject", "Reject"),
        ]

        # Force without a reason is refused in the modal, and nothing is counted.
        body = approve_with_force(front, "delete-pod", PRIMARY, "   ")
        assert json.loads(body)["errors"] == {
            "reason": "Say why force is needed: it goes into the thread and the audit log."
        }
        # One force, one plain approval: the gate's option is not force — the pods are evicted,
        # and the budget keeps every one of them.
        assert approve_with_force(front, "delete-pod", PRIMARY, "the node is dead") == ""
        assert front.click(SHADOW, front.gate("delete-pod")) is None
        complete(front, run_id=run_id, runner=runner, sim=sim_eks, state="paused")
        assert _web(core) == pods
        thread = _thread(front)
        assert any(
            f"force was chosen by <@{PRIMARY}> only: the step evicts through the Eviction API" in t
            for t in thread
        ), thread
        # One person's force is declined: nothing went past a safeguard by people's choice.
        assert not any("with force" in f for f in build_report(front.services.store, run_id).findings)
        held = [t for t in thread if "only the gate's force option passes a budget" in t]
        assert len(held) == 2
        assert all(f"PodDisruptionBudget {NS}/web (disruptionsAllowed 0)" in t for t in held)

        # A new action, both approvals with force: two pods go with grace period 0, one stays.
        front.command(ask)
        second = next(r.id for r in front.services.store.runs() if r.id != run_id)
        for user in (PRIMARY, SHADOW):
            assert approve_with_force(front, "delete-pod", user, f"{user}: its node is gone") == ""
        complete(front, run_id=str(second), runner=runner, sim=sim_eks)
        left = _web(core)
        kept = [name for name in pods if name in left]
        assert len(kept) == 1
        assert left[kept[0]] == pods[kept[0]]
        audit = front.services.store.audit_entries(run_id=str(second))
        approvals = [e.detail.rsplit(" [", 1)[0] for e in audit if e.subcommand == "approved"]
        assert approvals == [
            f"start roles=primary with force: {PRIMARY}: its node is gone",
            f"start roles=shadow with force: {SHADOW}: its node is gone",
        ]
        forced = [e.detail for e in audit if e.subcommand == "delete-pod" and "grace period 0" in e.detail]
        assert len(forced) == 2
        assert all(f"past PodDisruptionBudget {NS}/web (disruptionsAllowed 0)" in d for d in forced)
        assert all(f"force chosen at the gate by {PRIMARY}, {SHADOW}" in d for d in forced)
        # Said as past a safeguard by people's choice: the report's Outcome and Findings (who and
        # why), and the card's finished step line — never a plain success.
        report = build_report(front.services.store, str(second))
        assert report.outcome == (
            "completed: 1 of 1 steps succeeded (1 past a safeguard by people's choice: see Findings)"
        )
        assert report.findings == (
            f"`delete-pod`: gate approved with force by {PRIMARY} ({PRIMARY}: its node is gone) and "
            f"{SHADOW} ({SHADOW}: its node is gone)",
        )
        card_ts = front.cards()[-1]["ts"]
        card = [c.params["text"] for c in front.stub.calls_to("chat.update") if c.params["ts"] == card_ts][-1]
        assert "Run *completed*" in card
        assert (
            "— succeeded *past a safeguard by people's choice:* approved with force by "
            f"<@{PRIMARY}> (<@{PRIMARY}>: its node is gone) and <@{SHADOW}> (<@{SHADOW}>: its node is gone)"
        ) in card
        assert ":white_check_mark: `delete-pod`" not in card
    finally:
        duties.shutdown()
