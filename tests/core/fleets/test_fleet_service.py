"""Fleet runs in the store, driven by the service over real child runs (the bot assembled without
Slack, SQLite in a temp dir, time an input): the acceptance's decisions, audited."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.core.fleets import machine as M
from bot.core.runs import machine as R
from bot.core.runs.paused import ending
from bot.core.runs.plans import parse_plan
from bot.core.runs.service import Actor
from bot.errors import RunNotFound, TransitionRefused, UserError
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.rehearse import window_opening_now
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.clock import FakeClock
from tests.support.fleets import T0, complete, fail, fail_step, fleet_config

PRIMARY, SHADOW = Actor(user_id="U0PRIMARY", source="terminal"), Actor(user_id="U0SHADOW", source="terminal")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def bot(
    write_config: Callable[..., Path], tmp_path: Path, clock: FakeClock, sim_small: SimCluster
) -> Iterator[Services]:
    # The canary's soak watches the sim's Alertmanager facade (the real adapter over HTTP).
    path = write_config(fleet_config(tmp_path, sim=sim_small))
    services = assemble(load_settings(path, env={}), with_slack=False, clock=clock)
    yield services
    services.close()


def _members(bot: Services, fleet_id: str) -> dict[str, M.Member]:
    return {m.cluster: m for m in bot.fleets.load(fleet_id).members}


def _kinds(bot: Services, fleet_id: str) -> list[str]:
    return [e.subcommand for e in bot.store.audit_entries(run_id=fleet_id) if e.kind == "fleet"]


def _through_the_canary(bot: Services, clock: FakeClock) -> str:
    fleet = bot.fleets.start("twelve", PRIMARY)
    complete(bot.runs, _members(bot, fleet.id)["ci"].run_id)
    bot.fleets.tick()
    clock.advance(timedelta(hours=1, minutes=1))
    bot.fleets.tick()
    bot.fleets.approve(fleet.id, SHADOW)
    bot.fleets.approve(fleet.id, PRIMARY)
    return fleet.id


def test_a_failed_canary_stops_the_fleet_until_it_is_skipped_with_a_reason(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    members = _members(bot, fleet.id)
    assert members["ci"].state == M.STARTED
    assert bot.store.run_rows(members["ci"].run_id) is not None
    assert {m.state for c, m in members.items() if c != "ci"} == {M.PENDING}

    fail(bot.runs, members["ci"].run_id)
    clock.advance(timedelta(minutes=5))
    bot.fleets.tick()
    fleet = bot.fleets.load(fleet.id)
    assert fleet.state == M.PAUSED
    assert fleet.reason.startswith("the canary failed: ci (run ")
    # Hours later, nothing of stage 2 has started: no child run exists for it.
    clock.advance(timedelta(hours=6))
    bot.fleets.tick()
    assert all(not m.run_id for c, m in _members(bot, fleet.id).items() if c != "ci")
    assert len(bot.store.runs()) == 1

    with pytest.raises(TransitionRefused, match="Skip them"):
        bot.fleets.resume(fleet.id, PRIMARY)
    bot.fleets.skip(fleet.id, "ci", PRIMARY, "the PDB is fixed in the plan for the others")
    bot.fleets.resume(fleet.id, PRIMARY)
    # The canary's stage ended with no cluster upgraded: its soak would judge nothing, so the fleet
    # pauses and says so; resumed, it goes on without the soak, to the after gate, then stage 2.
    bot.fleets.tick()
    paused = bot.fleets.load(fleet.id)
    assert (paused.state, paused.phase) == (M.PAUSED, M.SOAKING)
    assert paused.reason.startswith("no cluster of stage ")
    bot.fleets.resume(fleet.id, PRIMARY)
    bot.fleets.tick()
    assert bot.fleets.load(fleet.id).phase == M.AFTER
    bot.fleets.approve(fleet.id, SHADOW)
    bot.fleets.approve(fleet.id, PRIMARY)
    labs = {c: m for c, m in _members(bot, fleet.id).items() if c.startswith("lab-")}
    assert {m.state for m in labs.values()} == {M.STARTED}
    kinds = _kinds(bot, fleet.id)
    for kind in ("fleet_started", "cluster_started", "cluster_failed", "fleet_paused", "refused",
                 "cluster_skipped", "fleet_resumed", "soak_skipped", "gate_approved",
                 "stage_done", "stage_started"):  # fmt: skip
        assert kind in kinds, kind
    skipped = next(e for e in bot.store.audit_entries(run_id=fleet.id) if e.subcommand == "cluster_skipped")
    assert (skipped.user_id, skipped.detail) == ("U0PRIMARY", "the PDB is fixed in the plan for the others")


def test_a_budget_of_one_failure_carries_on_past_one_and_pauses_at_the_second(
    bot: Services, clock: FakeClock
) -> None:
    fleet_id = _through_the_canary(bot, clock)
    labs = [m for c, m in _members(bot, fleet_id).items() if c.startswith("lab-")]
    assert [m.state for m in labs] == [M.STARTED] * 4
    fail(bot.runs, labs[0].run_id)
    complete(bot.runs, labs[1].run_id)
    bot.fleets.tick()
    assert bot.fleets.load(fleet_id).state == M.ACTIVE
    fail(bot.runs, labs[2].run_id)
    bot.fleets.tick()
    fleet = bot.fleets.load(fleet_id)
    assert fleet.state == M.PAUSED
    assert "stage lab is over its failure budget" in fleet.reason
    assert "2 failed, 1 allowed" in fleet.reason
    # retry --failed: both again, on new child runs of the same pinned plan.
    bot.fleets.retry_failed(fleet_id, PRIMARY)
    again = _members(bot, fleet_id)
    assert again["lab-1"].run_id not in (labs[0].run_id, "")
    assert again["lab-1"].attempts == 2
    assert bot.store.run_rows(again["lab-1"].run_id)[0].plan_name == "tiny.lab-1"  # type: ignore[index]


def test_the_fleet_moves_a_stage_only_after_every_child_the_soak_and_the_after_gate(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    complete(bot.runs, _members(bot, fleet.id)["ci"].run_id)
    bot.fleets.tick()
    soaking = bot.fleets.load(fleet.id)
    assert (soaking.phase, soaking.soak_started_at) == (M.SOAKING, T0)
    clock.advance(timedelta(minutes=59))
    bot.fleets.tick()
    assert bot.fleets.load(fleet.id).phase == M.SOAKING
    clock.advance(timedelta(minutes=2))
    bot.fleets.tick()
    assert bot.fleets.load(fleet.id).waiting_for(clock()) == ("after", ["the primary", "the shadow"])
    # Four eyes: the primary started the fleet, so the primary alone cannot let it on.
    bot.fleets.approve(fleet.id, PRIMARY)
    assert bot.fleets.load(fleet.id).stage == 0
    with pytest.raises(TransitionRefused, match="already approved"):
        bot.fleets.approve(fleet.id, PRIMARY)
    bot.fleets.approve(fleet.id, SHADOW)
    assert bot.fleets.load(fleet.id).stage == 1


def test_a_restarted_bot_keeps_the_soak_the_votes_and_starts_no_child_twice(
    write_config: Callable[..., Path], tmp_path: Path, clock: FakeClock, sim_small: SimCluster
) -> None:
    path = write_config(fleet_config(tmp_path, sim=sim_small))
    first = assemble(load_settings(path, env={}), with_slack=False, clock=clock)
    fleet = first.fleets.start("twelve", PRIMARY)
    complete(first.runs, _members(first, fleet.id)["ci"].run_id)
    first.fleets.tick()
    clock.advance(timedelta(minutes=61))
    first.fleets.tick()
    first.fleets.approve(fleet.id, SHADOW)
    first.close()

    second = assemble(load_settings(path, env={}), with_slack=False, clock=clock)
    try:
        again = second.fleets.load(fleet.id)
        assert again.soak_started_at == T0
        assert [v.user_id for v in again.approvals] == ["U0SHADOW"]
        second.fleets.tick()
        second.fleets.tick()
        assert len(second.store.runs()) == 1
        second.fleets.approve(fleet.id, PRIMARY)
        second.fleets.tick()
        assert len(second.store.runs()) == 5  # the canary and four labs, each once
    finally:
        second.close()


def test_a_child_committed_but_not_created_is_created_once_at_the_next_drive(bot: Services) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    # What a crash between the commit and the run's creation leaves: a member committed as
    # started with its run id, and no run of that id.
    row, members, _ = bot.store.fleet_rows(fleet.id)  # type: ignore[misc]
    lab = next(m for m in members if m.cluster == "lab-1")
    assert bot.store.commit_fleet(
        dataclasses.replace(row, version=row.version + 1),
        expected_version=row.version,
        members=[dataclasses.replace(lab, state=M.STARTED, run_id="RCRASH", attempts=1)],
    )
    assert bot.store.run_rows("RCRASH") is None
    bot.fleets.drive(fleet.id)
    bot.fleets.drive(fleet.id)
    assert bot.store.run_rows("RCRASH") is not None
    assert [r.id for r in bot.store.runs() if r.cluster == "lab-1"] == ["RCRASH"]


def test_an_alert_firing_during_the_canarys_soak_pauses_the_fleet(
    bot: Services, clock: FakeClock, sim_small: SimCluster
) -> None:
    assert sim_small.sim is not None
    # Firing before the soak began: the baseline, not a failure.
    sim_small.sim.evidence.fire({"alertname": "Watchdog"}, (T0 - timedelta(hours=1)).timestamp())
    fleet = bot.fleets.start("twelve", PRIMARY)
    complete(bot.runs, _members(bot, fleet.id)["ci"].run_id)
    bot.fleets.tick()
    clock.advance(timedelta(minutes=20))
    bot.fleets.tick()
    assert bot.fleets.load(fleet.id).state == M.ACTIVE
    sim_small.sim.evidence.fire(
        {"alertname": "KubeNodeNotReady", "severity": "warning"}, (T0 + timedelta(minutes=25)).timestamp()
    )
    clock.advance(timedelta(minutes=10))
    bot.fleets.tick()
    paused = bot.fleets.load(fleet.id)
    assert paused.state == M.PAUSED
    assert (
        paused.reason
        == "the soak of stage canary failed: alerts on ci: new alert KubeNodeNotReady started firing"
    )
    assert paused.soak_started_at is None
    # Nothing of stage 2 started; after the alert resolves, resume soaks again from zero.
    assert len(bot.store.runs()) == 1
    sim_small.sim.evidence.resolve({"alertname": "KubeNodeNotReady", "severity": "warning"})
    bot.fleets.resume(fleet.id, PRIMARY)
    assert bot.fleets.load(fleet.id).soak_started_at == clock()


def test_a_canary_paused_on_its_failed_drain_step_pauses_the_fleet_naming_the_step(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    run_id = _members(bot, fleet.id)["ci"].run_id
    fail_step(bot.runs, run_id)
    assert bot.runs.load(run_id).state == "paused"
    bot.fleets.tick()
    paused = bot.fleets.load(fleet.id)
    assert paused.state == M.PAUSED
    assert paused.reason == (
        f"the canary failed: ci (drain failed in run {run_id}: reported failed by U0SHADOW: the PDB blocks eviction); "
        "1 failed, 0 allowed"
    )
    assert "the canary failed: ci (drain failed" in bot.fleets.status(fleet.id)


def test_the_canarys_waivers_are_carried_to_the_later_clusters_in_one_go_audited(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    until = T0 + timedelta(days=7)
    common = {"requested_by": "U0PRIMARY", "requested_at": T0, "expires_at": until}
    bot.store.add_waiver(cluster="ci", finding="API001", objects=("ns/old-ingress",), reason="migrating next sprint",
                         required=False, state="active", **common)  # fmt: skip
    required = bot.store.add_waiver(cluster="ci", finding="SKEW001", objects=(), reason="kubelets follow",
                                    required=True, state="pending", **common)  # fmt: skip
    bot.store.set_waiver_state(required.id, expected="pending", state="active", by="U0SHADOW", at=T0)
    assert bot.fleets.view(fleet.id).offer == "carry 2 waiver(s) from ci to the 11 later clusters"
    lines = bot.fleets.carry_waivers(fleet.id, SHADOW)
    assert len(lines) == 22
    lab = bot.store.waivers(cluster="lab-1")
    assert {(w.finding, w.state) for w in lab} == {("API001", "active"), ("SKEW001", "pending")}
    assert all(w.reason.startswith("carried from ci (waiver ") for w in lab)
    assert all(w.expires_at == until for w in lab)
    with pytest.raises(UserError, match="already has the canary's waivers"):
        bot.fleets.carry_waivers(fleet.id, SHADOW)
    carried = [e for e in bot.store.audit_entries(run_id=fleet.id) if e.subcommand == "waiver_carried"]
    assert len(carried) == 22
    assert {e.user_id for e in carried} == {"U0SHADOW"}


@pytest.mark.parametrize("skip_unreachable", [False, True])
def test_a_cluster_unreachable_at_its_turn_pauses_the_fleet_or_is_skipped_with_the_reason(
    write_config: Callable[..., Path],
    tmp_path: Path,
    clock: FakeClock,
    sim_small: SimCluster,
    skip_unreachable: bool,
) -> None:
    # lab-2's kubeconfig points at a port where nothing listens; the others at the sim.
    path = write_config(fleet_config(tmp_path, sim=sim_small, unreachable="lab-2"))
    fleets = tmp_path / "templates" / "fleets"
    text = (fleets / "twelve.yaml").read_text(encoding="utf-8")
    (fleets / "twelve.yaml").write_text(f"skip_unreachable: {str(skip_unreachable).lower()}\n{text}")
    bot = assemble(load_settings(path, env={}), with_slack=False, clock=clock)
    try:
        fleet_id = _through_the_canary(bot, clock)
        members = _members(bot, fleet_id)
        fleet = bot.fleets.load(fleet_id)
        # The reachable labs started (each asked first); lab-2 never got a child run.
        assert {c: members[c].state for c in ("lab-1", "lab-3", "lab-4")} == dict.fromkeys(
            ("lab-1", "lab-3", "lab-4"), M.STARTED
        )
        assert members["lab-2"].run_id == ""
        assert [r.cluster for r in bot.store.runs() if r.cluster == "lab-2"] == []
        entries = bot.store.audit_entries(run_id=fleet_id)
        if skip_unreachable:
            assert fleet.state == M.ACTIVE
            assert members["lab-2"].state == M.SKIPPED
            assert members["lab-2"].reason.startswith("unreachable at its turn: ")
            skipped = next(e for e in entries if e.subcommand == "cluster_skipped")
            assert skipped.arguments == "lab lab-2"
            assert skipped.detail.startswith("unreachable at its turn (skip_unreachable): ")
            return
        assert fleet.state == M.PAUSED
        assert fleet.reason.startswith("lab-2 is unreachable: ")
        assert members["lab-2"].state == M.PENDING
        assert "cluster_unreachable" in [e.subcommand for e in entries]
        # Still unreachable: resume asks again at its turn and the fleet pauses again.
        bot.fleets.resume(fleet_id, PRIMARY)
        assert bot.fleets.load(fleet_id).state == M.PAUSED
        # People leave it out with a reason; the stage carries on without it.
        bot.fleets.skip(fleet_id, "lab-2", PRIMARY, "lab-2 is being rebuilt")
        bot.fleets.resume(fleet_id, PRIMARY)
        assert bot.fleets.load(fleet_id).state == M.ACTIVE
        assert _members(bot, fleet_id)["lab-2"].state == M.SKIPPED
    finally:
        bot.close()


def test_a_canary_that_went_past_a_failed_step_is_shown_as_such_not_as_a_clean_success(
    bot: Services, clock: FakeClock
) -> None:
    # The canary's child completed only because its people skipped its failed step: the fleet's
    # member says so (amber on the card), and its soak still judges the cluster (it was upgraded).
    fleet = bot.fleets.start("twelve", PRIMARY)
    run_id = _members(bot, fleet.id)["ci"].run_id
    fail_step(bot.runs, run_id)
    bot.runs.apply(
        run_id,
        lambda r: R.skip(r, step_id="drain", by="U0PRIMARY", reason="drained by hand", now=clock()),
        PRIMARY,
    )
    bot.runs.apply(run_id, lambda r: R.resume(r, by="U0PRIMARY", now=clock()), PRIMARY)
    assert bot.runs.load(run_id).state is R.RunState.COMPLETED
    bot.fleets.tick()
    ci = _members(bot, fleet.id)["ci"]
    assert (ci.state, ci.reason) == (
        M.SUCCEEDED,
        f"completed with 1 failed step skipped in run {run_id}: drain",
    )
    # The run's own words, as its card and the run's completion say them: one source.
    assert ci.reason.startswith(ending(bot.runs.load(run_id)).honest + " in run ")
    status = bot.fleets.status(fleet.id)
    assert (
        f":large_yellow_circle: *ci* — succeeded · 1.29.4 → 1.30.2 · run `{run_id}` · completed with 1 failed "
        f"step skipped in run {run_id}: drain"
    ) in status
    assert bot.fleets.load(fleet.id).phase == M.SOAKING


def test_a_canary_whose_drain_left_a_node_cordoned_is_amber_and_says_so(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    run_id = _members(bot, fleet.id)["ci"].run_id
    sr = bot.runs.load(run_id).step_run("drain")
    bot.runs.click(R.ButtonRef(run_id=run_id, step_id="drain", epoch=sr.epoch), PRIMARY)
    sr = bot.runs.load(run_id).step_run("drain")
    bot.runs.apply(
        run_id,
        lambda r: R.action_finished(
            r,
            step_id="drain",
            epoch=sr.epoch,
            ok=True,
            detail="drained 2 node(s); skipped 1 (left cordoned): n3",
            now=clock(),
            left_behind="1 node(s) skipped, still cordoned: n3",
        ),
        PRIMARY,
    )
    assert bot.runs.load(run_id).state is R.RunState.COMPLETED
    bot.fleets.tick()
    ci = _members(bot, fleet.id)["ci"]
    assert (ci.state, ci.reason) == (
        M.SUCCEEDED,
        f"completed with 1 step not all done in run {run_id}: drain",
    )
    assert ci.reason.startswith(ending(bot.runs.load(run_id)).honest + " in run ")
    assert f":large_yellow_circle: *ci* — succeeded · 1.29.4 → 1.30.2 · run `{run_id}`" in bot.fleets.status(
        fleet.id
    )


def test_a_child_run_paused_on_people_is_said_on_its_row_not_just_running(
    bot: Services, clock: FakeClock
) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    run_id = _members(bot, fleet.id)["ci"].run_id
    bot.runs.apply(
        run_id, lambda r: R.pause(r, by="U0PRIMARY", reason="the PDB owner is on lunch", now=clock()), PRIMARY
    )
    bot.fleets.tick()
    status = bot.fleets.status(fleet.id)
    assert (
        f":large_blue_circle: *ci* — running · 1.29.4 → 1.30.2 · step `drain` · run `{run_id}` · :double_vertical_bar: "
        "its run is paused, waiting for people: the PDB owner is on lunch"
    ) in status


def test_status_without_an_id_names_the_last_fleets_when_none_is_live(bot: Services) -> None:
    with pytest.raises(RunNotFound, match=r"^no fleet run is live; `fleet start FLEET` starts one$"):
        bot.fleets.status(None)
    fleet = bot.fleets.start("twelve", PRIMARY)
    bot.fleets.abort(fleet.id, PRIMARY, "wrong window")
    with pytest.raises(RunNotFound) as none_live:
        bot.fleets.status(None)
    assert none_live.value.user_message == (
        f"no fleet run is live; the last: `{fleet.id}` (twelve, aborted 2026-12-01 05:00 UTC) (`fleet status ID`); "
        "`fleet start FLEET` starts one"
    )
    assert bot.fleets.status(fleet.id).startswith(f":no_entry: *Fleet twelve* `{fleet.id}` — aborted")


def test_a_fleets_children_run_in_their_plans_window_as_written(bot: Services) -> None:
    fleet = bot.fleets.start("twelve", PRIMARY)
    window = bot.runs.load(_members(bot, fleet.id)["ci"].run_id).plan.window
    assert (window.start, window.end) == (T0, T0 + timedelta(hours=3))


def test_a_rehearsals_children_get_their_runs_at_their_turn_each_window_opening_then(
    write_config: Callable[..., Path], tmp_path: Path, clock: FakeClock, sim_small: SimCluster
) -> None:
    # A rehearsal plays a stage's children one after another (`fleet_children_in_turn`): the fleet
    # starts them together, and each one's run is created at its turn (`start_child`), from the
    # plan the rehearsal makes of its pinned text then, its window opening as it is played. Made
    # with the stage, lab-2's window ran out while lab-1 was played.
    asked: list[tuple[str, str]] = []

    def opening(cluster: str) -> Callable[[str], str]:
        def plan(text: str) -> str:
            asked.append((cluster, f"{clock():%H:%M}"))
            assert f"cluster: {cluster}\n" in text
            return window_opening_now(text, parse_plan(text), clock())[0]

        return plan

    path = write_config(fleet_config(tmp_path, sim=sim_small))
    bot = assemble(load_settings(path, env={}), with_slack=False, clock=clock, fleet_children_in_turn=True)
    try:
        fleet = bot.fleets.start("twelve", PRIMARY)
        ci = _members(bot, fleet.id)["ci"]
        assert ci.state == M.STARTED
        assert bot.store.run_rows(ci.run_id) is None
        assert bot.fleets.start_child(fleet.id, "ci", plan=opening("ci"))
        complete(bot.runs, ci.run_id)
        bot.fleets.tick()
        clock.advance(timedelta(hours=1, minutes=1))
        bot.fleets.tick()
        bot.fleets.approve(fleet.id, SHADOW)
        bot.fleets.approve(fleet.id, PRIMARY)
        labs = {c: m for c, m in _members(bot, fleet.id).items() if c.startswith("lab-")}
        assert {m.state for m in labs.values()} == {M.STARTED}
        assert all(bot.store.run_rows(m.run_id) is None for m in labs.values())

        assert bot.fleets.start_child(fleet.id, "lab-1", plan=opening("lab-1"))
        clock.advance(timedelta(hours=2, minutes=30))  # lab-1 played, past a window opened with the stage
        complete(bot.runs, labs["lab-1"].run_id)
        bot.fleets.tick()
        assert bot.store.run_rows(labs["lab-2"].run_id) is None  # the fleet's tick leaves it to its turn
        assert bot.fleets.start_child(fleet.id, "lab-2", plan=opening("lab-2"))
        assert bot.fleets.start_child(fleet.id, "lab-2", plan=opening("lab-2"))  # once: it has its run
        assert not bot.fleets.start_child(fleet.id, "dev-1")  # not started yet
        assert asked == [("ci", "05:00"), ("lab-1", "06:01"), ("lab-2", "08:31")]
        window = bot.runs.load(labs["lab-2"].run_id).plan.window
        assert (window.start, window.end) == (clock(), clock() + timedelta(hours=3))
        assert bot.store.run_rows(labs["lab-3"].run_id) is None
    finally:
        bot.close()


def test_a_fleets_plan_is_parsed_once_not_at_each_load(bot: Services) -> None:
    """Every card edit, vote and tick loads the fleet; its stored plan does not change."""
    fleet = bot.fleets.start("twelve", PRIMARY)
    assert bot.fleets.load(fleet.id).plan is bot.fleets.load(fleet.id).plan
