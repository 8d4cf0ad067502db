"""NODE002's Fix… button under `/upgrade check` (issue 25, item 4), end to end on the sim through the
HTTP front door, the real slack_sdk client and the Slack stub (which validates every Block Kit
payload): a node someone left cordoned is offered as `uncordon node=…`; the click opens the same
gated one-step run as a known issue's Fix… (two approvers, the dry run at the gate), claimed once
per check post; approved by two, the node is schedulable again. A node the bot's own run cordoned
(its `upgrade-bot.io/cordoned-by` annotation) is named but not offered. Without NODE002 the summary
is posted as text with no button."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.core.checks.preflight import CORDONED_BY
from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import (
    FIX,
    OPS,
    PRIMARY,
    SHADOW,
    STRANGER,
    approve_and_complete,
    fix_bot,
    scanned_by_hand,
)
from tests.support.slack_stub import SlackStub


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim_eks: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim_eks, tmp_path) as started:
        yield started


def _check_post(front: Bot) -> dict[str, Any]:
    """The check's summary as Slack accepted it (posted in the channel, not in a thread)."""
    front.command("check --cluster prod")
    posts = [
        c
        for c in front.stub.calls_to("chat.postMessage")
        if c.params.get("channel") == OPS
        and not c.params.get("thread_ts")
        and "Pre-flight check of" in str(c.params.get("text", ""))
    ]
    assert posts, "no check summary posted"
    assert posts[-1].response.get("ok"), posts[-1].response
    blocks = posts[-1].params.get("blocks")
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
    return {**posts[-1].params, "blocks": blocks, "ts": posts[-1].response["ts"]}


def _fix_values(post: dict[str, Any]) -> list[str]:
    return [
        str(el["value"])
        for b in post["blocks"]
        if b["type"] == "actions"
        for el in b["elements"]
        if el.get("action_id") == FIX
    ]


def _click(front: Bot, user: str, value: str, ts: str) -> str | None:
    """Click the Fix… button on the message `ts`; the ephemeral refusal, if any."""
    before, jobs = len(front.stub.responses), front.pool.count()
    assert front.front.click(user, value, FIX, message_ts=ts).status == 200
    front.pool.wait_idle(jobs)
    return str(front.stub.responses[-1]["text"]) if len(front.stub.responses) > before else None


def test_a_node_left_cordoned_is_uncordoned_by_the_check_s_fix_button(
    bot: tuple[Bot, Path], sim_eks: SimCluster
) -> None:
    front, kubeconfig = bot
    services = front.services
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    nodes = sorted(
        n.metadata.name for n in core.list_node().items if not n.metadata.name.startswith("fargate-")
    )
    left, ours = nodes[0], nodes[1]
    # Someone cordoned `left` by hand (kubectl cordon); the bot's run R7 cordoned `ours` for its drain.
    core.patch_node(left, {"spec": {"unschedulable": True}})
    core.patch_node(
        ours,
        {
            "metadata": {"annotations": {CORDONED_BY: "run=R7 step=drain-old job=3 approved-by=U1,U2"}},
            "spec": {"unschedulable": True},
        },
    )

    post = _check_post(front)
    values = _fix_values(post)
    assert len(values) == 1, post["blocks"]
    value = values[0]
    assert value.endswith(f"|NODE002|prod|uncordon node={left}"), value
    shown = json.dumps(post["blocks"])
    assert f"`/upgrade action uncordon node={left} --cluster prod`" in shown
    # Named, not offered: the note under the button says why.
    assert f"Left out, as the bot's own run cordoned them: Node {ours} (the bot's run R7)." in shown
    assert ours not in value

    # Off the roster: told so, nothing started.
    refusal = _click(front, STRANGER, value, post["ts"])
    assert refusal is not None
    assert "only people on the roster" in refusal
    assert services.store.runs() == []

    # The primary's click opens one gated run; its number goes into the summary's thread.
    assert _click(front, PRIMARY, value, post["ts"]) is None
    runs = services.store.runs()
    assert len(runs) == 1, runs
    run_id = str(runs[0].id)
    said = [
        p
        for p in front.posts()
        if p.get("thread_ts") == post["ts"] and str(p.get("text", "")).startswith(":wrench:")
    ]
    assert len(said) == 1, said
    assert f"run `{run_id}`" in said[0]["text"]
    assert f"uncordon node={left}" in said[0]["text"]

    # A second click, by another person, is told which run handles it; no second run.
    again = _click(front, SHADOW, value, post["ts"])
    assert again is not None
    assert f"already asked by <@{PRIMARY}>: run `{run_id}`" in again
    assert len(services.store.runs()) == 1

    # The gate's dry run names the node, still cordoned.
    gate = front.gate("uncordon")
    gate_post = next(p for p in reversed(front.posts()) if gate in json.dumps(p.get("blocks") or []))
    gate_text = json.dumps(gate_post["blocks"], ensure_ascii=False)
    assert f"*uncordon* `node={left}`: uncordon 1 of 1 node(s)\\n• `{left}`" in gate_text, gate_text
    assert "Fix for check finding NODE002 on cluster prod" in gate_text
    assert core.read_node(left).spec.unschedulable

    duties, _, job_runner = scanned_by_hand(front)
    try:
        approve_and_complete(front, gate, "uncordon", run_id=run_id, runner=job_runner, sim=sim_eks)
    finally:
        duties.shutdown()

    assert not core.read_node(left).spec.unschedulable  # schedulable again
    assert core.read_node(ours).spec.unschedulable  # the bot's run's cordon is left to that run
    audit = services.store.audit_entries()
    asked = [e for e in audit if e.subcommand == "action" and e.outcome == "ok"]
    assert [e.user_id for e in asked] == [PRIMARY]
    rows = services.store.run_rows(run_id)
    assert rows is not None
    assert {a.user_id for a in rows[2]} >= {PRIMARY, SHADOW}

    # Checked again: NODE002 names only the bot's cordon now, and offers nothing.
    post = _check_post(front)
    assert _fix_values(post) == []
    assert f"`NODE002` Nodes already cordoned — Node {ours}" in str(post["text"])


def test_without_node002_the_check_has_no_fix_button(bot: tuple[Bot, Path]) -> None:
    front, _ = bot
    post = _check_post(front)
    assert "NODE002" not in str(post["text"])
    assert _fix_values(post) == []
    assert not any(b["type"] == "actions" for b in post["blocks"])


@pytest.mark.parametrize(
    ("value", "said"),
    [
        # Only the one action the finding may name, on names shaped as node names.
        ("check:ab12|NODE002|prod|cordon node=ip-10-0-0-12", "finding NODE002 offers only `uncordon node=…`"),
        ("check:ab12|NODE002|prod|uncordon node=a;b", "this button names no node uncordon can take"),
        ("check:ab12|NODE001|prod|uncordon node=ip-10-0-0-12", "this button does not name a check's finding"),
        ("check:ab12|NODE002|prod", "this button does not name a check's finding"),
        # Shaped right, but no such cluster: the router refuses, and nothing is claimed.
        ("check:ab12|NODE002|nowhere|uncordon node=ip-10-0-0-12", "nowhere"),
    ],
)
def test_a_check_fix_button_whose_value_was_changed_is_refused(
    bot: tuple[Bot, Path], value: str, said: str
) -> None:
    front, _ = bot
    refusal = _click(front, PRIMARY, value, "1700000001.000100")
    assert refusal is not None
    assert said in refusal, refusal
    assert front.services.store.runs() == []
    assert front.services.store.finding_fix(subject="check:ab12", key="NODE002") is None
