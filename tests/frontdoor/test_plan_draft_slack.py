"""`/upgrade plan draft` in Slack: the draft is uploaded to the thread as a file, with the hint to
load it; the uploaded file loads unchanged (`/upgrade plan load <link>`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

PRIMARY, SHADOW = "U0PRIMARY", "U0SHADOW"


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Bot]:
    config = write_config(
        "channels: {operations: C0OPS}\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW):
        slack_stub.users[user] = {"id": user}
    slack_stub.usergroups["S0LEADS"] = ["U0COORD"]  # the roster's coordinator group
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


def test_a_drafted_plan_is_uploaded_and_loads_unchanged(bot: Bot) -> None:
    uploads = len(bot.stub.uploads)
    reply = bot.command("plan draft --to 1.25", user=PRIMARY)
    assert "*Plan draft* for *prod* 1.24.17 → 1.25 (pipeline style)" in reply
    assert "node groups in this order: control-plane, istio, ng-shared, others, logging" in reply
    assert "`/upgrade plan load <link of the uploaded file>`" in reply
    (draft,) = list(bot.stub.uploads.values())[uploads:]
    doc = yaml.safe_load(draft)
    assert doc["channels"] == {"operations": "C0OPS"}
    # `others` (1.22) is brought within the skew of a 1.25 control plane first, then all five.
    assert [s["id"] for s in doc["steps"] if s["id"].startswith("drain-")] == [
        "drain-others-to-1-24",
        "drain-control-plane",
        "drain-istio",
        "drain-ng-shared",
        "drain-others",
        "drain-logging",
    ]
    bot.stub.files["F0DRAFT"] = draft.decode()
    loaded = bot.command(f"plan load <{bot.stub.file_url('F0DRAFT')}>", user=PRIMARY)
    assert "Plan `prod-1-25` loaded" in loaded

    refused = bot.command("plan draft", user=PRIMARY)
    assert "`plan draft` needs the target version: `--to 1.25`" in refused
    assert "Traceback" not in refused
