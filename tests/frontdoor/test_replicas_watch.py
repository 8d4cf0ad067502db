"""Two real `upgrade-bot run --http` replicas on one PostgreSQL, the sim and the Slack stub: `kill -9`
of the leader in the middle of a watch (issues 13 and 16). The other replica leads within the lease
time, takes the watch over once its driver's heartbeat is stale, and goes on in the SAME card and
thread: every milestone once, including those of nodes replaced while nobody drove it."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.watches.summary import Summary
from tests.support.bot_process import BotProcess
from tests.support.crash import SHORT_DUTIES
from tests.support.postgres import drop_every_table
from tests.support.replicas import LEASE_SECONDS, RENEW_SECONDS, Replicas, leader_yaml
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until
from tests.support.watch_threads import advance, milestone_lines_once, node_uids, summary_uids

OPS = "C0OPS"
TAKEOVER_BOUND = LEASE_SECONDS + RENEW_SECONDS + 2.0


@pytest.fixture
def replicas(
    postgres_url: str,
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Replicas]:
    drop_every_table(postgres_url)
    config = write_config(
        f"database_url: {postgres_url}\n"
        "channels: {operations: C0OPS}\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
        + leader_yaml()
        + SHORT_DUTIES
    )
    slack_stub.users["U0PRIMARY"] = {"id": "U0PRIMARY"}
    group = Replicas(config=config, env=bot_env, stub=slack_stub)
    try:
        group.start(2)
        yield group
    finally:
        group.stop_all()
        drop_every_table(postgres_url)


def command(member: BotProcess, stub: SlackStub, text: str) -> str:
    """A slash command's reply: ephemeral, or posted in the channel (not a card, not in a thread)."""
    before = len(stub.responses)
    posted = len(stub.calls_to("chat.postMessage"))
    member.send_command(text, "U0PRIMARY")

    def reply() -> str | None:
        if len(stub.responses) > before:
            return str(stub.responses[before]["text"])
        new = [
            c.params["text"]
            for c in stub.calls_to("chat.postMessage")[posted:]
            if not c.params.get("thread_ts") and "*Watch on prod*" not in c.params["text"]
        ]
        return str(new[0]) if new else None

    return str(stub.wait_for(reply, timeout=30))


def test_kill9_of_the_leader_mid_watch_the_other_takes_the_same_card_each_milestone_once(
    replicas: Replicas, slack_stub: SlackStub, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    kubeconfig = sim_kubeconfig(sim_eks)
    first, other = replicas.members
    assert replicas.wait_leader() is first
    assert "started" in command(other, slack_stub, "watch --channel C0OPS")
    wait_until(lambda: replicas.store.messages("watch:1").get("card"), timeout=30, what="the card")
    (row,) = replicas.store.watches()
    wait_until(lambda: replicas.store.watch(row.id).owner, timeout=30, what="the leader to drive it")  # type: ignore[union-attr]
    assert replicas.store.watch(row.id).owner.startswith(f"{first.process.pid}-")  # type: ignore[union-attr]
    sim_eks.control.run_upgrade()
    advance(sim_eks, 25)
    # The leader has read and published that much: its card holds the cluster's nodes as they are.
    seen = node_uids(kubeconfig)
    wait_until(
        lambda: summary_uids(replicas.store.watch(row.id).summary) == seen,  # type: ignore[union-attr]
        timeout=60,
        what="the card to keep up",
    )

    sent = replicas.signal(first, signal.SIGKILL)
    new, took = replicas.failover(first, sent)
    assert new is other
    assert took <= TAKEOVER_BOUND
    advance(sim_eks, 40, watched=False)  # the upgrade goes on while nobody drives the watch
    wait_until(
        lambda: replicas.store.watch(row.id).owner.startswith(f"{other.process.pid}-"),  # type: ignore[union-attr]
        timeout=40,
        what="the new leader to take the watch over",
    )
    advance(sim_eks, 80)
    nodes = node_uids(kubeconfig)
    wait_until(
        lambda: summary_uids(replicas.store.watch(row.id).summary) == nodes,  # type: ignore[union-attr]
        timeout=60,
        what="the new leader's card to catch up",
    )
    truth = Counter(n.group for n in Summary.from_json(replicas.store.watch(row.id).summary).nodes)  # type: ignore[union-attr]
    assert truth
    assert "is ending" in command(other, slack_stub, "unwatch")
    wait_until(
        lambda: any("Watch ended" in m["text"] for m in slack_stub.posted(OPS)), timeout=40, what="the end"
    )

    cards = [m for m in slack_stub.posted(OPS) if "*Watch on prod*" in m["text"] and not m.get("thread_ts")]
    assert len({c["ts"] for c in cards}) == 1, [c["text"][:80] for c in cards]
    thread = [m["text"] for m in slack_stub.posted(OPS) if m.get("thread_ts") == cards[0]["ts"]]
    lines = milestone_lines_once(thread)
    assert any("drained and removed" in line for line in lines)
    assert "Watch ended — unwatched by" in lines[-1]
