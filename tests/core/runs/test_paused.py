"""Why a run paused (pluggable kinds), the Skip… vote by the step's gate, and an honest ending:
pure functions over plain data, with the time passed in."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.actions.check import required_ids
from bot.core.announcements.runinfo import plan_context
from bot.core.announcements.templates import AnnouncementRenderer
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import card_context
from bot.core.runs.paused import PAUSE_KINDS, PauseCause, ending, pause_cause, paused_view
from bot.core.runs.planmodel import Gate
from bot.core.runs.plans import parse_plan
from bot.errors import TransitionRefused
from bot.records import RunState, StepState
from bot.resources import BUILTIN_TEMPLATES
from tests.support.slack_stub import block_kit_problems

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
P, S, C, X = "U0P", "U0S", "U0C", "U0X"
DIRECTORY = StaticDirectory({})
CHECK_FAILED = (
    "pre-flight check for 1.25 FAILED: 10 Required — API001 (HorizontalPodAutoscaler payments/payments-api "
    "…and 5 more), EKS001 (Subnet subnet-0c0a10000000000a1), EKS010 (/apis/policy/v1beta1/"
    "poddisruptionbudgets), …and 2 more (CRD001, KI_TEAM-7); 20 Recommended — the full report is attached; "
    "relied on waiver 3 (HOOK001)"
)

PLAN = parse_plan(
    f"""\
name: t
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
roster: {{primary: [{P}], shadow: [{S}], coordinator: [{C}]}}
defaults: {{on_failure: pause}}
steps:
  - id: checks
    title: Pre-flight checks
    gate: {{any_of: [primary]}}
    actions: [{{check: {{to: "1.25"}}}}]
  - id: cp
    title: Control plane
    gate: {{approve: [primary, shadow]}}
    done: {{any_of: [primary, shadow]}}
  - id: last
    title: Last
    gate: {{any_of: [coordinator]}}
    done: {{any_of: [primary]}}
""",
    source="t.yaml",
)


def started() -> R.Run:
    return R.new_run("R1", PLAN, by=P, now=T0).run


def failed_check() -> R.Run:
    run = started()
    run = R.click(
        run, step_id="checks", epoch=1, user_id=P, decision="approve", directory=DIRECTORY, now=T0
    ).run
    return R.action_finished(run, step_id="checks", epoch=2, ok=False, detail=CHECK_FAILED, now=T0).run


def test_the_required_ids_of_a_check_line_are_read_back_even_past_the_listed_budget() -> None:
    assert required_ids(CHECK_FAILED) == ("API001", "EKS001", "EKS010", "CRD001", "KI_TEAM-7")
    # Not a failed check's line: no ids (a restart's KI004 is a known issue, not a Required finding).
    assert required_ids("restart job 6: 1 workload(s) failed — KI004 Vault-injected pod") == ()
    assert required_ids("pre-flight check for 1.25 passed: no Required findings, 3 Recommended") == ()


def test_a_failed_check_pauses_on_its_findings_and_offers_waive_to_the_action_approvers() -> None:
    run = failed_check()
    cause = pause_cause(run)
    assert cause == PauseCause(
        kind="finding",
        step_id="checks",
        why=CHECK_FAILED,
        findings=("API001", "EKS001", "EKS010", "CRD001", "KI_TEAM-7"),
    )
    view = paused_view(run, waive_roles=("primary", "shadow"))
    assert view is not None
    assert view["resume"] == [{"role": "primary", "people": [P]}]
    assert view["skip_rule"] == ""  # an any_of gate: one person
    assert view["waive"] == [{"role": "primary", "people": [P]}, {"role": "shadow", "people": [S]}]
    assert view["value"] == "R1|checks|3"


def test_other_pauses_are_failed_interrupted_or_by_a_person_and_offer_no_waive() -> None:
    run = failed_check()
    run = R.resume(run, by=P, now=T0).run
    run = R.skip(run, step_id="checks", by=P, reason="reviewed", now=T0).run
    run = R.click(
        run, step_id="cp", epoch=1, user_id=P, decision="reject", directory=DIRECTORY, now=T0, reason="no"
    ).run
    cause = pause_cause(run)
    assert cause is not None
    assert (cause.kind, cause.step_id, cause.findings) == ("failed", "cp", ())
    view = paused_view(run)
    assert view is not None
    assert view["waive"] == []
    assert view["skip_rule"] == "the primary and the shadow"
    by_hand = R.pause(R.resume(run, by=P, now=T0).run, by=C, reason="lunch", now=T0).run
    assert pause_cause(by_hand) == PauseCause(kind="by_person", step_id="cp", why="lunch")
    assert pause_cause(R.resume(by_hand, by=P, now=T0).run) is None  # active: no pause section


def test_a_new_kind_of_pause_plugs_in_before_the_others() -> None:
    """How the evidence gate's Inconclusive joins: one function in the kinds, tried first."""

    def inconclusive(run: R.Run, sr: R.StepRun) -> PauseCause | None:
        if "Inconclusive" not in sr.note:
            return None
        return PauseCause(kind="inconclusive", step_id=sr.step_id, why=sr.note)

    run = failed_check()
    cur = dataclasses.replace(run.step_run("checks"), note="evidence: Inconclusive (no samples for 5m)")
    run = dataclasses.replace(run, steps=(cur, *run.steps[1:]))
    assert pause_cause(run).kind == "failed"  # type: ignore[union-attr]
    cause = pause_cause(run, (inconclusive, *PAUSE_KINDS))
    assert cause == PauseCause(
        kind="inconclusive", step_id="checks", why="evidence: Inconclusive (no samples for 5m)"
    )


def test_skip_needs_the_steps_gate_two_people_for_two_roles_one_vote_each() -> None:
    run = failed_check()
    run = R.skip(R.resume(run, by=P, now=T0).run, step_id="checks", by=P, reason="reviewed", now=T0).run
    run = R.click(
        run, step_id="cp", epoch=1, user_id=P, decision="reject", directory=DIRECTORY, now=T0, reason="no"
    ).run
    epoch = run.step_run("cp").epoch

    def vote(r: R.Run, user: str, why: str = "done by hand") -> R.Outcome:
        return R.skip_vote(
            r, step_id="cp", epoch=epoch, user_id=user, directory=DIRECTORY, reason=why, now=T0
        )

    stranger = vote(run, X)
    assert not stranger.accepted
    assert (
        stranger.message
        == "skipping `cp` needs the primary and the shadow, as its gate does; you are not in this run's roster"
    )
    assert not vote(run, C).accepted
    first = vote(run, P)
    assert first.accepted
    assert first.run.state is RunState.PAUSED
    assert [e.kind for e in first.events] == ["skip_voted"]
    again = vote(first.run, P)
    assert again.message == "you have already voted to skip `cp`; it still needs the shadow"
    stale = R.skip_vote(
        first.run, step_id="cp", epoch=epoch - 1, user_id=S, directory=DIRECTORY, reason="x", now=T0
    )
    assert "earlier state" in stale.message
    second = vote(first.run, S, "checked the API server")
    assert second.run.state is RunState.ACTIVE
    assert second.run.step_run("cp").state is StepState.SKIPPED
    assert [e.kind for e in second.events] == ["skip_voted", "run_resumed", "step_skipped", "gate_opened"]
    assert second.run.step_run("cp").note == (
        f"skipped by {P}+{S}: done by hand; checked the API server · it had failed: rejected by {P}: no"
    )
    # Resume: anyone holding a role of the stopped step's gate; not the coordinator.
    refused = R.resume_click(first.run, step_id="cp", epoch=epoch, user_id=C, directory=DIRECTORY, now=T0)
    assert (
        refused.message
        == "resuming `cp` is for the primary or the shadow, who hold its gate; you are the coordinator"
    )
    resumed = R.resume_click(first.run, step_id="cp", epoch=epoch, user_id=S, directory=DIRECTORY, now=T0)
    assert resumed.run.state is RunState.ACTIVE
    # The re-opened gate still says why the step stopped; skip votes of the earlier epoch no longer count.
    assert resumed.run.step_run("cp").note == f"failed before: rejected by {P}: no"
    assert R.skip_votes(resumed.run, resumed.run.step_run("cp")) == []


def completed_past_failures() -> R.Run:
    run = failed_check()
    run = R.resume(run, by=P, now=T0).run  # resumed first, then skipped: still a failure skipped
    run = R.skip(run, step_id="checks", by=P, reason="reviewed in CHG-1", now=T0).run
    run = R.skip(run, step_id="cp", by=S, reason="done by hand", now=T0).run  # never failed
    run = R.click(
        run, step_id="last", epoch=1, user_id=C, decision="approve", directory=DIRECTORY, now=T0
    ).run
    run = R.click(
        run, step_id="last", epoch=2, user_id=P, decision="reject", directory=DIRECTORY, now=T0,
        reason="KI004 Vault-injected pod not ready",
    ).run  # fmt: skip
    run = R.skip(run, step_id="last", by=C, reason="vault team on it", now=T0).run
    assert run.state is RunState.PAUSED
    return R.resume(run, by=C, now=T0 + timedelta(minutes=1)).run


def test_an_ending_past_failed_steps_names_each_and_its_open_findings() -> None:
    run = completed_past_failures()
    assert run.state is RunState.COMPLETED
    end = ending(run)
    assert end.honest == "completed with 2 failed steps skipped"
    assert [(s.step_id, s.by, s.reason) for s in end.skipped] == [
        ("checks", P, "reviewed in CHG-1"),
        ("last", C, "vault team on it"),
    ]
    assert end.skipped[0].failure == CHECK_FAILED
    assert dict(end.findings) == {
        "API001": ("checks",),
        "EKS001": ("checks",),
        "EKS010": ("checks",),
        "CRD001": ("checks",),
        "KI_TEAM-7": ("checks",),
        "KI004": ("last",),
    }
    # A step skipped without having failed is a people's decision, not a failure.
    clean = R.skip(started(), step_id="checks", by=P, reason="done by hand", now=T0).run
    assert ending(clean).honest == "completed"


def test_an_owner_the_run_still_holds_is_named_with_the_whole_command_that_resumes_it() -> None:
    # It gave `flux-resume object=…`, which nobody can type as is: the gate gives `/upgrade action …`.
    plan = parse_plan(
        f"""\
name: hold
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: UTC}}
roster: {{primary: [{P}], shadow: [{S}]}}
steps:
  - id: suspend
    title: Suspend the apps
    gate: {{approve: [primary, shadow]}}
    actions: [{{flux-suspend: {{object: kustomization/flux-system/apps}}}}]
  - id: pause
    title: Pause Argo CD's shop
    gate: {{approve: [primary, shadow]}}
    actions: [{{argocd-pause: {{application: argocd/shop}}}}]
""",
        source="hold.yaml",
    )
    run = R.new_run("R2", plan, by=P, now=T0).run
    for step in ("suspend", "pause"):
        for who in (P, S):
            run = R.click(
                run, step_id=step, epoch=1, user_id=who, decision="approve", directory=DIRECTORY, now=T0
            ).run
        run = R.action_finished(run, step_id=step, epoch=2, ok=True, detail="done", now=T0).run
    assert ending(run).held == (
        # Whole, as `/upgrade action` takes them: the run's cluster, and where the reason goes.
        '`/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"`',
        '`/upgrade action argocd-resume application=argocd/shop --cluster prod --reason "…"`',
    )


def test_the_completed_announcement_does_not_celebrate_a_run_past_failed_steps() -> None:
    renderer = AnnouncementRenderer()
    run = completed_past_failures()
    honest = renderer.render("completed", plan_context(PLAN, run=run))
    assert ":tada:" not in honest.text
    assert honest.text.startswith(
        ":warning: *Kubernetes upgrade of prod completed with 2 failed steps skipped*"
    )
    assert "• *Pre-flight checks* (`checks`) failed: pre-flight check for 1.25 FAILED" in honest.text
    assert f"skipped by <@{P}>: _reviewed in CHG-1_" in honest.text
    assert (
        f"• *Last* (`last`) failed: reported failed by {P}: KI004 Vault-injected pod not ready — skipped by <@{C}>"
        in honest.text
    )
    assert "Open findings: `API001`, `EKS001`, `EKS010`, `CRD001`, `KI_TEAM-7`, `KI004`" in honest.text
    assert block_kit_problems("chat.postMessage", {"blocks": json.dumps(honest.blocks)}) == []
    assert ":tada:" not in json.dumps(honest.blocks)
    # A clean run is still thanked.
    clean = R.skip(started(), step_id="checks", by=P, reason="done by hand", now=T0).run
    clean = R.skip(clean, step_id="cp", by=P, reason="done by hand", now=T0).run
    clean = R.skip(clean, step_id="last", by=P, reason="done by hand", now=T0).run
    assert renderer.render("completed", plan_context(PLAN, run=clean)).text.startswith(":tada:")


def test_a_pause_on_a_background_check_says_its_waiver_covers_that_check_until_the_step_ends() -> None:
    # The card once said "the step passes on people's word" there, while the thread's question said
    # the waiver covers that one check for the rest of the step; and "two people, the primary or
    # the shadow" for a vote that needs one of each.
    text = Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(paused_on_evidence(), T0)).text
    assert (
        "• *Waive…* — the step goes on without this background check until it ends (its other checks still "
        f"pause it); asks why (thread and audit log); needs two people: the primary <@{P}> and the shadow <@{S}>"
    ) in text


def paused_on_evidence() -> R.Run:
    """The run past its check, paused on `cp`'s background alerts check: `cp` still running."""
    run = failed_check()
    run = R.resume(run, by=P, now=T0).run
    run = R.click(
        run, step_id="checks", epoch=4, user_id=P, decision="approve", directory=DIRECTORY, now=T0
    ).run
    run = R.action_finished(run, step_id="checks", epoch=5, ok=True, detail="passed", now=T0).run
    for who in (P, S):
        sr = run.step_run("cp")
        run = R.click(
            run, step_id="cp", epoch=sr.epoch, user_id=who, decision="approve", directory=DIRECTORY, now=T0
        ).run
    sr = run.step_run("cp")
    assert sr.state is StepState.RUNNING
    why = "background alerts is Inconclusive — Alertmanager answered HTTP 503"
    return R.pause_on_evidence(run, step_id="cp", epoch=sr.epoch, why=why, now=T0).run


def test_a_step_held_on_inconclusive_evidence_is_listed_as_held_not_running() -> None:
    # The card said "Run *paused*" and "`cp` is stopped" above a step line ":arrows_counterclockwise:
    # `cp` Control plane — running": read at a glance, the step was still moving.
    run = paused_on_evidence()
    assert run.step_run("cp").state is StepState.RUNNING
    text = Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, T0)).text
    assert (
        ":double_vertical_bar: `cp` Control plane — held: its evidence is Inconclusive; waiting for people "
        "(Wait, Waive… or Abort above)"
    ) in text
    assert "— running" not in text
    # Answered (Wait: the run goes on), the step runs again and says so.
    run = R.resume(run, by=P, now=T0).run
    text = Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, T0)).text
    assert ":arrows_counterclockwise: `cp` Control plane — running" in text


def test_a_refused_button_of_a_paused_run_names_what_the_person_tried() -> None:
    # A coordinator's Wait or Abort was told "resuming `cp` is for …": a thing no button there does.
    run = paused_on_evidence()
    cp = run.step_run("cp")

    def refusal(doing: str, user: str = C) -> str:
        out = R.paused_refusal(
            run, step_id="cp", epoch=cp.epoch, user_id=user, directory=DIRECTORY, doing=doing
        )
        assert out is not None
        assert not out.accepted
        return out.message

    who = "is for the primary or the shadow, who hold its gate; you are the coordinator"
    assert refusal("wait") == f"waiting for fresh evidence on `cp` {who}"
    assert refusal("abort") == f"aborting `cp` {who}"
    assert refusal("resume") == f"resuming `cp` {who}"
    assert refusal("abort", X).endswith("you are not in this run's roster")


def test_a_refusal_for_a_gate_one_role_holds_says_holds_and_for_two_hold() -> None:
    # "is for the primary, who hold its gate" read wrong: the verb agrees with the roles named.
    one = R.not_the_gates("abort", "cp", Gate(kind="approve", roles=("primary",)), frozenset({"shadow"}))
    assert one == "aborting `cp` is for the primary, who holds its gate; you are the shadow"
    two = R.not_the_gates("resume", "cp", Gate(kind="any_of", roles=("primary", "shadow")), frozenset())
    assert two.startswith("resuming `cp` is for the primary or the shadow, who hold its gate; you are ")


def test_a_step_skipped_while_the_run_is_paused_leaves_it_paused_and_resume_opens_the_next_gate() -> None:
    run = failed_check()
    out = R.skip_step(run, step_id="checks", user_id=P, directory=DIRECTORY, reason="reviewed", now=T0)
    run = out.run
    assert run.step_run("checks").state is StepState.SKIPPED
    assert run.state is RunState.PAUSED
    assert run.step_run("cp").state is StepState.PENDING
    text = Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, T0)).text
    assert (
        "*Now: `cp` is stopped* — it has not started: `checks` was skipped while the run was paused, "
        "and Resume opens its gate."
    ) in text
    assert "paused by hand" not in text
    resumed = R.resume(run, by=P, now=T0)
    # Before, a resume left `cp` pending with no gate: the run active, nobody asked anything.
    assert resumed.run.step_run("cp").state is StepState.AWAITING_APPROVAL
    assert [(e.kind, e.step_id) for e in resumed.events] == [("run_resumed", ""), ("gate_opened", "cp")]


def test_skip_by_command_is_voted_as_the_steps_gate_counts_approvals() -> None:
    run = R.skip_step(
        failed_check(), step_id="checks", user_id=P, directory=DIRECTORY, reason="ok", now=T0
    ).run
    run = R.resume(run, by=P, now=T0).run
    # The coordinator alone cannot skip a step whose gate needs the primary and the shadow.
    with pytest.raises(
        TransitionRefused, match=r"skipping `cp` needs the primary and the shadow, as its gate does"
    ):
        R.skip_step(run, step_id="cp", user_id=C, directory=DIRECTORY, reason="alone", now=T0)
    voted = R.skip_step(run, step_id="cp", user_id=P, directory=DIRECTORY, reason="done by hand", now=T0)
    assert voted.run.step_run("cp").state is StepState.AWAITING_APPROVAL
    assert [e.kind for e in voted.events] == ["skip_voted"]
    assert R.skip_needs(voted.run, "cp", T0) == "the shadow"
    with pytest.raises(
        TransitionRefused, match="you have already voted to skip `cp`; it still needs the shadow"
    ):
        R.skip_step(voted.run, step_id="cp", user_id=P, directory=DIRECTORY, reason="again", now=T0)
    done = R.skip_step(voted.run, step_id="cp", user_id=S, directory=DIRECTORY, reason="seen it", now=T0)
    cp = done.run.step_run("cp")
    assert cp.state is StepState.SKIPPED
    assert cp.note == f"skipped by {P}+{S}: done by hand; seen it"
    assert done.run.step_run("last").state is StepState.AWAITING_APPROVAL


def test_a_run_started_before_its_window_says_when_the_window_opens_not_hours_left() -> None:
    """Started early by override: "window ends … (16h left)" read as sixteen hours to work in a
    window of four. The card says the window is not open yet, when it opens and ends."""
    early = T0 - timedelta(hours=12)
    run = R.new_run("R1", PLAN, by=P, now=early).run
    text = Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, early)).text
    assert "window not open yet: it opens " in text
    assert "(in 12h) and ends " in text
    assert "left)" not in text
    inside = (
        Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, T0 + timedelta(hours=1))).text
    )
    assert "window not open yet" not in inside
    assert "(3h left)" in inside


def test_a_window_long_past_is_said_in_plain_words_on_the_card() -> None:
    """A plan's window months or a year behind: "367d7h30m ago" is a figure nobody reads at a
    glance; the card says "over a year ago", "13 days ago", and hours as before."""
    run = R.new_run("R1", PLAN, by=P, now=T0).run
    end = T0 + timedelta(hours=4)  # the plan's window ends four hours after T0

    def card(now: datetime) -> str:
        return Renderer([BUILTIN_TEMPLATES]).render("runs/card", card_context(run, now)).text

    assert ", over a year ago" in card(end + timedelta(days=367, hours=7, minutes=30))
    assert "d7h" not in card(end + timedelta(days=367, hours=7, minutes=30))
    assert ", 13 days ago" in card(end + timedelta(days=13, hours=22))
    assert ", 7h30m ago" in card(end + timedelta(hours=7, minutes=30))
