"""A run paused by hand with a gate open: the gate's message says so (who paused, why, how to
resume) with Resume instead of Approve and Reject; the resume posts the gate again at the end of
the thread, marks the old message superseded, and the approvals given before the pause do not
count. Through the real Slack door (signed requests, the real slack_sdk client against the stub),
and across a restart between the pause and the resume: nothing is posted or edited twice."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings, load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.bot_process import RunBot, team_bot
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub, block_kit_problems

PRIMARY, SHADOW, COORD = "U0PRIMARY", "U0SHADOW", "U0COORD"
STEP = "drain-by-hand"
WHY = "payments asked us to wait for their batch"

PLAN = f"""\
name: by-hand
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-29T00:00", end: "2026-12-10T00:00", timezone: UTC}}
channels: {{operations: C0OPS}}
roster:
  primary: [{PRIMARY}]
  shadow: [{SHADOW}]
  coordinator: [{COORD}]
steps:
  - id: {STEP}
    title: Drain the old nodes by hand
    gate: {{approve: [primary, shadow]}}
    done: {{any_of: [coordinator]}}
  - id: after
    title: Check the dashboards
    gate: {{any_of: [primary, shadow]}}
    done: {{any_of: [primary, shadow]}}
"""


@pytest.fixture
def settings(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_small: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Settings:
    kubeconfig = sim_kubeconfig(sim_small)
    team = kubeconfig.parent / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "by-hand.yaml").write_text(PLAN)
    config = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    return load_settings(config, slack_env(slack_stub.api_url))


@pytest.fixture
def bot(settings: Settings, slack_stub: SlackStub) -> Iterator[Bot]:
    pool = TrackedPool(4)
    with start_front(settings, slack_stub, workers=pool, threads=8) as front:
        yield Bot(front=front, pool=pool)


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def gate_posts(stub: SlackStub) -> list[dict[str, Any]]:
    """The gate messages of `STEP` posted in the run's thread (Slack's answers: with `ts`)."""
    return [
        c.response
        for c in stub.calls_to("chat.postMessage")
        if c.response.get("ok") and c.params.get("thread_ts") and f"|{STEP}|" in json.dumps(_blocks(c.params))
    ]


def edits_of(stub: SlackStub, ts: str) -> list[dict[str, Any]]:
    return [c.params for c in stub.calls_to("chat.update") if c.params["ts"] == ts and c.response.get("ok")]


def buttons(params: dict[str, Any]) -> dict[str, str]:
    """A message's buttons: action id → value."""
    return {
        el["action_id"]: el["value"]
        for block in _blocks(params)
        if block.get("type") == "actions"
        for el in block["elements"]
    }


def thread_texts(stub: SlackStub) -> list[str]:
    return [
        str(c.params["text"])
        for c in stub.calls_to("chat.postMessage")
        if c.response.get("ok") and c.params.get("thread_ts")
    ]


def held_edit(stub: SlackStub, ts: str) -> dict[str, Any]:
    """The gate message's edit that holds it while the run is paused, once it is made."""
    found: dict[str, Any] = stub.wait_for(
        lambda: next((e for e in edits_of(stub, ts) if "on hold" in e["text"]), None), timeout=30
    )
    return found


def test_a_hand_pause_holds_the_gate_message_and_the_resume_posts_it_again(bot: Bot) -> None:
    assert "loaded" in bot.command("plan load by-hand")
    assert "started" in bot.command("start by-hand")
    (first,) = gate_posts(bot.stub)
    old_value = bot.gate(STEP)
    assert bot.click(PRIMARY, old_value) is None  # one of the two approvals
    run_id = old_value.split("|")[0]

    assert "paused" in bot.command(f"pause {run_id} --reason {WHY}", user=COORD)
    held = held_edit(bot.stub, first["ts"])
    text = held["text"]
    assert text.startswith(
        f":double_vertical_bar: *Drain the old nodes by hand* (`{STEP}`) — on hold: run {run_id} was paused "
        f"by <@{COORD}> at <!date^"
    )
    assert f": _{WHY}_" in text
    assert (
        f"To go on, resume it: *Resume* here or on the run's card (<@{PRIMARY}>, <@{SHADOW}>), or "
        f"`/upgrade resume {run_id}` (anyone in the run's roster). The gate is then posted again at the end "
        f"of the thread, to be approved afresh: the approvals given here before the pause (<@{PRIMARY}>) "
        "will not count."
    ) in text
    # No Approve or Reject while paused: only Resume, which is valid now.
    assert buttons(held) == {"paused_resume": old_value}
    assert block_kit_problems("chat.update", {"blocks": held["blocks"]}) == []
    refused = bot.click(SHADOW, old_value)
    assert refused is not None
    assert f"run {run_id} is paused; nothing can be approved until it is resumed" in refused

    # Resumed from the gate message's own button: the gate is posted again at the thread's end.
    assert bot.click(PRIMARY, old_value, "paused_resume") is None
    fresh_post = bot.stub.wait_for(lambda: gate_posts(bot.stub)[1:], timeout=30)[0]
    thread = thread_texts(bot.stub)
    assert thread[-2].startswith(f":arrow_forward: Run resumed by <@{PRIMARY}>")
    assert thread[-1].startswith(":large_yellow_circle: *Drain the old nodes by hand*")
    assert (
        ":arrow_forward: Posted again: the run was paused and resumed, and the approvals given before the "
        f"pause (<@{PRIMARY}>) do not count — give them again here." in thread[-1]
    )
    new_value = bot.gate(STEP)
    assert new_value != old_value
    fresh = next(
        c.params for c in bot.stub.calls_to("chat.postMessage") if c.response.get("ts") == fresh_post["ts"]
    )
    assert set(buttons(fresh)) == {"gate_approve", "gate_reject"}
    # The old message is superseded, without buttons: two live Approve buttons never exist for one gate.
    superseded = bot.stub.wait_for(
        lambda: next((e for e in edits_of(bot.stub, first["ts"]) if "superseded" in e["text"]), None),
        timeout=30,
    )
    assert superseded["text"] == (
        f":arrow_heading_down: *Drain the old nodes by hand* (`{STEP}`) — superseded: the run was paused and "
        "resumed, and this gate was posted again below; approve it there. The approvals given here "
        f"(<@{PRIMARY}>) no longer count."
    )
    assert buttons(superseded) == {}
    assert block_kit_problems("chat.update", {"blocks": superseded["blocks"]}) == []
    stale = bot.click(SHADOW, old_value)
    assert stale is not None
    assert (
        f"this button is from an earlier state of step `{STEP}`; it is now awaiting approval — use the "
        "buttons on its latest message"
    ) in stale

    # The fresh gate works: both approvals are needed again, then the step runs (its done gate).
    assert bot.click(SHADOW, new_value) is None
    assert bot.services.runs.load(run_id).step_run(STEP).state == "awaiting_approval"
    assert bot.click(PRIMARY, new_value) is None
    assert bot.services.runs.load(run_id).step_run(STEP).state == "running"


def test_a_done_gate_held_by_a_pause_is_posted_again_for_its_confirmation(bot: Bot) -> None:
    assert "loaded" in bot.command("plan load by-hand")
    assert "started" in bot.command("start by-hand")
    start = bot.gate(STEP)
    assert bot.click(PRIMARY, start) is None
    assert bot.click(SHADOW, start) is None
    done = bot.gate(STEP)  # people are draining by hand; the coordinator confirms it done
    run_id = done.split("|")[0]
    (message,) = [
        c.response
        for c in bot.stub.calls_to("chat.postMessage")
        if c.params.get("thread_ts") and done in json.dumps(_blocks(c.params))
    ]
    assert "paused" in bot.command(f"pause {run_id} --reason {WHY}", user=PRIMARY)
    held = held_edit(bot.stub, message["ts"])
    # Resume follows the step's gate (the primary and the shadow), not its done gate's coordinator.
    assert (
        f"Nothing can be confirmed done while the run is paused. To go on, resume it: *Resume* here or on "
        f"the run's card (<@{PRIMARY}>, <@{SHADOW}>)"
    ) in held["text"]
    assert "will not count" not in held["text"]  # no confirmation was given
    assert buttons(held) == {"paused_resume": done}
    refused = bot.click(COORD, done, "paused_resume")
    assert refused is not None
    assert (
        f"resuming `{STEP}` is for the primary or the shadow, who hold its gate; you are the coordinator"
        in refused
    )

    assert "active" in bot.command(f"resume {run_id}", user=COORD)
    again = bot.stub.wait_for(
        lambda: [p for p in gate_posts(bot.stub) if p["ts"] != message["ts"]][1:], timeout=30
    )
    assert thread_texts(bot.stub)[-1] == (
        f":arrows_counterclockwise: *Drain the old nodes by hand* (`{STEP}`) — started; confirm when it is done\n"
        f"Needs the coordinator: <@{COORD}> · still waiting for the coordinator\n"
        ":arrow_forward: Posted again: the run was paused and resumed; confirm it here, not on the message above."
    )
    assert again[-1]["message"]["text"] == thread_texts(bot.stub)[-1]
    superseded = bot.stub.wait_for(
        lambda: next((e for e in edits_of(bot.stub, message["ts"]) if "superseded" in e["text"]), None),
        timeout=30,
    )
    assert "this gate was posted again below; confirm it there." in superseded["text"]
    assert bot.click(COORD, done) is not None  # the old Confirm done is stale
    assert bot.click(COORD, bot.gate(STEP)) is None
    assert bot.services.runs.load(run_id).step_run(STEP).state == "succeeded"


def test_a_role_handed_off_during_the_pause_is_named_on_the_held_gate(bot: Bot) -> None:
    """The held message was edited once, at the pause: a handoff meanwhile left it naming the old
    primary as one who may resume (who may not any more), and not the new one."""
    nia = "U0NIA"
    bot.stub.users[nia] = {"id": nia}
    assert "loaded" in bot.command("plan load by-hand")
    assert "started" in bot.command("start by-hand")
    (first,) = gate_posts(bot.stub)
    value = bot.gate(STEP)
    run_id = value.split("|")[0]
    assert bot.click(SHADOW, value) is None
    assert "paused" in bot.command(f"pause {run_id} --reason {WHY}", user=COORD)
    held = held_edit(bot.stub, first["ts"])
    assert f"on the run's card (<@{PRIMARY}>, <@{SHADOW}>)" in held["text"]

    assert "is now" in bot.command(f"handoff primary <@{nia}> --run {run_id}", user=PRIMARY)
    again = bot.stub.wait_for(
        lambda: next((e for e in edits_of(bot.stub, first["ts"]) if f"<@{nia}>" in e["text"]), None),
        timeout=30,
    )
    # Still held (the same pause, the same Resume), now naming who holds the role.
    assert again["text"].startswith(
        f":double_vertical_bar: *Drain the old nodes by hand* (`{STEP}`) — on hold: run {run_id} was paused "
        f"by <@{COORD}> at <!date^"
    )
    assert f"on the run's card (<@{nia}>, <@{SHADOW}>), or `/upgrade resume {run_id}`" in again["text"]
    assert f"<@{PRIMARY}>" not in again["text"]
    assert f"the approvals given here before the pause (<@{SHADOW}>) will not count" in again["text"]
    assert buttons(again) == {"paused_resume": value}
    assert block_kit_problems("chat.update", {"blocks": again["blocks"]}) == []
    # The new primary resumes from it; the old one may not.
    refused = bot.click(PRIMARY, value, "paused_resume")
    assert refused is not None
    assert bot.click(nia, value, "paused_resume") is None
    assert bot.services.runs.load(run_id).state == "active"


@pytest.fixture
def process(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_small: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim_small)}, context: sim}}"
    with team_bot(
        write_config, slack_stub, bot_env, tmp_path, plans={"by-hand": PLAN}, cluster=cluster
    ) as bot:
        yield bot


def test_a_restart_between_the_pause_and_the_resume_posts_and_edits_nothing_twice(process: RunBot) -> None:
    stub = process.stub
    assert "loaded" in process.command("plan load by-hand")
    assert "started" in process.command("start by-hand")
    value = process.gate(STEP)
    (first,) = gate_posts(stub)
    run_id = value.split("|")[0]
    # Slack fails the hold's edit, and the bot is killed before it makes it again.
    stub.fail_next("chat.update", error="fatal_error", when=lambda p: "on hold" in str(p.get("text")))
    assert "paused" in process.command(f"pause {run_id} --reason {WHY}", user=COORD)
    process.kill9()
    assert not [e for e in edits_of(stub, first["ts"]) if "on hold" in e["text"]]

    process.start()  # its start-up recovery brings the run's card and gate up to date
    held_edit(stub, first["ts"])
    # Slack fails the gate's post after the resume, and the bot is killed before it posts it again.
    stub.fail_next(
        "chat.postMessage", error="fatal_error", when=lambda p: "Posted again" in str(p.get("text"))
    )
    assert "active" in process.command(f"resume {run_id} --reason the batch is done", user=SHADOW)
    process.kill9()
    assert len(gate_posts(stub)) == 1

    process.start()
    stub.wait_for(lambda: gate_posts(stub)[1:], timeout=30)
    process.stop()
    process.start()  # once more: everything is in Slack already
    # One gate message before the pause, one after the resume; the hold and the superseding are
    # one edit each.
    assert len(gate_posts(stub)) == 2
    assert len([e for e in edits_of(stub, first["ts"]) if "on hold" in e["text"]]) == 1
    assert len([e for e in edits_of(stub, first["ts"]) if "superseded" in e["text"]]) == 1
    # The gate posted again is the one that works.
    fresh = process.gate(STEP)
    assert fresh != value
    process.click(PRIMARY, fresh)
    process.click(SHADOW, fresh)
    assert process.run().step_run(STEP).state == "running"
