"""The fleet run's state machine on data: stages move only when every child ended, the soak
elapsed with its evidence passing and the after gate is approved; failures pause it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.fleets import machine as M
from bot.core.fleets import render
from bot.core.fleets.card import milestone
from bot.core.fleets.plan import parse_fleet, resolve
from bot.frontdoor.rehearse_fleet import exit_status as rehearse_exit
from bot.records import ClusterConfig

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ROSTER = "roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}\n"


def _clusters(n: int) -> dict[str, ClusterConfig]:
    out = {"canary": ClusterConfig(name="canary", in_cluster=True, labels={"env": "ci"})}
    for i in range(n):
        out[f"c{i:02d}"] = ClusterConfig(name=f"c{i:02d}", in_cluster=True, labels={"env": "lab"})
    return out


def _fleet(stages: str, n: int = 4) -> M.Fleet:
    plan = parse_fleet("name: f\nplan: p\n" + ROSTER + "stages:\n" + stages)
    return M.new_fleet("F1", plan, resolve(plan, _clusters(n)), by="U0PRIMARY", now=T0)


COUNTER = itertools.count(1)


def _advance(
    fleet: M.Fleet, children: dict[str, str] | None = None, *, at: datetime = T0, evidence: str = ""
) -> M.Outcome:
    status = {
        c: M.ChildStatus(state=s, detail="drain failed" if s == M.FAILED else "")
        for c, s in (children or {}).items()
    }
    return M.advance(fleet, status, now=at, evidence_failure=evidence, new_run_id=lambda: f"R{next(COUNTER)}")


CANARY_AND_LAB = (
    "  - {name: canary, clusters: [canary], soak: 1h, evidence: [alerts], after: {approve: [primary, shadow]}}\n"
    "  - {name: lab, selector: {env: lab}, max_concurrency: 2, failure_budget: 1}\n"
)


def test_the_canary_runs_alone_and_the_lab_waits_for_its_soak_and_gate() -> None:
    fleet = _fleet(CANARY_AND_LAB)
    out = _advance(fleet)
    assert out.starts == ("canary",)
    fleet = out.fleet
    assert [m.state for m in fleet.members_of(1)] == ["pending"] * 4
    # The canary ends: the soak starts; nothing of the lab starts.
    out = _advance(fleet, {"canary": M.SUCCEEDED}, at=T0 + timedelta(minutes=10))
    fleet = out.fleet
    assert (fleet.phase, fleet.soak_started_at, out.starts) == (M.SOAKING, T0 + timedelta(minutes=10), ())
    # Half-way through the soak: still soaking.
    fleet = _advance(fleet, at=T0 + timedelta(minutes=40)).fleet
    assert fleet.phase == M.SOAKING
    # The soak elapsed: the after gate waits for two people.
    fleet = _advance(fleet, at=T0 + timedelta(minutes=71)).fleet
    assert fleet.phase == M.AFTER
    assert fleet.waiting_for(T0 + timedelta(minutes=71)) == ("after", ["the primary", "the shadow"])
    # Four eyes: the primary started the fleet, the shadow alone is not enough either.
    fleet = M.approve(
        fleet, user_id="U0SHADOW", held=frozenset({"shadow"}), now=T0 + timedelta(minutes=72)
    ).fleet
    assert _advance(fleet, at=T0 + timedelta(minutes=72)).starts == ()
    out = M.approve(fleet, user_id="U0PRIMARY", held=frozenset({"primary"}), now=T0 + timedelta(minutes=73))
    assert not out.refused
    out = _advance(out.fleet, at=T0 + timedelta(minutes=73))
    assert out.fleet.stage == 1
    assert out.starts == ("c00", "c01")  # max_concurrency 2
    assert [e.kind for e in out.events] == [
        "stage_done",
        "stage_started",
        "cluster_started",
        "cluster_started",
    ]


def test_a_failed_canary_pauses_the_fleet_and_nothing_later_starts() -> None:
    fleet = _advance(_fleet(CANARY_AND_LAB)).fleet
    out = _advance(fleet, {"canary": M.FAILED})
    fleet = out.fleet
    assert fleet.state == M.PAUSED
    assert fleet.reason == "the canary failed: canary (drain failed); 1 failed, 0 allowed"
    assert _advance(fleet, at=T0 + timedelta(hours=5)).starts == ()
    refused = M.resume(fleet, actor="U0PRIMARY", now=T0)
    assert refused.refused.startswith("the canary failed")
    assert "fleet skip CLUSTER --reason" in refused.refused
    # So the card offers no Resume (it would be refused) and says what people can do instead.
    assert M.buttons(fleet, T0, offer=False) == []
    assert M.over_budget_next(fleet).startswith(
        "Skip a failed cluster (`/upgrade fleet skip CLUSTER --reason …`)"
    )
    fleet = M.skip(fleet, cluster="canary", actor="U0PRIMARY", reason="known flake, fixed in the plan").fleet
    fleet = M.resume(fleet, actor="U0PRIMARY", now=T0).fleet
    assert fleet.state == M.ACTIVE
    out = _advance(fleet, at=T0 + timedelta(hours=2))
    # Every cluster of the canary's stage has ended, none upgraded: its soak would judge nothing.
    # It never "passes": the fleet pauses, and says so (it once soaked on no cluster and passed).
    fleet = out.fleet
    assert (fleet.state, fleet.phase, fleet.soak_started_at) == (M.PAUSED, M.SOAKING, None)
    assert fleet.reason == (
        "no cluster of stage canary was upgraded (canary skipped (known flake, fixed in the plan)), so its "
        "soak has nothing to judge; `fleet resume` goes on without it, `fleet abort` stops the fleet"
    )
    assert [e.kind for e in out.events] == ["fleet_paused"]
    assert [b.decision for b in M.buttons(fleet, T0, offer=False)] == ["resume"]
    # Resume goes on without the soak, and says it was skipped.
    out = M.resume(fleet, actor="U0PRIMARY", now=T0 + timedelta(hours=3))
    assert [(e.kind, e.detail) for e in out.events] == [
        ("fleet_resumed", ""),
        ("soak_skipped", "no cluster of it was upgraded"),
    ]
    assert (out.fleet.state, out.fleet.phase) == (M.ACTIVE, M.AFTER)
    assert M.loose_ends(out.fleet) == "1 skipped (canary), 4 never started (c00, c01, c02, c03)"


def test_a_fleet_that_ends_with_loose_ends_says_which_and_its_card_shows_them() -> None:
    # A cluster failed within its stage's budget, and one completed only past a failed step people
    # skipped: the fleet completes, but its headline and its last milestone say so (it once said
    # "completed" with a green check, as if every cluster had been upgraded cleanly).
    fleet = _fleet(
        "  - {name: canary, clusters: [canary]}\n  - {name: lab, selector: {env: lab}, failure_budget: 1}\n",
        n=2,
    )
    fleet = _advance(fleet).fleet
    went_past = M.ChildStatus(
        state=M.SUCCEEDED, detail="completed with 1 failed step skipped in run R9: diff"
    )
    fleet = M.advance(fleet, {"canary": went_past}, now=T0, new_run_id=lambda: f"R{next(COUNTER)}").fleet
    assert fleet.member("canary").reason == "completed with 1 failed step skipped in run R9: diff"  # type: ignore[union-attr]
    out = _advance(_advance(fleet, {"c00": M.FAILED}).fleet, {"c01": M.SUCCEEDED})
    assert out.fleet.state == M.COMPLETED
    loose = "1 failed (c00), 1 went past failed steps (canary)"
    assert M.loose_ends(out.fleet) == loose
    (done,) = [e for e in out.events if e.kind == "fleet_completed"]
    assert milestone(done) == f":warning: Fleet completed, but {loose}"
    assert (
        render.headline(out.fleet, T0)
        == f":warning: *Fleet f* `F1` — completed, but {loose} · all 2 stages done"
    )
    clean = M.advance(
        _advance(_fleet("  - {name: canary, clusters: [canary]}\n", n=0)).fleet,
        {"canary": M.ChildStatus(state=M.SUCCEEDED)},
        now=T0,
        new_run_id=lambda: "R0",
    )
    (done,) = [e for e in clean.events if e.kind == "fleet_completed"]
    assert (M.loose_ends(clean.fleet), milestone(done)) == ("", ":white_check_mark: Fleet completed")
    assert rehearse_exit(out.fleet) == 3
    assert rehearse_exit(clean.fleet) == 0


@pytest.mark.parametrize(
    ("detail", "loose"),
    [
        # In its run's own words (`Ending.honest`), as the fleet says them now.
        (
            "completed with 1 step not all done in run R9: drain-ng-shared",
            "1 with steps not all done (canary)",
        ),
        ("completed with 2 failed steps skipped in run R9: diff, drain", "1 went past failed steps (canary)"),
        (
            "completed with 1 failed step skipped and 2 steps not all done in run R9: diff, drain, cp",
            "1 went past failed steps (canary), 1 with steps not all done (canary)",
        ),
        # As a fleet stored before said them: they still read as loose ends.
        (
            "completed with 1 step(s) not all done in run R9: drain-ng-shared",
            "1 with steps not all done (canary)",
        ),
        (
            "completed with 2 failed step(s) skipped in run R9: diff, drain",
            "1 went past failed steps (canary)",
        ),
    ],
)
def test_a_cluster_whose_steps_left_work_for_people_is_a_loose_end_said_as_such(
    detail: str, loose: str
) -> None:
    # Its drain skipped a node people chose to skip (still cordoned): not "went past failed steps".
    fleet = _advance(_fleet("  - {name: canary, clusters: [canary]}\n", n=0)).fleet
    left = M.ChildStatus(state=M.SUCCEEDED, detail=detail)
    out = M.advance(fleet, {"canary": left}, now=T0, new_run_id=lambda: "R0")
    assert out.fleet.state == M.COMPLETED
    assert M.loose_ends(out.fleet) == loose
    (done,) = [e for e in out.events if e.kind == "fleet_completed"]
    assert milestone(done) == f":warning: Fleet completed, but {loose}"
    assert rehearse_exit(out.fleet) == 3


def test_a_failure_budget_of_one_carries_on_past_one_failure_and_pauses_at_the_second() -> None:
    fleet = _fleet(
        "  - {name: canary, clusters: [canary]}\n  - {name: lab, selector: {env: lab}, max_concurrency: 4, failure_budget: 1}\n"
    )
    fleet = _advance(fleet).fleet
    out = _advance(fleet, {"canary": M.SUCCEEDED})
    assert out.starts == ("c00", "c01", "c02", "c03")
    fleet = _advance(out.fleet, {"c00": M.FAILED}).fleet
    assert fleet.state == M.ACTIVE
    fleet = _advance(fleet, {"c01": M.SUCCEEDED, "c02": M.FAILED}).fleet
    assert fleet.state == M.PAUSED
    assert (
        fleet.reason
        == "stage lab is over its failure budget: c00 (drain failed), c02 (drain failed); 2 failed, 1 allowed"
    )
    # retry --failed runs both again, on new child runs, and carries on.
    out = M.retry_failed(fleet, actor="U0PRIMARY")
    assert out.fleet.state == M.ACTIVE
    out = _advance(out.fleet)
    assert sorted(out.starts) == ["c00", "c02"]
    assert out.fleet.member("c00").attempts == 2  # type: ignore[union-attr]


def test_evidence_failing_during_the_soak_pauses_and_resume_soaks_again_from_zero() -> None:
    fleet = _advance(_fleet(CANARY_AND_LAB)).fleet
    fleet = _advance(fleet, {"canary": M.SUCCEEDED}).fleet
    assert M.soaking_with_evidence(fleet) == ("alerts",)
    fleet = _advance(fleet, at=T0 + timedelta(minutes=30), evidence="new alert KubeNodeNotReady").fleet
    assert fleet.state == M.PAUSED
    assert fleet.reason == "the soak of stage canary failed: new alert KubeNodeNotReady"
    fleet = M.resume(fleet, actor="U0PRIMARY", now=T0 + timedelta(minutes=50)).fleet
    assert fleet.soak_started_at == T0 + timedelta(minutes=50)
    assert _advance(fleet, at=T0 + timedelta(minutes=100)).fleet.phase == M.SOAKING
    assert _advance(fleet, at=T0 + timedelta(minutes=110)).fleet.phase == M.AFTER


def test_a_pause_during_the_soak_stops_its_clock_and_resume_soaks_again_from_zero() -> None:
    """Nothing judges a paused fleet's evidence: the card said "Soak 50m of 1h … passing" through a
    pause, and a resume after the hour went straight to the after gate, the paused time counted as
    watched. The soak stops at the pause, says so, and starts again at the resume."""
    fleet = _advance(_fleet(CANARY_AND_LAB)).fleet
    fleet = _advance(fleet, {"canary": M.SUCCEEDED}).fleet
    fleet = M.pause(fleet, actor="U0PRIMARY", reason="checking a dashboard").fleet
    assert fleet.state == M.PAUSED
    assert M.soaking_with_evidence(fleet) == ()
    assert render.soak_line(fleet, T0 + timedelta(minutes=50)) == (
        ":stopwatch: Soak 1h stopped (alerts); `fleet resume` starts it again"
    )
    out = M.resume(fleet, actor="U0PRIMARY", now=T0 + timedelta(minutes=90))
    assert [(e.kind, e.detail) for e in out.events][-1] == ("soak_started", "again, from zero")
    assert _advance(out.fleet, at=T0 + timedelta(minutes=120)).fleet.phase == M.SOAKING
    assert _advance(out.fleet, at=T0 + timedelta(minutes=150)).fleet.phase == M.AFTER


def test_a_before_gate_holds_the_stage_and_a_stranger_cannot_open_it() -> None:
    fleet = _fleet("  - {name: canary, clusters: [canary], before: {any_of: [coordinator]}}\n")
    assert _advance(fleet).starts == ()
    refused = M.approve(fleet, user_id="U0X", held=frozenset(), now=T0)
    assert (
        refused.refused
        == "the before gate of stage canary needs the coordinator; you are not in this run's roster"
    )
    fleet = M.approve(fleet, user_id="U0COORD", held=frozenset({"coordinator"}), now=T0).fleet
    assert _advance(fleet).starts == ("canary",)


def test_the_last_stage_done_completes_the_fleet_and_verbs_then_refuse() -> None:
    fleet = _advance(_fleet("  - {name: canary, clusters: [canary]}\n")).fleet
    out = _advance(fleet, {"canary": M.SUCCEEDED})
    assert out.fleet.state == M.COMPLETED
    assert [e.kind for e in out.events][-1] == "fleet_completed"
    assert M.pause(out.fleet, actor="U0PRIMARY", reason="").refused
    assert M.abort(out.fleet, actor="U0PRIMARY", reason="").refused


def test_skip_needs_a_reason_and_refuses_a_running_cluster() -> None:
    fleet = _advance(_fleet(CANARY_AND_LAB)).fleet
    assert (
        M.skip(fleet, cluster="canary", actor="U0PRIMARY", reason=" ").refused
        == "say why: `fleet skip CLUSTER --reason …`"
    )
    assert "abort its run first" in M.skip(fleet, cluster="canary", actor="U0PRIMARY", reason="x").refused
    assert "not in this fleet" in M.skip(fleet, cluster="nope", actor="U0PRIMARY", reason="x").refused
    out = M.skip(fleet, cluster="c03", actor="U0PRIMARY", reason="decommissioned next week")
    assert out.fleet.member("c03").state == M.SKIPPED  # type: ignore[union-attr]
