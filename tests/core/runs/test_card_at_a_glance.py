"""The run card at a glance, through the real WebClient and the Slack stub (which validates every
payload with slack_sdk's Block Kit models): a 25-step plan whose step ids are as long as the plan
schema allows (63 characters) runs to its end, and EVERY card the bot posts or edits shows the
step now running or waiting, the progress line, and passes validation; gate buttons stay within
Slack's 75 characters and the danger button asks for confirmation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.delivery import Deliveries
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import RunCards
from bot.core.runs.service import Actor, RunService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub, block_kit_problems

T0 = datetime(2026, 11, 28, 21, 30, tzinfo=UTC)
STEPS = 25


def step_id(i: int) -> str:
    """Every third id is 63 characters, the longest the plan schema allows."""
    short = f"s{i:02d}-drain-node-group"
    return (short + "-" + "x" * 63)[:63] if i % 3 == 0 else short


PLAN = """\
name: long-ids
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
""" + "".join(
    f"""  - id: {step_id(i)}
    title: "Step {i}: cordon and drain the old nodes of node group {i} :construction: `ng-{i}`"
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
"""
    for i in range(STEPS)
)


@dataclass
class World:
    service: RunService
    clock: FakeClock
    stub: SlackStub


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with SlackStub() as stub:
        store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
        store.save_plan(name="long-ids", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
        clock = FakeClock(T0)
        gateway = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url))
        # No coalescing: every card the bot makes reaches the stub, to be checked one by one.
        deliveries = Deliveries(store=store, poster=gateway, clock=clock, owner="test")
        service = RunService(
            store=store,
            directory=StaticDirectory(),
            clock=clock,
            cards=RunCards(deliveries=deliveries, renderer=Renderer([BUILTIN_TEMPLATES]), clock=clock),
        )
        yield World(service, clock, stub)
        store.close()


def card_calls(stub: SlackStub) -> list[tuple[str, dict[str, Any]]]:
    """Every card payload (post or edit, not thread lines), in order."""
    out = []
    for call in stub.calls:
        if call.method not in ("chat.postMessage", "chat.update") or call.params.get("thread_ts"):
            continue
        blocks = call.params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        if blocks and "Upgrade run" in json.dumps(blocks):
            out.append((call.method, call.params))
    return out


def block_text(params: dict[str, Any]) -> str:
    blocks = params["blocks"]
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    return "\n".join(
        str(b["text"]["text"]) if b["type"] == "section" else json.dumps(b, ensure_ascii=False)
        for b in blocks
    )


def assert_template_output_is_valid(svc: RunService, run_id: str) -> None:
    """The card as the template renders it, before the gateway fits anything: already valid."""
    assert svc.cards is not None
    rendered = svc.cards.renderer.render("runs/card", svc.card_context(svc.load(run_id)))
    assert rendered.blocks is not None
    assert block_kit_problems("chat.update", {"text": rendered.text, "blocks": rendered.blocks}) == []


def test_every_card_of_a_25_step_run_with_63_character_ids_shows_the_step_now_and_is_valid(
    world: World,
) -> None:
    svc, clock = world.service, world.clock
    run = svc.start("long-ids", Actor(user_id="U0PRIMARY")).run
    for i in range(STEPS):
        assert_template_output_is_valid(svc, run.id)
        sid = step_id(i)
        sr = svc.load(run.id).step_run(sid)
        clock.advance(timedelta(minutes=4))
        if i == 7:
            # The shadow reports a failure at the start: the run pauses; it is resumed and the
            # step skipped, with the reason on the card.
            svc.click(
                R.ButtonRef(run_id=run.id, step_id=sid, epoch=sr.epoch, decision="reject"),
                Actor(user_id="U0PRIMARY"),
                reason="node group 7 is already on 1.30",
            )
            svc.apply(run.id, lambda r: R.resume(r, by="U0PRIMARY", now=clock()), Actor(user_id="U0PRIMARY"))
            svc.apply(
                run.id,
                lambda r, sid=sid: R.skip(
                    r, step_id=sid, by="U0PRIMARY", reason="already on 1.30", now=clock()
                ),
                Actor(user_id="U0PRIMARY"),
            )
            continue
        svc.click(R.ButtonRef(run_id=run.id, step_id=sid, epoch=sr.epoch), Actor(user_id="U0PRIMARY"))
        sr = svc.load(run.id).step_run(sid)
        clock.advance(timedelta(minutes=4))
        svc.click(R.ButtonRef(run_id=run.id, step_id=sid, epoch=sr.epoch), Actor(user_id="U0SHADOW"))
    assert_template_output_is_valid(svc, run.id)
    final = svc.load(run.id)
    assert final.state is R.RunState.COMPLETED

    cards = card_calls(world.stub)
    assert len(cards) > 2 * STEPS  # every transition edited the card
    assert world.stub.invalid == []
    seen_now: list[str] = []
    for n, (method, params) in enumerate(cards):
        assert block_kit_problems(method, params) == [], n
        text = block_text(params)
        # The progress line is at the top of every card, on its own line under the title.
        assert re.search(r"· \d+ done", text), text[:300]
        assert text.split("\n")[1].startswith("Run *"), text[:300]
        now = re.search(r"▶ `([a-z0-9-]+)`", text)
        if "Run *completed" in text:
            assert now is None
            continue
        assert now is not None, text[:400]
        # The step now is on the card in its full line too, not only in the progress line.
        assert text.count(f"`{now.group(1)}`") >= 2, text
        seen_now.append(now.group(1))
        blocks = params["blocks"]
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        for block in blocks:
            for element in block.get("elements", []):
                if element.get("type") == "button":
                    assert len(element["text"]["text"]) <= 75
                    if element["action_id"] == "gate_reject":
                        confirm = element["confirm"]
                        assert confirm["title"]["text"]
                        assert now.group(1) in confirm["text"]["text"]
                    if element["action_id"] == "gate_approve":
                        assert element["value"].split("|")[1] == now.group(1)
    # Every step was the step now on some card, in the plan's order (never one behind).
    order = [step_id(i) for i in range(STEPS)]
    assert sorted(set(seen_now), key=order.index) == order
    assert [order.index(s) for s in seen_now] == sorted(order.index(s) for s in seen_now)
    # The final card: the run's last step, the progress line, the skipped step with its reason —
    # and, as the step had failed (rejected) before it was skipped, no "25 done" as if all went well.
    last = block_text(cards[-1][1])
    assert "Run *completed with 1 failed step skipped* · 24 done · 1 failed and skipped" in last
    assert f"`{step_id(STEPS - 1)}`" in last
    assert f":fast_forward: `{step_id(7)}`" in last
    assert "already on 1.30" in last
    # Approvals stay in the thread: no mentions or date tokens on the step list.
    assert "<@U0SHADOW>" not in last.split("Roster:")[0]
    assert "<!date^" not in last.split("\n", 2)[2]


def test_a_card_with_a_long_history_drops_whole_old_lines_and_keeps_the_step_now(world: World) -> None:
    svc, clock = world.service, world.clock
    run = svc.start("long-ids", Actor(user_id="U0PRIMARY")).run
    why = "node group already replaced by the platform team's pipeline; see CHG-4411 " * 3
    for i in range(20):
        clock.advance(timedelta(minutes=1))
        svc.apply(
            run.id,
            lambda r, i=i: R.skip(r, step_id=step_id(i), by="U0PRIMARY", reason=f"{i}: {why}", now=clock()),
            Actor(user_id="U0PRIMARY"),
        )
    assert_template_output_is_valid(svc, run.id)
    method, params = card_calls(world.stub)[-1]
    assert block_kit_problems(method, params) == []
    steps = block_text(params).split("\n:clipboard:")[0]
    text = block_text(params)
    # Twenty skipped steps with their reasons do not fit one section: the oldest lines go, counted.
    counted = re.search(r"^…and (\d+) more$", text, re.MULTILINE)
    assert counted is not None, text
    shown = [n for n in range(20) if f"`{step_id(n)}`" in text]
    assert int(counted.group(1)) == 20 - len(shown)
    assert shown == list(range(20 - len(shown), 20))  # the latest history stays
    assert f":large_yellow_circle: `{step_id(20)}`" in text
    assert f"▶ `{step_id(20)}`" in steps
    assert "Run *active* · 20 done (20 skipped)" in text
