"""`/upgrade action …` when the cluster does not answer (issue 27 item 4): the check that what it
names exists is said to be skipped, and why, and the gate opens all the same (the cluster may answer
by the time the approvers have). Through the real HTTP door, signed as Slack signs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.kubeconfigs import refusing_kubeconfig
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

PRIMARY, SHADOW = "U0PRIMARY", "U0SHADOW"


@pytest.fixture
def bot(write_config: Callable[..., Path], slack_stub: SlackStub, tmp_path: Path) -> Iterator[Bot]:
    kubeconfig = refusing_kubeconfig(tmp_path / "kubeconfig", context="prod-admin", scheme="https")
    config = write_config(
        f"channels: {{operations: C0OPS}}\nclusters:\n  prod: {{kubeconfig: {kubeconfig}}}\n"
    )
    for user in (PRIMARY, SHADOW):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(2)
    with start_front(load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool) as front:
        yield Bot(front=front, pool=pool)


def test_an_action_on_a_cluster_that_does_not_answer_says_the_check_was_skipped_and_opens_the_gate(
    bot: Bot,
) -> None:
    reply = bot.command('action cordon node=ip-10-0-1-7 --reason "bad disk"')
    assert "waits for the primary and the shadow" in reply, reply
    assert (
        "The check that what it names exists was skipped: "
        "cluster prod (context prod-admin) refused the connection" in reply
    ), reply
    assert "Traceback" not in reply
    assert "internal error" not in reply
    (row,) = bot.services.store.runs()
    assert row.state != "failed"
    # The gate is open: its button is on the thread, for the approvers.
    assert bot.gate("cordon")
    # The card says the version was not read, not a made-up "0.0 → 0.0".
    card = next(m for m in bot.front.stub.posted("C0OPS") if "Upgrade run" in m.get("text", ""))
    assert "version not read (the cluster did not answer)" in card["text"], card["text"]
    assert "0.0" not in card["text"]
