"""kill -9 of `upgrade-bot run --http` at each fleet transition: between a child's end and the
stage's move, during the soak, during the after gate. The fleet resumes from its database:
children started exactly once, the soak not restarted from zero, the gate's votes kept.

The bot drives fleets on its fleet ticker (every 20 s) and at every verb; the test plays the
people: slash commands to the bot, and the child runs' roster through the run service on the
same database (as a second replica would)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.fleets import machine as M
from bot.core.people import StaticDirectory
from bot.core.runs.service import RunService
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.bot_process import BotProcess
from tests.support.fleets import complete, fleet_config
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

#: One tick of the fleet ticker, and the bot's start, with room on a busy machine.
TICK = 60.0

QUICK = """\
name: quick
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
plan: tiny
stages:
  - name: canary
    clusters: [ci]
    soak: 15s
    evidence: [alerts]
    after: {approve: [primary, shadow]}
  - name: lab
    selector: {env: lab}
    max_concurrency: 4
"""


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    tmp_path: Path,
    sim_small: SimCluster,
    slack_stub: SlackStub,
    bot_env: dict[str, str],
) -> Iterator[BotProcess]:
    extra = fleet_config(tmp_path, sim=sim_small)
    (tmp_path / "templates" / "fleets" / "quick.yaml").write_text(QUICK, encoding="utf-8")
    config = write_config(extra + "channels: {operations: C0OPS}\n")
    for user in ("U0PRIMARY", "U0SHADOW"):
        slack_stub.users[user] = {"id": user}
    process = BotProcess(config=config, env=bot_env, stub=slack_stub)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _store(bot: BotProcess) -> Store:
    return Store.open(load_settings(bot.config, {}).database_url)


def _fleet(store: Store) -> M.Fleet:
    from bot.core.fleets.service import FleetService

    rows = store.fleets()
    assert len(rows) == 1
    service = FleetService(
        store=store, runs=None, clusters={}, directory=StaticDirectory(), clock=lambda: datetime.now(UTC),  # type: ignore[arg-type]
        fleet_dirs=(), plan_dirs=(),
    )  # fmt: skip
    return service.load(rows[0].id)


@pytest.mark.slow
def test_kill_9_at_every_fleet_transition_loses_nothing_and_repeats_nothing(bot: BotProcess) -> None:
    store = _store(bot)
    runs = RunService(store=store, directory=StaticDirectory(), clock=lambda: datetime.now(UTC))
    bot.send_command("fleet start quick", "U0PRIMARY")
    ci = wait_until(
        # The member is committed first, its run created just after: wait for both.
        lambda: next(
            (m for m in _fleet(store).members if m.cluster == "ci" and m.run_id and store.run_rows(m.run_id)), None
        )
        if store.fleets() else None,
        timeout=TICK, what="the canary's child run",
    )  # fmt: skip
    assert store.run_rows(ci.run_id) is not None

    # 1. Between a child's end and the stage's move: the canary ends, the bot dies before its tick.
    complete(runs, ci.run_id)
    bot.kill9()
    assert _fleet(store).phase == M.RUNNING
    bot.start()
    soaking = wait_until(
        lambda: (f := _fleet(store)).phase == M.SOAKING and f, timeout=TICK, what="the soak to start"
    )
    started = soaking.soak_started_at
    assert started is not None

    # 2. During the soak: killed and restarted, the soak goes on from where it was.
    bot.kill9()
    bot.start()
    after = wait_until(
        lambda: (f := _fleet(store)).phase == M.AFTER and f, timeout=2 * TICK, what="the soak to pass"
    )
    assert after.soak_started_at == started
    assert after.state == M.ACTIVE

    # 3. During the after gate: one approval, a kill; the vote is kept, not asked again.
    bot.send_command("fleet approve", "U0SHADOW")
    wait_until(lambda: _fleet(store).approvals, timeout=TICK, what="the shadow's approval")
    bot.kill9()
    bot.start()
    assert [v.user_id for v in _fleet(store).approvals] == ["U0SHADOW"]
    bot.send_command("fleet approve", "U0PRIMARY")
    wait_until(
        lambda: sum(1 for m in _fleet(store).members if m.state == M.STARTED) == 4 and len(store.runs()) == 5,
        timeout=TICK, what="the lab's four children and their runs",
    )  # fmt: skip
    # Every child started exactly once: one run per cluster, the canary's and the four labs'.
    clusters = sorted(r.cluster for r in store.runs())
    assert clusters == ["ci", "lab-1", "lab-2", "lab-3", "lab-4"]
    kinds = [e.subcommand for e in store.audit_entries(run_id=_fleet(store).id) if e.kind == "fleet"]
    assert kinds.count("cluster_started") == 5
    assert kinds.count("soak_started") == 1
    assert kinds.count("stage_done") == 1
