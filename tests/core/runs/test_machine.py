"""Runs and gates: the state machine, who may approve, four-eyes, stale buttons, escalation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.jobs.common import gate_choice
from bot.core.people import StaticDirectory
from bot.core.runs.cards import summary_rows
from bot.core.runs.handoffs import handoff
from bot.core.runs.machine import (
    RUN_TRANSITIONS,
    STEP_TRANSITIONS,
    ButtonRef,
    Outcome,
    Run,
    abort,
    action_finished,
    click,
    due,
    new_run,
    next_due,
    pause,
    recover,
    resume,
    skip,
    waiting_on,
)
from bot.core.runs.plans import parse_plan
from bot.errors import PermissionDenied, TransitionRefused
from bot.records import RunState, StepState

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
P, S, C, STRANGER, BOTH, M1, M2 = "U0P", "U0S", "U0C", "U0X", "U0BOTH", "U0M1", "U0M2"
DIRECTORY = StaticDirectory({"S0MESH": [M1, M2, S]})

PLAN = f"""\
name: t
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
roster:
  primary: [{P}, {BOTH}]
  shadow: [{S}, {BOTH}]
  coordinator: [{C}]
  mesh: [S0MESH]
defaults: {{escalate_after: 10m, timeout: 1h}}
steps:
  - id: snap
    title: Snapshot
    gate: {{any_of: [primary, shadow]}}
    actions: [{{snapshot: {{label: pre}}}}]
  - id: ng
    title: Node group
    gate: {{any_of: [primary]}}
    done: {{any_of: [primary, shadow]}}
  - id: both
    title: Two roles
    gate: {{approve: [primary, shadow]}}
    done: {{any_of: [coordinator]}}
  - id: mesh
    title: Quorum
    gate: {{quorum: {{role: mesh, count: 2}}}}
    done: {{any_of: [coordinator]}}
  - id: drop
    title: Destructive
    gate: {{any_of: [coordinator], expires: 5m}}
    done: {{any_of: [primary]}}
    destructive: true
    on_failure: abort
"""


def plan():
    return parse_plan(PLAN)


def start() -> Run:
    return new_run("r1", plan(), by=P, now=T0).run


def state(run: Run, step: str) -> StepState:
    return run.step_run(step).state


def press(
    run: Run, step: str, user: str, decision: str = "approve", *, at: datetime = T0, **kw: object
) -> Outcome:
    sr = run.step_run(step)
    return click(
        run, step_id=step, epoch=sr.epoch, user_id=user, decision=decision, directory=DIRECTORY, now=at, **kw
    )  # type: ignore[arg-type]


def through(run: Run, *steps: str) -> Run:
    """Drive the run through the named steps with the right people."""
    for step in steps:
        if step == "snap":
            out = press(run, "snap", S)
            run = action_finished(
                out.run, step_id="snap", epoch=out.run.step_run("snap").epoch, ok=True, detail="#1", now=T0
            ).run
        elif step == "ng":
            run = press(press(run, "ng", P).run, "ng", S).run
        elif step == "both":
            run = press(press(press(run, "both", P).run, "both", S).run, "both", C).run
        elif step == "mesh":
            run = press(press(press(run, "mesh", M1).run, "mesh", M2).run, "mesh", C).run
    return run


def test_a_new_run_opens_the_first_gate_only() -> None:
    out = new_run("r1", plan(), by=P, now=T0)
    assert out.run.state is RunState.ACTIVE
    assert [s.state for s in out.run.steps] == [StepState.AWAITING_APPROVAL] + [StepState.PENDING] * 4
    assert [e.kind for e in out.events] == ["run_started", "gate_opened"]


def test_an_action_step_runs_after_its_gate_and_succeeds_when_the_action_does() -> None:
    out = press(start(), "snap", S)
    assert out.accepted
    assert out.run_actions == "snap"
    assert state(out.run, "snap") is StepState.RUNNING
    done = action_finished(
        out.run, step_id="snap", epoch=out.run.step_run("snap").epoch, ok=True, detail="#7", now=T0
    )
    assert state(done.run, "snap") is StepState.SUCCEEDED
    assert state(done.run, "ng") is StepState.AWAITING_APPROVAL


def test_a_failed_action_pauses_the_run_and_resume_reopens_the_gate_never_reruns() -> None:
    out = press(start(), "snap", P)
    failed = action_finished(
        out.run, step_id="snap", epoch=out.run.step_run("snap").epoch, ok=False, detail="boom", now=T0
    )
    assert failed.run.state is RunState.PAUSED
    assert state(failed.run, "snap") is StepState.FAILED
    assert "step_failed" in [e.kind for e in failed.events]
    resumed = resume(failed.run, by=C, now=T0)
    assert state(resumed.run, "snap") is StepState.AWAITING_APPROVAL
    assert resumed.run_actions == ""


def test_an_action_that_fails_while_the_run_is_paused_is_kept_and_the_run_stays_paused_on_it() -> None:
    # Paused by hand (or on its evidence) while the step's job still ran: its failure was once
    # refused (a paused run cannot pause) and dropped, the step "running" for good.
    out = press(start(), "snap", P)
    paused = pause(out.run, by=C, reason="lunch", now=T0).run
    failed = action_finished(
        paused, step_id="snap", epoch=paused.step_run("snap").epoch, ok=False, detail="boom", now=T0
    )
    assert failed.run.state is RunState.PAUSED
    assert failed.run.reason == "step snap failed: boom"
    assert state(failed.run, "snap") is StepState.FAILED
    assert [e.kind for e in failed.events] == ["step_failed", "run_paused"]
    resumed = resume(failed.run, by=C, now=T0)
    assert state(resumed.run, "snap") is StepState.AWAITING_APPROVAL


def test_a_stranger_is_told_which_roles_the_step_needs() -> None:
    out = press(start(), "snap", STRANGER)
    assert not out.accepted
    assert out.message == "this step needs the primary or the shadow; you are not in this run's roster"
    assert out.events[0].kind == "refused"
    out = press(through(start(), "snap"), "ng", C)
    assert out.message == "this step needs the primary; you are the coordinator"


def test_four_eyes_whoever_started_a_step_cannot_be_its_only_approver() -> None:
    run = press(through(start(), "snap"), "ng", P).run
    assert state(run, "ng") is StepState.RUNNING
    assert run.step_run("ng").started_by == P
    out = press(run, "ng", P)
    assert not out.accepted
    assert out.message.startswith("four eyes: you started this step")
    out = press(run, "ng", S)
    assert out.accepted
    assert state(out.run, "ng") is StepState.SUCCEEDED


def test_one_person_holding_two_roles_counts_once() -> None:
    run = through(start(), "snap", "ng")
    first = press(run, "both", BOTH)
    assert first.accepted
    assert state(first.run, "both") is StepState.AWAITING_APPROVAL
    again = press(first.run, "both", BOTH)
    assert not again.accepted
    assert "already approved" in again.message
    # Whoever comes second completes the matching, in either role.
    for other in (P, S):
        out = press(first.run, "both", other)
        assert out.accepted
        assert state(out.run, "both") is StepState.RUNNING


def test_a_role_already_covered_does_not_count_again() -> None:
    run = press(through(start(), "snap", "ng"), "both", P).run
    out = press(run, "both", BOTH)
    # BOTH may stand in as the shadow, so the matching grows: accepted.
    assert out.accepted
    assert state(out.run, "both") is StepState.RUNNING
    run2 = press(through(start(), "snap", "ng"), "both", S).run
    dup = press(press(run2, "both", BOTH).run, "both", P)
    assert not dup.accepted or state(dup.run, "both") is not StepState.AWAITING_APPROVAL


def test_two_primaries_cannot_satisfy_primary_and_shadow() -> None:
    plan_text = PLAN.replace(f"shadow: [{S}, {BOTH}]", f"shadow: [{S}]").replace(
        f"primary: [{P}, {BOTH}]", f"primary: [{P}, {BOTH}]"
    )
    run = through(new_run("r", parse_plan(plan_text), by=P, now=T0).run, "snap", "ng")
    run = press(run, "both", P).run
    out = press(run, "both", BOTH)
    assert not out.accepted
    assert out.message == "the primary approval is already given; this step still needs the shadow"


def test_a_double_click_counts_once() -> None:
    run = through(start(), "snap", "ng")
    once = press(run, "both", P)
    twice = press(once.run, "both", P)
    assert not twice.accepted
    assert twice.message == "you have already approved this step; it still needs the shadow"
    assert len(twice.run.approvals) == len(once.run.approvals)


def test_a_stale_button_is_refused_with_an_explanation() -> None:
    run = start()
    old_epoch = run.step_run("snap").epoch
    run = press(run, "snap", P).run
    out = click(
        run, step_id="snap", epoch=old_epoch, user_id=S, decision="approve", directory=DIRECTORY, now=T0
    )
    assert not out.accepted
    assert out.message.startswith("this button is from an earlier state of step `snap`; it is now running")


def test_a_quorum_needs_that_many_different_people_and_group_members_count() -> None:
    run = through(start(), "snap", "ng", "both")
    one = press(run, "mesh", M1)
    assert one.accepted
    assert state(one.run, "mesh") is StepState.AWAITING_APPROVAL
    assert not press(one.run, "mesh", P).accepted
    two = press(one.run, "mesh", S)  # the shadow is in the mesh group too
    assert state(two.run, "mesh") is StepState.RUNNING


def test_a_destructive_step_needs_the_typed_step_id() -> None:
    run = through(start(), "snap", "ng", "both", "mesh")
    ask = press(run, "drop", C)
    assert ask.needs_confirmation
    assert not ask.accepted
    assert ask.run is run
    wrong = press(run, "drop", C, confirmation="drop it")
    assert not wrong.accepted
    assert "type `drop` exactly" in wrong.message
    ok = press(run, "drop", C, confirmation="drop")
    assert ok.accepted
    assert state(ok.run, "drop") is StepState.RUNNING


def test_expired_approvals_stop_counting_and_may_be_given_again() -> None:
    text = PLAN.replace(
        "gate: {any_of: [coordinator], expires: 5m}", "gate: {approve: [coordinator, primary], expires: 5m}"
    )
    run = through(new_run("r", parse_plan(text), by=P, now=T0).run, "snap", "ng", "both", "mesh")
    first = press(run, "drop", C, confirmation="drop")
    assert first.accepted
    assert state(first.run, "drop") is StepState.AWAITING_APPROVAL
    late = press(first.run, "drop", P, at=T0 + timedelta(minutes=6), confirmation="drop")
    assert late.accepted
    assert state(late.run, "drop") is StepState.AWAITING_APPROVAL
    again = press(late.run, "drop", C, at=T0 + timedelta(minutes=7), confirmation="drop")
    assert again.accepted
    assert state(again.run, "drop") is StepState.RUNNING


def test_a_rejection_fails_the_step_and_applies_on_failure() -> None:
    out = press(start(), "snap", S, "reject", reason="not now")
    assert state(out.run, "snap") is StepState.FAILED
    assert out.run.state is RunState.PAUSED
    assert "rejected by U0S: not now" in out.run.step_run("snap").note
    run = through(start(), "snap", "ng", "both", "mesh")
    aborted = press(run, "drop", C, "reject")
    assert aborted.run.state is RunState.ABORTED
    assert not press(start(), "snap", STRANGER, "reject").accepted


def test_a_failure_reported_at_the_done_gate_is_not_called_a_rejection() -> None:
    """The work ran and failed: "Report failure" on the done gate read "rejected by …", as a start
    refused."""
    run = press(through(start(), "snap"), "ng", P).run  # started: its done gate is open
    out = press(run, "ng", S, "reject", reason="the new nodes never joined")
    assert state(out.run, "ng") is StepState.FAILED
    assert out.run.step_run("ng").note == "reported failed by U0S: the new nodes never joined"
    (event,) = [e for e in out.events if e.kind == "rejected"]
    assert (event.actor, event.note) == (S, "reported failed")


def test_nothing_is_approved_on_a_paused_run() -> None:
    run = pause(start(), by=P, reason="lunch", now=T0).run
    out = press(run, "snap", S)
    assert not out.accepted
    assert "paused" in out.message
    assert press(resume(run, by=P, now=T0).run, "snap", S).accepted


def test_a_gate_open_across_a_pause_opens_afresh_without_the_votes_given_before() -> None:
    run = press(through(start(), "snap", "ng"), "both", P).run  # one of its two approvals
    before = run.step_run("both")
    paused = pause(run, by=C, reason="payments batch", now=T0).run
    assert paused.step_run("both") == before  # the pause leaves the gate as it is
    later = T0 + timedelta(minutes=30)
    resumed = resume(paused, by=C, now=later).run
    after = resumed.step_run("both")
    assert (after.state, after.epoch, after.opened_at) == (before.state, before.epoch + 1, later)
    # The old message's buttons are stale; the primary's approval given before the pause is gone.
    stale = click(
        resumed,
        step_id="both",
        epoch=before.epoch,
        user_id=S,
        decision="approve",
        directory=DIRECTORY,
        now=later,
    )
    assert not stale.accepted
    assert "earlier state of step `both`" in stale.message
    assert resumed.votes(after, "start") == []
    assert waiting_on(resumed, after, later) == "the primary and the shadow"
    once = press(resumed, "both", S, at=later)
    assert state(once.run, "both") is StepState.AWAITING_APPROVAL
    assert state(press(once.run, "both", P, at=later).run, "both") is StepState.RUNNING
    # A plain step's "done" gate, open across a pause, opens afresh too.
    working = through(start(), "snap", "ng")
    working = press(press(working, "both", P).run, "both", S).run
    done = resume(pause(working, by=C, reason="x", now=T0).run, by=C, now=later).run.step_run("both")
    assert (done.state, done.epoch) == (StepState.RUNNING, working.step_run("both").epoch + 1)


def test_the_whole_plan_completes() -> None:
    run = through(start(), "snap", "ng", "both", "mesh")
    run = press(run, "drop", C, confirmation="drop").run
    out = press(run, "drop", P)
    assert out.run.state is RunState.COMPLETED
    assert out.events[-1].kind == "run_completed"
    assert all(r["state"] == "succeeded" for r in summary_rows(out.run, T0))


def test_skip_moves_on_and_refuses_a_running_step() -> None:
    run = start()
    out = skip(run, step_id="snap", by=P, reason="taken by hand", now=T0)
    assert state(out.run, "snap") is StepState.SKIPPED
    assert state(out.run, "ng") is StepState.AWAITING_APPROVAL
    running = press(run, "snap", P).run
    with pytest.raises(TransitionRefused, match="only a step that is not running"):
        skip(running, step_id="snap", by=P, reason="x", now=T0)
    with pytest.raises(TransitionRefused, match="no step `nope`"):
        skip(run, step_id="nope", by=P, reason="x", now=T0)


def test_a_crash_mid_action_leaves_the_step_interrupted_for_a_human() -> None:
    running = press(start(), "snap", P).run
    out = recover(running, now=T0)
    assert state(out.run, "snap") is StepState.INTERRUPTED
    assert out.run_actions == ""
    assert out.run.state is RunState.PAUSED
    assert "interrupted" in out.run.reason
    assert not press(out.run, "snap", S).accepted
    # A human resumes, and the gate is approved afresh (a new epoch) before the action runs again.
    reopened = resume(out.run, by=P, now=T0).run
    assert state(reopened, "snap") is StepState.AWAITING_APPROVAL
    again = press(reopened, "snap", S)
    assert again.accepted
    assert again.run_actions == "snap"
    # A manual step that was "running" is people's work: a restart does not touch it.
    manual = press(through(start(), "snap"), "ng", P).run
    assert recover(manual, now=T0).run == manual


def test_abort_is_final_and_pause_resume_round_trips() -> None:
    run = abort(start(), by=C, reason="rollback", now=T0).run
    assert run.state is RunState.ABORTED
    with pytest.raises(TransitionRefused):
        resume(run, by=C, now=T0)
    with pytest.raises(TransitionRefused):
        pause(run, by=C, reason="x", now=T0)


def test_handoff_changes_the_runs_roster_not_the_plans() -> None:
    run = start()
    out = handoff(run, role="shadow", user_id="U0NEW", by=C, now=T0)
    assert out.run.roster["shadow"] == ("U0NEW",)
    assert run.plan.roster["shadow"] == (S, BOTH)
    assert not press(out.run, "snap", S).accepted
    assert press(out.run, "snap", "U0NEW").accepted
    with pytest.raises(TransitionRefused, match="no role `sre`"):
        handoff(run, role="sre", user_id="U0NEW", by=C, now=T0)


def test_escalation_mentions_whom_the_gate_needs_then_the_coordinator_then_times_out() -> None:
    run = start()
    assert next_due(run) == T0 + timedelta(minutes=10)
    assert due(run, now=T0 + timedelta(minutes=9)).events == ()
    first = due(run, now=T0 + timedelta(minutes=10))
    assert first.events[0].kind == "escalated"
    # `snap` needs the primary or the shadow: both are told.
    assert first.events[0].roles == ("primary", "shadow")
    assert first.events[0].detail == f"primary: {P},{BOTH}; shadow: {S},{BOTH}"
    assert due(first.run, now=T0 + timedelta(minutes=11)).events == ()
    second = due(first.run, now=T0 + timedelta(minutes=20))
    assert second.events[0].detail == f"coordinator: {C}"
    assert next_due(second.run) == T0 + timedelta(hours=1)
    late = due(second.run, now=T0 + timedelta(hours=1))
    assert state(late.run, "snap") is StepState.FAILED
    assert late.run.state is RunState.PAUSED


def test_escalation_leaves_out_who_already_approved_and_names_a_quorums_role() -> None:
    run = through(start(), "snap", "ng")
    run = press(run, "both", S).run  # the shadow approved; the gate waits for the primary only
    first = due(run, now=T0 + timedelta(minutes=10))
    assert (first.events[0].roles, first.events[0].detail) == (("primary",), f"primary: {P},{BOTH}")
    assert due(first.run, now=T0 + timedelta(minutes=20)).events[0].roles == ("coordinator",)
    run = through(start(), "snap", "ng", "both")
    mesh = due(run, now=T0 + timedelta(minutes=10))
    assert (mesh.events[0].roles, mesh.events[0].detail) == (("mesh",), "mesh: S0MESH")


def test_only_allowed_transitions_exist() -> None:
    assert STEP_TRANSITIONS[StepState.SUCCEEDED] == frozenset()
    assert StepState.RUNNING not in STEP_TRANSITIONS[StepState.PENDING]
    assert StepState.RUNNING not in STEP_TRANSITIONS[StepState.INTERRUPTED]  # never re-run silently
    assert RUN_TRANSITIONS[RunState.COMPLETED] == frozenset()
    assert set(STEP_TRANSITIONS) == set(StepState)
    assert set(RUN_TRANSITIONS) == set(RunState)


def test_buttons_round_trip_and_garbage_is_rejected() -> None:
    ref = ButtonRef(run_id="r1", step_id="ng", epoch=3)
    assert ButtonRef.decode(ref.encode(), "approve") == ref
    assert ButtonRef.decode("r1|ng", "approve") is None
    assert ButtonRef.decode("r1|ng|x", "approve") is None


FORCE_PLAN = f"""\
name: f
cluster: prod
current_version: "1.29"
target_version: "1.29"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
roster:
  primary: [{P}]
  shadow: [{S}]
steps:
  - id: snap
    title: Snapshot
    gate: {{any_of: [primary]}}
    actions: [{{snapshot: {{label: pre}}}}]
  - id: pods
    title: Delete stuck pods
    gate: {{approve: [primary, shadow]}}
    actions: [{{delete-pod: {{workload: deployment/shop/web, only: not-ready}}}}]
"""


def test_force_is_an_option_of_a_delete_pod_gate_only_and_needs_its_reason() -> None:
    run = new_run("r1", parse_plan(FORCE_PLAN), by=P, now=T0).run
    refused = press(run, "snap", P, "force", reason="why not")
    assert (refused.accepted, refused.message) == (
        False,
        "step `snap` has no force option: approve or reject it",
    )
    run = press(run, "snap", P).run
    run = action_finished(
        run, step_id="snap", epoch=run.step_run("snap").epoch, ok=True, detail="", now=T0
    ).run
    blank = press(run, "pods", P, "force", reason="  ")
    assert (blank.accepted, blank.message) == (
        False,
        "approving with force needs a reason: say why the budgets may be passed",
    )
    assert press(run, "pods", P, "sudo").message == "`sudo` is not a decision on a gate"
    out = press(run, "pods", P, "force", reason="the node is dead")
    assert out.accepted
    (vote,) = [a for a in out.run.approvals if a.step_id == "pods"]
    assert (vote.decision, vote.reason) == ("force", "the node is dead")
    assert out.events[0].note == "with force: the node is dead"
    # A plain approval completes the gate: force was not every approval's, so it is not the gate's.
    mixed = press(out.run, "pods", S)
    assert mixed.run_actions == "pods"
    assert [e.kind for e in mixed.events] == ["approved", "step_running", "force_declined"]
    assert mixed.events[-1].detail.startswith(f"force was chosen by {P} only")
    assert gate_choice(mixed.run.votes(mixed.run.step_run("pods"), "start"))["option"] == ""


def test_force_is_the_gate_s_option_when_every_approval_chose_it() -> None:
    run = new_run("r1", parse_plan(FORCE_PLAN), by=P, now=T0).run
    run = press(run, "snap", P).run
    run = action_finished(
        run, step_id="snap", epoch=run.step_run("snap").epoch, ok=True, detail="", now=T0
    ).run
    run = press(run, "pods", P, "force", reason="node gone").run
    out = press(run, "pods", S, "force", reason="agreed")
    assert out.run_actions == "pods"
    assert "force_declined" not in [e.kind for e in out.events]
    given = [a for a in out.run.approvals if a.step_id == "pods"]
    assert gate_choice(given) == {
        "option": "force",
        "by": [P, S],
        "reasons": [f"{P}: node gone", f"{S}: agreed"],
    }


def test_handoff_is_by_the_holder_or_the_coordinator_and_never_leaves_a_gate_one_person_short() -> None:
    """`/upgrade handoff` gave the shadow to the primary (a gate needing both could then never
    pass: the primary approved once and waited for a shadow who was themselves) and let any roster
    member hand away another's role; now the holder or the coordinator hands a role over, to
    someone who does not hold the other role of a gate still to pass."""
    run = start()
    with pytest.raises(
        PermissionDenied, match="only the primary or the coordinator may hand the primary over"
    ):
        handoff(run, role="primary", user_id="U0NEW", by=S, now=T0)
    # The holder, off shift, hands over their own part: the role's other holder keeps it.
    mine = handoff(run, role="primary", user_id="U0NEW", by=P, now=T0)
    assert mine.run.roster["primary"] == (BOTH, "U0NEW")
    assert mine.events[0].note == f"was {P}"
    # The coordinator, holding none of it, replaces its holders; the thread names them.
    solo = handoff(mine.run, role="primary", user_id="U0SOLO", by=C, now=T0)
    assert solo.run.roster["primary"] == ("U0SOLO",)
    assert solo.events[0].note == f"was {BOTH},U0NEW"
    with pytest.raises(
        TransitionRefused, match=r"`both`'s gate \(the primary and the shadow\) could then never pass"
    ):
        handoff(solo.run, role="shadow", user_id="U0SOLO", by=C, now=T0)
    assert handoff(solo.run, role="shadow", user_id="U0OTHER", by=C, now=T0).run.roster["shadow"] == (
        "U0OTHER",
    )
    with pytest.raises(TransitionRefused, match="U0SOLO already holds the primary"):
        handoff(solo.run, role="primary", user_id="U0SOLO", by=C, now=T0)


def test_a_handoff_that_would_leave_a_quorum_or_a_started_step_unable_to_pass_is_refused() -> None:
    text = PLAN.replace(f"shadow: [{S}, {BOTH}]", f"shadow: [{S}, {BOTH}, {M1}]")
    quorum = parse_plan(
        text.replace(
            "  - id: snap\n    title: Snapshot\n    gate: {any_of: [primary, shadow]}",
            "  - id: snap\n    title: Snapshot\n    gate: {quorum: {role: shadow, count: 3}}",
        )
    )
    run = new_run("q", quorum, by=P, now=T0).run
    # M1 hands their own part of the shadow over: three shadows still.
    assert handoff(run, role="shadow", user_id="U0NEW", by=M1, now=T0).run.roster["shadow"] == (
        S,
        BOTH,
        "U0NEW",
    )
    # The coordinator replacing all three shadows with one person leaves the quorum of 3 short.
    with pytest.raises(
        TransitionRefused, match=r"`snap`'s gate .* could then never pass: it needs 3 different people"
    ):
        handoff(run, role="shadow", user_id="U0NEW", by=C, now=T0)


def test_a_button_of_an_ended_run_says_it_has_ended_not_to_resume_it() -> None:
    """ "nothing can be approved until it is resumed" sent people to a resume that an aborted or
    completed run refuses; an ended run's interrupted step no longer says to resume it either."""
    run = start()
    ended = abort(run, by=C, reason="vendor outage", now=T0).run
    out = press(ended, "snap", P)
    assert not out.accepted
    assert (
        out.message == f"run {ended.id} is aborted: it has ended, and nothing in it can be approved any more"
    )
    paused = pause(run, by=C, reason="lunch", now=T0).run
    assert (
        press(paused, "snap", P).message
        == f"run {paused.id} is paused; nothing can be approved until it is resumed"
    )


HANDOFF_PLAN = f"""\
name: h
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
roster:
  primary: [{P}]
  shadow: [{S}]
  coordinator: [{C}]
steps:
  - id: two
    title: Two people
    gate: {{approve: [primary, shadow]}}
    done: {{any_of: [coordinator]}}
  - id: work
    title: Manual work
    gate: {{any_of: [coordinator]}}
    done: {{any_of: [primary]}}
"""


def test_a_handoff_refuses_to_make_an_approver_count_twice_or_a_starter_the_only_confirmer() -> None:
    run = new_run("h", parse_plan(HANDOFF_PLAN), by=P, now=T0).run
    voted = press(run, "two", P).run  # the primary approved the start
    off = handoff(voted, role="primary", user_id="U0DANA", by=P, now=T0).run
    with pytest.raises(TransitionRefused, match="U0P already approved `two` as the primary"):
        handoff(off, role="shadow", user_id=P, by=C, now=T0)
    # `work`, started by the coordinator, may only be confirmed done by the primary: not them too.
    run = new_run("h", parse_plan(HANDOFF_PLAN), by=P, now=T0).run
    run = press(press(press(run, "two", P).run, "two", S).run, "two", C).run
    started = press(run, "work", C).run
    assert started.step_run("work").state is StepState.RUNNING
    with pytest.raises(TransitionRefused, match="`work` could then never be confirmed done: U0C started it"):
        handoff(started, role="primary", user_id=C, by=C, now=T0)
