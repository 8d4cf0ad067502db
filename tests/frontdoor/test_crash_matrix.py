"""`kill -9` while a post is in flight, and right after an ack (issue 11): after the restart every
acknowledged request has taken effect once, and every message exists once.

A real `upgrade-bot run --http` on the simulated cluster and the Slack stub. The stub keeps what
was posted (with its metadata), so "exists once" is read from Slack's side, not from the calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import COORD, PRIMARY, SHADOW, RunBot
from tests.support.plans import eks_with_human_checks
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

OPS = "C0OPS"
EKS = eks_with_human_checks()


def _is_card(params: dict[str, Any]) -> bool:
    return str(params.get("text", "")).startswith(":clipboard: *Upgrade run") and not params.get("thread_ts")


def _cards(stub: SlackStub) -> list[dict[str, Any]]:
    return [
        m for m in stub.posted(OPS) if m["text"].startswith(":clipboard: *Upgrade run") and not m["thread_ts"]
    ]


def _with_button(stub: SlackStub, value: str) -> list[dict[str, Any]]:
    """Thread messages in Slack now that carry this gate button (a gate state's one message)."""
    return [m for m in stub.posted(OPS) if m["thread_ts"] and value in json.dumps(m.get("blocks") or [])]


def _in_slack(stub: SlackStub, text: str) -> list[dict[str, Any]]:
    return [m for m in stub.posted(OPS) if text in m["text"]]


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    # The same runbook with a user group among the shadows: a click then asks Slack who is in it,
    # which keeps the worker inside the click long enough to kill the bot right after the ack.
    team = tmp_path / "team-templates"
    (team / "plans").mkdir(parents=True)
    # The runbook with `checks` as a human step (see eks_with_human_checks): these kills fall
    # between plain gates, not in the pre-flight check's findings.
    (team / "plans" / "eks-nodegroups.yaml").write_text(EKS)
    (team / "plans" / "eks-group.yaml").write_text(
        EKS.replace("name: eks-nodegroups", "name: eks-group").replace(
            "  shadow: [U0SHADOW]", "  shadow: [U0SHADOW, S0SRE]"
        )
    )
    config = write_config(
        f"templates_dir: {team}\nchannels: {{operations: {OPS}}}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    slack_stub.usergroups["S0SRE"] = [SHADOW]
    b = RunBot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    assert "loaded" in b.command("plan load eks-nodegroups")
    yield b
    b.stop()


def _restart(bot: RunBot) -> None:
    bot.kill9()
    bot.start()


@pytest.mark.parametrize("slack", ["slow", "failing"])
def test_a_card_post_cut_off_by_a_kill_ends_as_one_card_with_its_thread(bot: RunBot, slack: str) -> None:
    if slack == "slow":  # Slack posts it, the answer never reaches the bot
        bot.stub.fail_next("chat.postMessage", delay=8, when=_is_card)
    else:  # Slack answers 500, and again on the client's retries
        bot.stub.fail_next("chat.postMessage", status=500, delay=2, times=3, when=_is_card)
    bot.send_command("start eks-nodegroups", PRIMARY)
    bot.stub.wait_for(
        lambda: [c for c in bot.stub.calls_to("chat.postMessage") if _is_card(c.params)], timeout=30
    )
    _restart(bot)
    value = bot.gate("snapshot-pre")  # the gate message is posted into the card's thread
    (card,) = _cards(bot.stub)
    gate_posts = [
        m for m in bot.stub.posted(OPS) if m["thread_ts"] == card["ts"] and "snapshot-pre" in m["text"]
    ]
    assert gate_posts, "the gate message is in the card's thread"
    assert len(bot.run_ids()) == 1

    # Every claim was settled: nothing is left without a ts. (A line the restarted bot committed
    # since, such as the window's end the plan's past window is told with, is posted in its turn:
    # thread lines go out a second apart.)
    def unposted() -> list[str]:
        store = bot.store()
        try:
            return [r.key for r in store.unposted_messages()]
        finally:
            store.close()

    wait_until(lambda: unposted() == [], timeout=20, what="every claimed message posted")
    store = bot.store()
    try:
        assert store.messages(bot.run_ids()[0])["card"].ts == card["ts"]
    finally:
        store.close()
    assert len(_with_button(bot.stub, value)) == 1


def test_a_milestone_and_a_gate_message_in_flight_at_a_kill_exist_once(bot: RunBot) -> None:
    bot.send_command("start eks-nodegroups", PRIMARY)

    def milestone(params: dict[str, Any]) -> bool:
        return bool(params.get("thread_ts")) and "`snapshot-pre` succeeded" in str(params.get("text", ""))

    # 1. The "succeeded" line of the snapshot step is in flight when the bot dies.
    bot.stub.fail_next("chat.postMessage", delay=8, when=milestone)
    bot.click(PRIMARY, bot.gate("snapshot-pre"))
    bot.stub.wait_for(
        lambda: [c for c in bot.stub.calls_to("chat.postMessage") if milestone(c.params)], timeout=60
    )
    _restart(bot)
    start_of_checks = bot.gate("checks")
    assert len(_in_slack(bot.stub, "`snapshot-pre` succeeded")) == 1
    assert len(_with_button(bot.stub, start_of_checks)) == 1

    # 2. The gate message of the next state (checks' "done") is in flight when the bot dies.
    def done_gate(params: dict[str, Any]) -> bool:
        blocks = json.dumps(params.get("blocks") or [])
        return bool(params.get("thread_ts")) and "|checks|" in blocks and start_of_checks not in blocks

    bot.stub.fail_next("chat.postMessage", delay=8, when=done_gate)
    bot.click(PRIMARY, start_of_checks)
    bot.stub.wait_for(
        lambda: [c for c in bot.stub.calls_to("chat.postMessage") if done_gate(c.params)], timeout=60
    )
    _restart(bot)
    done_of_checks = bot.gate("checks")
    assert done_of_checks != start_of_checks
    assert len(_with_button(bot.stub, done_of_checks)) == 1
    # The button posted before the kill still works.
    bot.click(SHADOW, done_of_checks)
    assert bot.run().step_run("checks").state == "succeeded"
    (card,) = _cards(bot.stub)
    keys = [
        m["metadata"]["event_payload"]["key"] for m in bot.stub.posted(OPS) if m["thread_ts"] == card["ts"]
    ]
    assert len(keys) == len(set(keys)) > 8, "no message of the thread is there twice"


def test_a_command_acknowledged_just_before_a_kill_takes_effect_once(bot: RunBot) -> None:
    _restart(bot)  # a fresh process: its first roster check asks Slack for the user group
    asked = len(bot.stub.calls_to("usergroups.users.list"))
    bot.stub.fail_next("usergroups.users.list", delay=10)
    bot.send_command("start eks-nodegroups", PRIMARY)
    bot.stub.wait_for_calls("usergroups.users.list", count=asked + 1)  # acked; the worker is inside
    _restart(bot)
    wait_until(lambda: bot.run_ids(), timeout=30, what="the replayed start to create the run")
    bot.gate("snapshot-pre")
    assert len(bot.run_ids()) == 1
    assert len(_cards(bot.stub)) == 1
    # The answer to the person goes to the response_url after the run's first posts: wait for it.
    bot.stub.wait_for(lambda: any("started" in str(r.get("text", "")) for r in bot.stub.responses))


def test_a_click_acknowledged_just_before_a_kill_takes_effect_once(bot: RunBot) -> None:
    assert "loaded" in bot.command("plan load eks-group")
    bot.send_command("start eks-group", PRIMARY)
    button = bot.gate("snapshot-pre")
    _restart(bot)
    asked = len(bot.stub.calls_to("usergroups.users.list"))
    bot.stub.fail_next("usergroups.users.list", delay=10)
    bot._click(PRIMARY, button)
    bot.stub.wait_for_calls("usergroups.users.list", count=asked + 1)  # acked; the worker is inside
    _restart(bot)
    wait_until(
        lambda: [a for a in bot.run().approvals if a.step_id == "snapshot-pre"],
        timeout=30,
        what="the replayed click to count",
    )
    assert [(a.step_id, a.user_id) for a in bot.run().approvals] == [("snapshot-pre", PRIMARY)]
