"""Gates that show what they will touch (issue 23): a drain's gate carries its dry run, read from
the simulated cluster once when the gate opened and kept with it; Reject asks for a reason in a
modal that only the gate's people can submit; danger buttons ask Slack to confirm first.

Through the HTTP front door with the real slack_sdk client against the Slack stub, and the real
kubernetes client against the sim for what the test expects."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.blockkit import buttons, message_blocks, modal, text_of
from tests.support.bot_process import RunBot
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PRIMARY, SHADOW, COORD, STRANGER = "U0PRIMARY", "U0SHADOW", "U0COORD", "U0STRANGER"
GROUP = "ng-shared"
STEP = "drain-shared"
PLAN = f"""\
name: drain-one
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
channels: {{operations: C0OPS}}
roster:
  primary: [{PRIMARY}]
  shadow: [{SHADOW}]
  coordinator: [{COORD}]
steps:
  - id: {STEP}
    title: Cordon and drain the old {GROUP} nodes
    gate: {{approve: [primary, shadow]}}
    actions: [{{drain: {{nodegroup: {GROUP}, allow_local_storage: "true", timeout: 15m}}}}]
  - id: after
    title: Check the dashboards
    gate: {{any_of: [primary, shadow]}}
    done: {{any_of: [primary, shadow]}}
"""


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Bot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    team = kubeconfig.parent / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "drain-one.yaml").write_text(PLAN)
    cfg = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD, STRANGER):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(4)
    with start_front(
        load_settings(cfg, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


@pytest.fixture
def core(sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]) -> client.CoreV1Api:
    api = config.new_client_from_config(config_file=str(sim_kubeconfig(sim_eks)), persist_config=False)
    return client.CoreV1Api(api)


@pytest.fixture
def strict_budget(core: client.CoreV1Api, sim_eks: Any) -> str:
    """A budget that allows no disruption of payments-api (maxUnavailable 0), as teams write for a
    service they never want disturbed: created in the sim, its status computed by the sim's
    disruption controller."""
    policy = client.PolicyV1Api(core.api_client)
    policy.create_namespaced_pod_disruption_budget(
        "payments",
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="payments-api-strict"),
            spec=client.V1PodDisruptionBudgetSpec(
                max_unavailable=0, selector=client.V1LabelSelector(match_labels={"app": "payments-api"})
            ),
        ),
    )

    def computed() -> bool:
        sim_eks.control.advance(1)
        pdb = policy.read_namespaced_pod_disruption_budget("payments-api-strict", "payments")
        return pdb.status is not None and pdb.status.observed_generation is not None

    wait_until(computed, timeout=30, what="the budget's status")
    return "payments/payments-api-strict"


def gate_posts(stub: SlackStub, step: str) -> list[dict[str, Any]]:
    """The gate messages of `step` (in the run's thread; the card carries buttons too) that Slack
    accepted, oldest first."""
    return [
        c.params
        for c in stub.calls_to("chat.postMessage")
        if c.response.get("ok")
        and c.params.get("thread_ts")
        and f"|{step}|" in json.dumps(c.params.get("blocks") or [])
    ]


def expected_drain(core: client.CoreV1Api) -> tuple[dict[str, int], set[str]]:
    """What the cluster says the drain will do, read with the kubernetes client: pods to evict per
    node of the group (not DaemonSet pods), and the budgets at 0 allowed disruptions that select
    one of them."""
    nodes = sorted(
        n.metadata.name for n in core.list_node(label_selector=f"eks.amazonaws.com/nodegroup={GROUP}").items
    )
    evict: dict[str, list[Any]] = {n: [] for n in nodes}
    for pod in core.list_pod_for_all_namespaces().items:
        owners = pod.metadata.owner_references or []
        if pod.spec.node_name in evict and not any(o.kind == "DaemonSet" for o in owners):
            evict[pod.spec.node_name].append(pod)
    policy = client.PolicyV1Api(core.api_client)
    blocking = set()
    for pdb in policy.list_pod_disruption_budget_for_all_namespaces().items:
        if (pdb.status.disruptions_allowed or 0) > 0:
            continue
        wanted = (pdb.spec.selector.match_labels or {}).items()
        for pods in evict.values():
            if any(
                p.metadata.namespace == pdb.metadata.namespace and wanted <= (p.metadata.labels or {}).items()
                for p in pods
            ):
                blocking.add(f"{pdb.metadata.namespace}/{pdb.metadata.name}")
    return {n: len(p) for n, p in evict.items()}, blocking


def test_a_drain_gate_shows_its_nodes_the_pods_per_node_and_the_budget_at_zero(
    bot: Bot, core: client.CoreV1Api, strict_budget: str
) -> None:
    per_node, blocking = expected_drain(core)
    assert len(per_node) == 3
    assert sum(per_node.values()) > 0
    assert strict_budget in blocking
    assert "loaded" in bot.command("plan load drain-one")
    assert "started" in bot.command("start drain-one")

    (gate,) = gate_posts(bot.stub, STEP)
    blocks = message_blocks(gate)
    shown = text_of(blocks)
    assert "*Dry run at <!date^" in shown
    assert f"cordon 3 of 3 node(s), evict {sum(per_node.values())} pod(s)" in shown
    for node, count in per_node.items():
        assert f"`{node}` — cordon, evict {count} pod(s)" in shown
    assert "Disruption budgets at 0 allowed disruptions" in shown
    for ref in blocking:
        assert f"`{ref}` holds " in shown
    # The text message (notifications, the terminal) says the same.
    assert "Dry run at" in gate["text"]
    assert all(f"`{n}`" in gate["text"] for n in per_node)
    # Kept with the gate: the stored dry run is the one shown.
    run = bot.services.store.runs()[0]
    sr = bot.services.runs.load(run.id).step_run(STEP)
    kept = json.loads(bot.services.store.gate_dry_run(run_id=run.id, step_id=STEP, epoch=sr.epoch) or "{}")
    assert kept["actions"][0]["evict_count"] == sum(per_node.values())
    assert {b["pdb"] for b in kept["actions"][0]["blocking"]} == blocking

    # Reject is a danger button with Slack's confirmation dialog (validated by slack_sdk above).
    (reject,) = [b for b in buttons(blocks) if b["action_id"] == "gate_reject"]
    assert reject["style"] == "danger"
    assert reject["confirm"]["style"] == "danger"
    assert STEP in reject["confirm"]["text"]["text"]


def test_an_unreachable_cluster_is_said_in_one_line_and_the_gate_still_works(bot: Bot, sim_eks: Any) -> None:
    assert "loaded" in bot.command("plan load drain-one")
    sim_eks.stop()
    assert "started" in bot.command("start drain-one")
    (gate,) = gate_posts(bot.stub, STEP)
    shown = text_of(message_blocks(gate))
    assert "The dry run could not be computed:" in shown
    assert "Traceback" not in shown
    # The gate still counts approvals.
    assert bot.click(PRIMARY, bot.gate(STEP)) is None
    assert "waiting for the shadow" in bot.card()


def test_reject_asks_for_a_reason_in_a_modal_and_records_it_in_the_thread_and_the_audit(bot: Bot) -> None:
    assert "loaded" in bot.command("plan load drain-one")
    assert "started" in bot.command("start drain-one")
    value = bot.gate(STEP)
    run_id = bot.services.store.runs()[0].id

    # A stranger's Reject opens nothing: refused, with the reason, before any modal.
    refused = bot.click(STRANGER, value, "gate_reject")
    assert refused is not None
    assert "this step needs the primary and the shadow" in refused
    assert bot.stub.calls_to("views.open") == []

    # The shadow's Reject opens the reason modal; nothing is decided yet.
    assert bot.click(SHADOW, value, "gate_reject") is None
    (opened,) = bot.stub.calls_to("views.open")
    assert opened.params["trigger_id"].startswith("click-")
    view = modal(opened.params["view"])
    (reason_input,) = [b for b in view["blocks"] if b["type"] == "input"]
    assert reason_input["element"]["multiline"] is True
    assert reason_input.get("optional", False) is False
    assert bot.services.runs.load(run_id).step_run(STEP).state == "awaiting_approval"

    # Someone outside the gate's roles cannot submit it (a forged or forwarded submission).
    before = bot.pool.count()
    answer = bot.front.submit_view(
        STRANGER,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": "not mine to say"}}},
    )
    assert answer.status == 200
    bot.pool.wait_idle(before)
    assert bot.services.runs.load(run_id).step_run(STEP).state == "awaiting_approval"
    (told,) = [c.params for c in bot.stub.calls_to("chat.postEphemeral") if c.params["user"] == STRANGER]
    assert "this step needs the primary and the shadow" in told["text"]

    # A blank reason is answered in the modal.
    blank = bot.front.submit_view(
        SHADOW,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": "   "}}},
    )
    assert json.loads(blank.body)["response_action"] == "errors"

    # The shadow's reason: the step fails with it, in the thread and in the audit log.
    why = "payments-api has one ready replica; wait for the second"
    before = bot.pool.count()
    ok = bot.front.submit_view(
        SHADOW,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": why}}},
    )
    assert ok.status == 200
    assert ok.body == ""
    bot.pool.wait_idle(before)
    run = bot.services.runs.load(run_id)
    assert run.step_run(STEP).state == "failed"
    assert run.state == "paused"
    thread = [p["text"] for p in bot.posts() if p.get("thread_ts")]
    assert any(f"<@{SHADOW}> rejected `{STEP}`: {why}" in t for t in thread), thread
    rejected = [e for e in bot.services.store.audit_entries(run_id=run_id) if e.subcommand == "rejected"]
    assert len(rejected) == 1
    assert why in rejected[0].detail
    assert rejected[0].user_id == SHADOW

    # The same modal again (a double submit, a stale gate) changes nothing and says why.
    before = bot.pool.count()
    bot.front.submit_view(
        PRIMARY,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": "me too"}}},
    )
    bot.pool.wait_idle(before)
    stale = [c.params["text"] for c in bot.stub.calls_to("chat.postEphemeral") if c.params["user"] == PRIMARY]
    assert stale
    assert "nothing can be approved until it is resumed" in stale[-1]
    assert (
        len([e for e in bot.services.store.audit_entries(run_id=run_id) if e.subcommand == "rejected"]) == 1
    )


@pytest.fixture
def proc(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    team = tmp_path / "team-templates"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "drain-one.yaml").write_text(PLAN)
    cfg = write_config(
        f"templates_dir: {team}\nchannels: {{operations: C0OPS}}\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    b = RunBot(config=cfg, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


def test_a_restart_posts_the_dry_run_read_when_the_gate_opened_and_only_once(
    proc: RunBot, slack_stub: SlackStub, core: client.CoreV1Api
) -> None:
    assert "loaded" in proc.command("plan load drain-one")
    # Slack refuses the gate message: the dry run is read and kept, the post is owed.
    slack_stub.fail_next(
        "chat.postMessage", error="fatal_error", when=lambda p: "Dry run at" in str(p.get("text"))
    )
    assert "started" in proc.command("start drain-one")
    proc.kill9()
    assert gate_posts(slack_stub, STEP) == []
    run = proc.run()
    store = proc.store()
    try:
        kept = store.gate_dry_run(run_id=run.id, step_id=STEP, epoch=run.step_run(STEP).epoch)
    finally:
        store.close()
    assert kept is not None
    before = json.loads(kept)
    assert before["actions"][0]["cordon_count"] == 3

    # The cluster moves while the bot is down: someone cordons one of the nodes by hand.
    first = before["actions"][0]["nodes"][0]["name"]
    core.patch_node(first, {"spec": {"unschedulable": True}})

    proc.start()  # start-up recovery posts what is owed
    (gate,) = slack_stub.wait_for(lambda: gate_posts(slack_stub, STEP) or None, timeout=30)
    shown = text_of(message_blocks(gate))
    # The message is the dry run read when the gate opened (its time, its counts), not a new one.
    stamp = int(datetime.fromisoformat(before["at"].replace("Z", "+00:00")).timestamp())
    assert f"<!date^{stamp}^" in shown
    assert "cordon 3 of 3 node(s)" in shown
    assert f"`{first}` — cordon, evict" in shown
    # Later publishes (a click, the timer) never post the gate again.
    proc.click(PRIMARY, proc.gate(STEP))
    assert len(gate_posts(slack_stub, STEP)) == 1
    store = proc.store()
    try:
        assert store.gate_dry_run(run_id=run.id, step_id=STEP, epoch=run.step_run(STEP).epoch) == kept
    finally:
        store.close()
