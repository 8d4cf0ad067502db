"""The first day's usual mistake, through the HTTP front door: the bot was never invited to the
operations channel. A command that did its work (a plan stored, a run started) says so with the
reply it could not post, instead of only the failure (which sent people to do it again); the reply
to `start` names the channel its card could not be posted in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.plans import EKS
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

PRIMARY, SHADOW, COORD = "U0PRIMARY", "U0SHADOW", "U0COORD"


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
    (team / "plans" / "eks-nodegroups.yaml").write_text(EKS)
    config = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


def test_work_done_in_a_channel_the_bot_is_not_in_is_said_done_with_its_reply(
    bot: Bot, slack_stub: SlackStub
) -> None:
    slack_stub.fail_next(
        "chat.postMessage", error="not_in_channel", times=1000, when=lambda p: p.get("channel") == "C0OPS"
    )
    loaded = bot.command("plan load eks-nodegroups")
    assert loaded.startswith(
        ":warning: `/upgrade plan load eks-nodegroups` was done, but its reply could not be posted in <#C0OPS>: "
        "the bot is not in that channel"
    ), loaded
    assert "It said:" in loaded
    assert "loaded" in loaded.split("It said:")[1]
    assert bot.services.store.plan("eks-nodegroups") is not None  # stored: no need to load it again

    # The answer to `start` is the person's own: it says the run started, and where its card is not.
    started = bot.command("start eks-nodegroups")
    assert (
        "started. :warning: Its card could not be posted in <#C0OPS>: the bot is not in that channel"
        in started
    )
    (run,) = bot.services.store.runs()
    assert run.state == "active"
