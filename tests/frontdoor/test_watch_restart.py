"""`kill -9` of a real `upgrade-bot run --http` in the middle of a watch (issue 13): the restarted
process takes the watch (its owner's heartbeat is stale), lists again, posts the milestones it
missed exactly once into the same card's thread, and brings the same card up to date."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.watches.summary import Summary
from tests.support.bot_process import PRIMARY, RunBot
from tests.support.crash import SHORT_DUTIES
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until
from tests.support.watch_threads import advance, milestone_lines_once, node_groups, node_uids, summary_uids

OPS = "C0OPS"


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[RunBot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    config = write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n" + SHORT_DUTIES)
    slack_stub.users[PRIMARY] = {"id": PRIMARY}
    b = RunBot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


def _watch_row(bot: RunBot) -> Any:
    store = bot.store()
    try:
        (row,) = store.watches(live=False)
        return row
    finally:
        store.close()


def _card_ts(bot: RunBot) -> str:
    store = bot.store()
    try:
        card = store.messages("watch:1").get("card")
        return card.ts if card else ""
    finally:
        store.close()


def _groups(summary_json: str) -> dict[str, int]:
    return {g.name: g.total for g in Summary.from_json(summary_json).groups} if summary_json else {}


def test_kill9_mid_watch_same_card_each_milestone_once(
    bot: RunBot, slack_stub: SlackStub, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    reply = bot.command("watch")
    assert "started" in reply, reply
    wait_until(lambda: _card_ts(bot), timeout=30, what="the card")
    sim_eks.control.run_upgrade()
    advance(sim_eks, 25)  # the control plane and the first node groups
    # The bot has read and published that much: its card holds the cluster's nodes as they are.
    seen = node_uids(sim_kubeconfig(sim_eks))
    wait_until(lambda: summary_uids(_watch_row(bot).summary) == seen, timeout=60, what="the card to keep up")
    bot.kill9()
    # While the bot is down the upgrade goes on: nodes join, are cordoned and removed.
    advance(sim_eks, 40, watched=False)
    bot.start()
    pid = f"{bot.process.pid}-"  # type: ignore[union-attr]
    wait_until(lambda: _watch_row(bot).owner.startswith(pid), timeout=60, what="the restarted bot to take it")
    advance(sim_eks, 80)
    truth = node_groups(sim_kubeconfig(sim_eks))
    wait_until(lambda: _groups(_watch_row(bot).summary) == truth, timeout=60, what="the card to catch up")
    assert "is ending" in bot.command("unwatch")
    wait_until(lambda: _watch_row(bot).state == "ended", timeout=30, what="the watch to end")
    # The end is committed first, then the card is edited and the final line posted.
    wait_until(
        lambda: any("Watch ended" in m["text"] for m in slack_stub.posted(OPS)),
        timeout=30,
        what="the final line",
    )

    cards = [
        m for m in slack_stub.posted(OPS) if m["text"].startswith(":") and "*Watch on prod*" in m["text"]
    ]
    assert len(cards) == 1, [c["text"][:80] for c in cards]
    thread = [m["text"] for m in slack_stub.posted(OPS) if m.get("thread_ts") == cards[0]["ts"]]
    lines = milestone_lines_once(thread)
    # Every node the upgrade replaced was announced as removed, once, including while the bot was down.
    removed = [line for line in lines if "drained and removed" in line]
    replaced = sum(n for g, n in truth.items() if g != "fargate")
    assert len(removed) == replaced
    assert "Watch ended — unwatched by" in lines[-1]
    # The card in Slack ends in the final state (edited in place; edits are coalesced on the
    # trailing edge, so the last one may land up to an interval after the final thread line).
    card_ts = cards[0]["ts"]
    wait_until(
        lambda: any(
            m["ts"] == card_ts and m["text"].startswith(":stop_button: *Watch on prod* — *ended*")
            for m in slack_stub.posted(OPS)
        ),
        timeout=30,
        what="the card's final edit",
    )
