"""`/upgrade fleet …` through the router, as Slack and `exec` run it: short reasons for bad input,
the fleet's roster deciding who may act, the status as people read it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.clock import FakeClock
from tests.support.fleets import T0, complete, fail, fleet_config


@pytest.fixture
def bot(write_config: Callable[..., Path], tmp_path: Path, sim_small: SimCluster) -> Iterator[Services]:
    path = write_config(fleet_config(tmp_path, sim=sim_small))
    services = assemble(load_settings(path, env={}), with_slack=False, clock=FakeClock(T0))
    yield services
    services.close()


def _say(bot: Services, text: str, user: str = "U0PRIMARY") -> tuple[bool, str]:
    outcome = bot.router.handle(CommandRequest(text=text, user_id=user, channel_id="C0OPS", source="slack"))
    return outcome.ok, outcome.rendered.text


def test_start_and_status_show_every_cluster_by_stage(bot: Services) -> None:
    ok, text = _say(bot, "fleet start twelve")
    assert ok, text
    assert "Fleet `F" in text
    ok, status = _say(bot, "fleet status")
    assert ok
    assert "stage 1/3 `canary`, running" in status
    assert "*1. canary* (max 1 at once, budget 0, soak 1h)" in status
    assert "*2. lab* (max 4 at once, budget 1)" in status
    assert "*ci* — running · 1.29.4 → 1.30.2 · step `drain`" in status
    assert status.count("— pending") == 11


def test_the_canary_failing_is_said_and_skip_needs_a_reason(bot: Services) -> None:
    _say(bot, "fleet start twelve")
    fleet = bot.fleets.load(bot.fleets.resolve_id(None))
    fail(bot.runs, fleet.members[0].run_id)
    bot.fleets.tick()
    ok, status = _say(bot, "fleet status")
    assert ":warning: the canary failed: ci (run R" in status
    ok, text = _say(bot, "fleet skip ci")
    assert not ok
    assert "say why with `--reason …`" in text
    ok, text = _say(bot, "fleet resume")
    assert not ok
    assert "Skip them (`fleet skip CLUSTER --reason …`)" in text
    assert "Traceback" not in text
    ok, text = _say(bot, "fleet skip ci --reason flaky PDB, fixed for the rest")
    assert ok, text
    ok, text = _say(bot, "fleet resume")
    assert ok, text
    assert "is active" in text


def test_the_status_names_the_people_in_a_reason_as_mentions(bot: Services) -> None:
    """`fleet status` said "paused by U0PRIMARY", a raw id, where the fleet's card names the person."""
    _say(bot, "fleet start twelve")
    ok, text = _say(bot, "fleet pause --reason lunch <!channel>")
    assert ok, text
    ok, status = _say(bot, "fleet status")
    assert ok, status
    assert "paused by <@U0PRIMARY>: lunch &lt;!channel&gt;" in status
    assert "by U0PRIMARY" not in status


def test_the_status_says_when_the_soak_began_as_a_slack_date_not_escaped(bot: Services) -> None:
    """`fleet status` said "since 05:00 UTC", a bare time each reader's Slack showed as it was."""
    _say(bot, "fleet start twelve")
    fleet = bot.fleets.load(bot.fleets.resolve_id(None))
    complete(bot.runs, fleet.members[0].run_id)
    bot.fleets.tick()
    ok, status = _say(bot, "fleet status")
    assert ok, status
    since = f"(since <!date^{int(T0.timestamp())}^{{time}}|2026-12-01 05:00 UTC>)"
    assert f"Soak 0s of 1h {since}" in status
    # A verb's answer carries the status too, under its own words, the date still a date. A pause
    # stops the soak (nothing judges a paused fleet's evidence); the resume starts it again.
    ok, said = _say(bot, "fleet pause --reason lunch <!channel>")
    assert ok, said
    assert said.startswith("Fleet `F")
    assert "Soak 1h stopped (alerts); `fleet resume` starts it again" in said
    assert "paused by <@U0PRIMARY>: lunch &lt;!channel&gt;" in said
    ok, said = _say(bot, "fleet resume")
    assert ok, said
    assert f"Soak 0s of 1h {since}" in said


def test_someone_outside_the_fleets_roster_is_refused(bot: Services) -> None:
    _say(bot, "fleet start twelve")
    ok, text = _say(bot, "fleet pause --reason lunch", user="U0STRANGER")
    assert not ok
    assert "roster" in text
    ok, text = _say(bot, "fleet start nosuch")
    assert not ok
    assert "no fleet plan `nosuch` (known: example, twelve)" in text
