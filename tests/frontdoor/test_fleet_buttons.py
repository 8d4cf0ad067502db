"""The fleet card's buttons through the HTTP front door, really signed, against the Slack stub:
the `after` gate the fleet waits on is approved on the card by the people it names only (the
verb's refusals, ephemeral, audited), a button from a card drawn before the fleet moved is
answered as stale, Pause and Resume act as the verbs do, and the canary's waivers are carried
with one click."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.core.fleets import machine as M
from bot.core.runs.service import Actor
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.blockkit import buttons, message_blocks
from tests.support.clock import FakeClock
from tests.support.fleets import T0, complete, fleet_config
from tests.support.front import Front, start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import wait

#: A canary with a soak and a four-eyes `after` gate, then one lab.
PAIR = """\
name: pair
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
plan: tiny
stages:
  - name: canary
    clusters: [ci]
    soak: 1h
    evidence: [alerts]
    after: {approve: [primary, shadow]}
  - name: lab
    clusters: [lab-1]
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def front(
    write_config: Callable[..., Path],
    tmp_path: Path,
    sim_small: SimCluster,
    slack_stub: SlackStub,
    clock: FakeClock,
) -> Iterator[Front]:
    path = write_config(fleet_config(tmp_path, sim=sim_small) + "channels: {operations: C0OPS}\n")
    # Two small stages: each child run posts its card, its start and its gate in that channel.
    (tmp_path / "templates" / "fleets" / "pair.yaml").write_text(PAIR, encoding="utf-8")
    started = start_front(load_settings(path, slack_env(slack_stub.api_url)), slack_stub, clock=clock)
    yield started
    started.stop()


def _card(front: Front, fleet_id: str, needle: str = "", absent: str = "\0") -> dict[str, Any]:
    """The fleet card as Slack holds it now (edits applied), once it shows `needle` and not `absent`."""
    return dict(
        front.stub.wait_for(
            lambda: next(
                (
                    m
                    for m in front.stub.posted("C0OPS")
                    if m["text"].startswith(f"Fleet pair {fleet_id}")
                    and needle in str(m.get("blocks"))
                    and absent not in str(m.get("blocks"))
                ),
                None,
            ),
            timeout=20,
        )
    )


def _button(card: dict[str, Any], action: str) -> dict[str, Any]:
    return next(b for b in buttons(message_blocks(card)) if b["action_id"] == action)


def _answer(front: Front) -> str:
    """The ephemeral answer to the last click."""
    said = wait(
        lambda: [
            c.params
            for c in front.stub.calls_to("response_url")
            if c.path.endswith(f"click-{front.requests}")
        ],
        timeout=20,
    )
    assert said[0]["response_type"] == "ephemeral"
    assert "Traceback" not in str(said[0]["text"])
    return str(said[0]["text"])


def _refusals(front: Front, fleet_id: str) -> list[tuple[str, str]]:
    return [
        (e.user_id, e.detail)
        for e in front.services.store.audit_entries(run_id=fleet_id)
        if e.kind == "fleet" and e.outcome == "refused"
    ]


def test_the_after_gate_is_approved_on_the_card_by_its_people_only_and_an_old_button_is_stale(
    front: Front, clock: FakeClock
) -> None:
    fleets = front.services.fleets
    fleet = fleets.start("pair", Actor(user_id="U0PRIMARY"))
    card = _card(front, fleet.id, "fleet_pause")
    # Running the canary: no gate waits, so no Approve; Pause is offered.
    assert [b["action_id"] for b in buttons(message_blocks(card))] == ["fleet_pause"]

    ci = next(m for m in fleets.load(fleet.id).members if m.cluster == "ci")
    complete(front.services.runs, ci.run_id)
    fleets.tick()
    clock.advance(timedelta(hours=1, minutes=1))
    fleets.tick()
    card = _card(front, fleet.id, "fleet_approve")
    approve = _button(card, "fleet_approve")
    assert approve["text"]["text"] == "Approve the after gate of canary"
    assert approve["value"] == f"{fleet.id}|0|after"

    # Someone the gate does not name: refused with the verb's words, ephemeral, audited.
    front.click("U0STRANGER", approve["value"], action="fleet_approve")
    assert "roster" in _answer(front)
    assert fleets.load(fleet.id).approvals == ()
    # The primary approves; a second click by the primary is refused as a double approval.
    front.click("U0PRIMARY", approve["value"], action="fleet_approve")
    wait(lambda: fleets.load(fleet.id).approvals, timeout=20)
    front.click("U0PRIMARY", approve["value"], action="fleet_approve")
    assert "already approved" in _answer(front)
    assert fleets.load(fleet.id).stage == 0
    # The shadow's approval satisfies the gate: the fleet moves to its second stage.
    front.click("U0SHADOW", approve["value"], action="fleet_approve")
    wait(lambda: fleets.load(fleet.id).stage == 1, timeout=20)
    moved = _card(front, fleet.id, "lab* (max 1 at once, budget 0) ← now", absent="fleet_approve")
    assert [b["action_id"] for b in buttons(message_blocks(moved))] == ["fleet_pause"]

    # The old card's Approve, clicked now: stale, nothing changes.
    front.click("U0SHADOW", approve["value"], action="fleet_approve")
    assert "this button is from an earlier state of fleet" in _answer(front)
    after = fleets.load(fleet.id)
    assert (after.stage, len(after.approvals)) == (1, 2)

    refused = _refusals(front, fleet.id)
    assert [u for u, _ in refused] == ["U0STRANGER", "U0PRIMARY", "U0SHADOW"]
    assert "earlier state" in refused[-1][1]
    approved = [
        e.user_id
        for e in front.services.store.audit_entries(run_id=fleet.id)
        if e.subcommand == "gate_approved" and e.source == "slack"
    ]
    assert approved == ["U0PRIMARY", "U0SHADOW"]


def test_pause_and_resume_on_the_card_act_as_the_verbs_and_a_second_pause_is_stale(
    front: Front,
) -> None:
    fleets = front.services.fleets
    fleet = fleets.start("pair", Actor(user_id="U0PRIMARY"))
    pause = _button(_card(front, fleet.id, "fleet_pause"), "fleet_pause")
    assert pause["confirm"]["confirm"]["text"] == "Pause"

    # Not in the fleet's roster: refused, and the fleet goes on.
    front.click("U0STRANGER", pause["value"], action="fleet_pause")
    assert "roster" in _answer(front)
    assert fleets.load(fleet.id).state == M.ACTIVE

    front.click("U0SHADOW", pause["value"], action="fleet_pause")
    wait(lambda: fleets.load(fleet.id).state == M.PAUSED, timeout=20)
    resume = _button(_card(front, fleet.id, "fleet_resume"), "fleet_resume")
    assert fleets.load(fleet.id).reason == "paused by U0SHADOW: from the fleet card"

    # The Pause of the card drawn before: stale.
    front.click("U0SHADOW", pause["value"], action="fleet_pause")
    assert "earlier state" in _answer(front)

    front.click("U0PRIMARY", resume["value"], action="fleet_resume")
    wait(lambda: fleets.load(fleet.id).state == M.ACTIVE, timeout=20)
    kinds = [
        (e.subcommand, e.user_id, e.source)
        for e in front.services.store.audit_entries(run_id=fleet.id)
        if e.subcommand in ("fleet_paused", "fleet_resumed")
    ]
    assert kinds == [("fleet_paused", "U0SHADOW", "slack"), ("fleet_resumed", "U0PRIMARY", "slack")]


def test_a_forged_fleet_button_is_refused_without_a_traceback(front: Front) -> None:
    front.click("U0PRIMARY", "F000000|0|after; DROP", action="fleet_approve")
    assert "this button does not name a fleet run" in _answer(front)


def test_the_canarys_waivers_are_carried_with_one_click_by_the_roster_only(front: Front) -> None:
    store = front.services.store
    store.add_waiver(cluster="ci", finding="API001", objects=("ns/old-ingress",), reason="migrating next sprint",
                     required=False, state="active", requested_by="U0PRIMARY", requested_at=T0,
                     expires_at=T0 + timedelta(days=7))  # fmt: skip
    fleets = front.services.fleets
    fleet = fleets.start("pair", Actor(user_id="U0PRIMARY"))
    carry = _button(_card(front, fleet.id, "fleet_carry"), "fleet_carry")
    assert carry["text"]["text"] == "Carry the canary's waivers"

    front.click("U0STRANGER", carry["value"], action="fleet_carry")
    assert "roster" in _answer(front)
    assert store.waivers(cluster="lab-1") == []

    front.click("U0SHADOW", carry["value"], action="fleet_carry")
    assert _answer(front).startswith(":package: Carried 1 waiver(s):\n• API001 on lab-1 (waiver ")
    (carried,) = store.waivers(cluster="lab-1")
    assert (carried.finding, carried.state) == ("API001", "active")
    # Once every later cluster has them, the card offers them no more.
    _card(front, fleet.id, "fleet_pause", absent="fleet_carry")
    assert [e.user_id for e in store.audit_entries(run_id=fleet.id) if e.subcommand == "waiver_carried"] == [
        "U0SHADOW"
    ]
    assert ("U0STRANGER", "carry") in [(u, d.split(":")[0]) for u, d in _refusals(front, fleet.id)]
