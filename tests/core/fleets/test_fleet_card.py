"""The fleet card: valid Block Kit within Slack's limits at 12 and at 50 clusters, failing rows
never collapsed, and, through the Slack stub, one card edited in place with milestones in its
thread, each posted once."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.core.fleets import machine as M
from bot.core.fleets.card import card
from bot.core.fleets.render import status_text
from bot.core.runs.service import Actor
from bot.frontdoor.assemble import Services, assemble
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.blockkit import buttons, message_blocks, text_of
from tests.support.clock import FakeClock
from tests.support.fleets import T0, big_fleet_view, fail, fail_step, fleet_config
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("n", [12, 50])
def test_the_card_fits_slack_and_keeps_every_failing_and_stalled_row(n: int) -> None:
    view = big_fleet_view(n, failed=4, stalled=2)
    text, blocks = card(view, T0)
    message_blocks({"blocks": blocks, "text": text})
    shown = text_of(blocks)
    for m in view.fleet.members:
        if m.state in (M.FAILED, M.STARTED):
            assert f"*{m.cluster}* — {m.state}" in shown, m.cluster
    assert ":warning: stage prod is over its failure budget" in shown
    assert "stalled" in shown
    if n == 50:
        # Healthy rows collapse first: one line per state names them.
        assert "succeeded: " in shown
        assert "pending: " in shown
    else:
        assert all(f"*{m.cluster}*" in shown for m in view.fleet.members)


def test_the_docs_show_the_card_at_12_and_50_clusters_as_the_code_builds_it() -> None:
    page = (REPO / "docs" / "fleet-card.md").read_text(encoding="utf-8")
    for n in (12, 50):
        view = big_fleet_view(n, failed=4, stalled=2)
        text, blocks = card(view, T0)
        pasted = json.dumps({"text": text, "blocks": blocks}, indent=2, ensure_ascii=False)
        assert pasted in page, (
            f"docs/fleet-card.md is stale for {n} clusters: run `PYTHONPATH=. .venv/bin/python -m tests.support.fleets`"
        )


@pytest.fixture
def slack_bot(
    write_config: Callable[..., Path], tmp_path: Path, sim_small: SimCluster, slack_stub: SlackStub
) -> Iterator[tuple[Services, FakeClock]]:
    extra = fleet_config(tmp_path, sim=sim_small)
    path = write_config(extra + "channels: {operations: C0OPS}\n")
    clock = FakeClock(T0)
    services = assemble(load_settings(path, env=slack_env(slack_stub.api_url)), clock=clock)
    yield services, clock
    services.close()


def _fleet_posts(stub: SlackStub) -> list[dict[str, Any]]:
    return [m for m in stub.posted("C0OPS") if "Fleet" in m.get("text", "") or m.get("thread_ts")]


def test_one_card_edited_in_place_and_each_milestone_once(
    slack_bot: tuple[Services, FakeClock], slack_stub: SlackStub
) -> None:
    bot, _clock = slack_bot
    fleet = bot.fleets.start("twelve", Actor(user_id="U0PRIMARY"))
    cards = slack_stub.wait_for(
        lambda: [m for m in slack_stub.posted("C0OPS") if m["text"].startswith("Fleet twelve")]
    )
    assert len(cards) == 1
    ts = cards[0]["ts"]
    ci = next(m for m in bot.fleets.load(fleet.id).members if m.cluster == "ci")
    fail(bot.runs, ci.run_id)
    bot.fleets.tick()
    bot.fleets.tick()  # nothing new: no second post of any milestone
    card_now = slack_stub.wait_for(
        lambda: next(
            (m for m in slack_stub.posted("C0OPS") if m["ts"] == ts and "canary failed" in m["text"]), None
        )
    )
    assert "the canary failed: ci" in text_of(message_blocks(card_now))
    thread = [m["text"] for m in slack_stub.posted("C0OPS") if m.get("thread_ts") == ts]
    assert thread.count(":rocket: Fleet started") == 1
    assert (
        sum(1 for t in thread if t.startswith(":double_vertical_bar: Fleet paused: the canary failed")) == 1
    )
    assert sum(1 for t in thread if t.startswith(":red_circle: *ci* failed")) == 1
    assert len([m for m in slack_stub.posted("C0OPS") if m["text"].startswith("Fleet twelve")]) == 1


def test_people_the_fleets_reasons_name_are_mentions_on_the_card_and_in_its_thread(
    slack_bot: tuple[Services, FakeClock], slack_stub: SlackStub
) -> None:
    """The fleet's reasons are the bot's words with people's ids in them ("reported failed by
    U0SHADOW", "aborted by U0COORD"): the card and its thread showed the raw ids."""
    bot, _clock = slack_bot
    fleet = bot.fleets.start("twelve", Actor(user_id="U0PRIMARY"))
    ci = next(m for m in bot.fleets.load(fleet.id).members if m.cluster == "ci")
    fail_step(bot.runs, ci.run_id)
    bot.fleets.tick()
    bot.fleets.abort(fleet.id, Actor(user_id="U0COORD"), reason="<!channel> the canary's PDB")
    card_now = slack_stub.wait_for(
        lambda: next(
            (
                m
                for m in slack_stub.posted("C0OPS")
                if m["text"].startswith("Fleet twelve") and "aborted by" in m["text"]
            ),
            None,
        )
    )
    shown = text_of(message_blocks(card_now))
    assert ":warning: aborted by <@U0COORD>: &lt;!channel&gt; the canary's PDB" in shown
    assert (
        f"drain failed in run {ci.run_id}: reported failed by <@U0SHADOW>: the PDB blocks eviction" in shown
    )
    assert card_now["text"].endswith("aborted — aborted by <@U0COORD>: &lt;!channel&gt; the canary's PDB")
    thread = [m["text"] for m in slack_stub.posted("C0OPS") if m.get("thread_ts") == card_now["ts"]]
    assert ":no_entry: Fleet aborted: aborted by <@U0COORD>: &lt;!channel&gt; the canary's PDB" in thread, (
        thread
    )
    assert any(
        t.startswith(":red_circle: *ci* failed: ") and "reported failed by <@U0SHADOW>" in t for t in thread
    )
    assert not [t for t in [shown, card_now["text"], *thread] if re.search(r"(?<![@^])U0(COORD|SHADOW)", t)]


def test_the_card_offers_the_buttons_of_what_people_can_do_now_each_valid_block_kit() -> None:
    view = big_fleet_view(12, failed=1)
    fleet = view.fleet
    soaked = dataclasses.replace(view, fleet=dataclasses.replace(fleet, stage=0, phase=M.AFTER))
    cases = [
        (view, ["fleet_pause"]),
        (soaked, ["fleet_approve", "fleet_pause"]),
        (dataclasses.replace(view, fleet=dataclasses.replace(fleet, state=M.PAUSED)), ["fleet_resume"]),
        (dataclasses.replace(view, fleet=dataclasses.replace(fleet, state=M.COMPLETED)), []),
    ]
    for v, expected in cases:
        text, blocks = card(v, T0)
        assert [b["action_id"] for b in buttons(message_blocks({"blocks": blocks, "text": text}))] == expected
    _, blocks = card(soaked, T0)
    (approve, pause) = buttons(blocks)
    assert approve["text"]["text"] == "Approve the after gate of canary"
    assert M.FleetButton.decode(approve["value"], "approve") == M.FleetButton(
        fleet_id=fleet.id, stage=0, mark="after", decision="approve"
    )
    # The same click, once the fleet moved on, is stale; on the card drawn now it is not.
    assert M.stale(soaked.fleet, M.FleetButton.decode(approve["value"], "approve"), T0, offer=False) == ""  # type: ignore[arg-type]
    assert "earlier state" in M.stale(
        fleet, M.FleetButton.decode(approve["value"], "approve"), T0, offer=False
    )  # type: ignore[arg-type]
    assert "earlier state" in M.stale(fleet, M.FleetButton.decode(pause["value"], "resume"), T0, offer=False)  # type: ignore[arg-type]
    # A forged value never reaches the fleet.
    for forged in ("F1|x|after", "F1|0|after|", "F1|0|approve", "F1|²|after", "x" * 3000):
        assert M.FleetButton.decode(forged, "approve") is None


def test_the_soak_says_since_when_as_a_slack_date_each_reader_sees_in_their_own_zone() -> None:
    # "since 05:00 UTC" read as a bare time in every reader's Slack, where the gate cards' times
    # are Slack dates: the card and `fleet status` now say it as the gate cards do.
    view = big_fleet_view(12, failed=0)
    soaking = dataclasses.replace(
        view.fleet, stage=0, phase=M.SOAKING, soak_started_at=T0, state=M.ACTIVE, reason=""
    )
    view = dataclasses.replace(view, fleet=soaking)
    token = f"(since <!date^{int(T0.timestamp())}^{{time}}|2026-12-01 05:00 UTC>)"
    text, blocks = card(view, T0 + timedelta(minutes=20))
    message_blocks({"blocks": blocks, "text": text})
    assert f":stopwatch: Soak 20m of 1h {token} · evidence: alerts, passing" in text_of(blocks)
    assert f"Soak 20m of 1h {token}" in status_text(view, T0 + timedelta(minutes=20))
