"""Runs: one execution of a plan, as a state machine over plain data with the time passed in.

    run:  active ⇄ paused → aborted          active → completed (every step succeeded or skipped)
    step: pending → awaiting_approval → running → succeeded
                          │     ▲          │ ├──→ failed ──→ awaiting_approval (retry on resume)
                          │     │          │ └──→ interrupted (the bot died mid-action)
                          ▼     └──────────┴───── interrupted → awaiting_approval (a human re-opens it)
                       skipped (from pending, awaiting_approval, failed or interrupted)

A step's gate opens in `awaiting_approval` (phase "start"). A step with actions runs them once
the gate is satisfied; a plain step is human work, so in `running` it waits for its "done"
confirmation (phase "done"). Every function returns a new `Run` plus `Event`s describing what
happened, for the audit log and Slack; nothing here does I/O. The caller commits the new run with
optimistic concurrency (`version`), so two clicks never advance a step twice.

Buttons carry run id, step id and the step's `epoch`, which changes on every state change of the
step (and when a resume opens its gate afresh): a button from an earlier state is refused, saying so.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.core.durations import format_duration
from bot.core.jobs.common import APPROVE, APPROVING, FORCE, FORCE_ACTIONS
from bot.core.people import Directory, roles_of

# Re-exported: callers say `machine.ButtonRef` (R.ButtonRef).
from bot.core.runs.buttons import ButtonRef as ButtonRef
from bot.core.runs.gates import Vote, covered, decide, live_votes, missing_roles
from bot.core.runs.plans import Gate, Plan, Step
from bot.errors import PermissionDenied, TransitionRefused

# The step and run states are records (the store keeps them); the machine speaks them too.
from bot.records import Approval as Approval
from bot.records import RunRow
from bot.records import RunState as RunState
from bot.records import StepRun as StepRun
from bot.records import StepState as StepState

STEP_TRANSITIONS: Mapping[StepState, frozenset[StepState]] = {
    StepState.PENDING: frozenset({StepState.AWAITING_APPROVAL, StepState.SKIPPED}),
    StepState.AWAITING_APPROVAL: frozenset({StepState.RUNNING, StepState.FAILED, StepState.SKIPPED}),
    StepState.RUNNING: frozenset({StepState.SUCCEEDED, StepState.FAILED, StepState.INTERRUPTED}),
    StepState.FAILED: frozenset({StepState.AWAITING_APPROVAL, StepState.SKIPPED}),
    StepState.INTERRUPTED: frozenset({StepState.AWAITING_APPROVAL, StepState.FAILED, StepState.SKIPPED}),
    StepState.SUCCEEDED: frozenset(),
    StepState.SKIPPED: frozenset(),
}
RUN_TRANSITIONS: Mapping[RunState, frozenset[RunState]] = {
    RunState.ACTIVE: frozenset({RunState.PAUSED, RunState.ABORTED, RunState.COMPLETED}),
    RunState.PAUSED: frozenset({RunState.ACTIVE, RunState.ABORTED}),
    RunState.ABORTED: frozenset(),
    RunState.COMPLETED: frozenset(),
}
FINISHED = frozenset({StepState.SUCCEEDED, StepState.SKIPPED})
#: What a failed (or interrupted) step's note keeps once the run is resumed: its gate opens again,
#: and the card, the skip and the run's end still say why it stopped (`failure_of`).
FAILED_BEFORE = "failed before: "
INTERRUPTED_BEFORE = "interrupted before: "
#: Between a skip's own words and the failure it went past, in a skipped step's note.
SKIPPED_AFTER = " · it had failed: "
#: The phase and decision of a vote to skip a failed step (`skip_vote`), kept with the approvals.
SKIP = "skip"

#: The phase of a vote to waive Inconclusive evidence (`evidence_waive_vote`): two people.
EVIDENCE_WAIVE = "evidence_waive"
#: How a run paused on Inconclusive evidence starts its reason (`pause_on_evidence`).
EVIDENCE_PAUSE = "evidence Inconclusive at "
#: Who may waive Inconclusive evidence: two people holding two different of these roles.
EVIDENCE_WAIVERS = ("primary", "shadow")

#: Who is mentioned when a gate waits too long: after escalate_after the roles the gate still
#: needs (`_needed`; the shadow when none can be told), then after twice that the coordinator.
ESCALATION_ROLES = ("shadow", "coordinator")


@dataclass(frozen=True, kw_only=True)
class Run:
    id: str
    plan: Plan
    state: RunState
    created_by: str
    created_at: datetime
    roster: Mapping[str, tuple[str, ...]]
    steps: tuple[StepRun, ...]
    approvals: tuple[Approval, ...] = ()
    #: Optimistic-concurrency version; the store bumps it on every committed change.
    version: int = 0
    reason: str = ""

    @classmethod
    def from_records(
        cls, row: RunRow, steps: Sequence[StepRun], approvals: Sequence[Approval], plan: Plan
    ) -> Run:
        """A stored run, whole: its header, its steps in order, its approvals, its plan."""
        return cls(
            id=row.id,
            plan=plan,
            state=RunState(row.state),
            created_by=row.created_by,
            created_at=row.created_at,
            roster={k: tuple(v) for k, v in row.roster.items()},
            steps=tuple(steps),
            approvals=tuple(approvals),
            version=row.version,
            reason=row.reason,
        )

    def step_run(self, step_id: str) -> StepRun:
        for s in self.steps:
            if s.step_id == step_id:
                return s
        raise TransitionRefused(f"this run has no step `{step_id}`")

    @property
    def current(self) -> StepRun | None:
        """The first step that is not finished (succeeded or skipped)."""
        for s in self.steps:
            if s.state not in FINISHED:
                return s
        return None

    def phase(self, sr: StepRun) -> str | None:
        """Which gate is open on this step now: "start", "done", or None."""
        if sr.state is StepState.AWAITING_APPROVAL:
            return "start"
        if sr.state is StepState.RUNNING and self.plan.step(sr.step_id).manual:
            return "done"
        return None

    def gate_for(self, sr: StepRun) -> Gate | None:
        phase = self.phase(sr)
        step = self.plan.step(sr.step_id)
        return step.gate if phase == "start" else step.done_gate if phase == "done" else None

    def votes(self, sr: StepRun, phase: str) -> list[Approval]:
        return [
            a
            for a in self.approvals
            if a.step_id == sr.step_id
            and a.phase == phase
            and a.epoch == sr.epoch
            and a.decision in APPROVING
        ]


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something that happened: audited, and shown on the card or in the thread."""

    kind: str
    step_id: str = ""
    actor: str = ""
    detail: str = ""
    roles: tuple[str, ...] = ()
    #: Extra words for the audit row only; `at`: a moment the thread shows as a Slack date (a window's
    #: end, when a timeout fell due).
    note: str = ""
    at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    run: Run
    events: tuple[Event, ...] = ()
    #: For a click: was it counted? If not, `message` says why (shown ephemerally).
    accepted: bool = True
    message: str = ""
    #: Actions the caller must now perform for this step (then call `action_finished`).
    run_actions: str = ""
    #: A destructive step's approval that needs a typed confirmation first.
    needs_confirmation: bool = False


# ---------------------------------------------------------------------------------------------
# Helpers


def refused(run: Run, step_id: str, actor: str, message: str) -> Outcome:
    """A refusal: the run unchanged, the reason said to the person, and a `refused` event on record."""
    return Outcome(
        run=run,
        accepted=False,
        message=message,
        events=(Event(kind="refused", step_id=step_id, actor=actor, detail=message),),
    )


def _set_step(run: Run, sr: StepRun, new: StepState, now: datetime, **changes: object) -> Run:
    if new not in STEP_TRANSITIONS[sr.state]:
        raise TransitionRefused(f"step `{sr.step_id}` cannot go from {sr.state} to {new}")
    updated = dataclasses.replace(sr, state=new, epoch=sr.epoch + 1, **changes)  # type: ignore[arg-type]
    if new is StepState.AWAITING_APPROVAL:
        updated = dataclasses.replace(updated, opened_at=now, escalations=0)
    if new is StepState.RUNNING:
        # The "done" gate of a plain step escalates from when the work started.
        updated = dataclasses.replace(updated, started_at=now, opened_at=now, escalations=0)
    if new in (StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED, StepState.INTERRUPTED):
        updated = dataclasses.replace(updated, finished_at=now)
    return _with_step(run, updated)


def _with_step(run: Run, new: StepRun) -> Run:
    """`run` with `new` in place of its step of the same id."""
    return dataclasses.replace(run, steps=tuple(new if s.step_id == new.step_id else s for s in run.steps))


def _set_run(run: Run, new: RunState, reason: str = "") -> Run:
    if new not in RUN_TRANSITIONS[run.state]:
        raise TransitionRefused(f"the run is {run.state}; it cannot become {new}")
    return dataclasses.replace(run, state=new, reason=reason or run.reason)


def _reactivated(run: Run) -> Run:
    """A paused run active again, the reason it paused for cleared."""
    return dataclasses.replace(_set_run(run, RunState.ACTIVE), reason="")


def _voted(
    run: Run,
    sr: StepRun,
    *,
    phase: str,
    decision: str,
    user_id: str,
    roles: Set[str],
    now: datetime,
    reason: str,
) -> tuple[Run, Approval]:
    """`run` with one more vote on step `sr` as it is now (its epoch), and that vote. The same
    person's earlier vote of that decision (one that expired: `decide` refuses a live one) is
    replaced: the store keeps one vote per person and decision on a gate state."""
    vote = Approval(
        step_id=sr.step_id,
        phase=phase,
        epoch=sr.epoch,
        user_id=user_id,
        roles=tuple(sorted(roles)),
        decision=decision,
        at=now,
        reason=reason,
    )
    kept = tuple(a for a in run.approvals if not _same_vote(a, vote))
    return dataclasses.replace(run, approvals=(*kept, vote)), vote


def _lapsed(gate: Gate, votes: Sequence[Vote], now: datetime, user_id: str) -> str:
    """What the thread says of the gate's votes that `expires:` let lapse: the clicker's own (so
    this one is given again) and others' (still missing unless given again)."""
    if gate.expires is None:
        return ""
    lapsed = [v for v in votes if v.at + gate.expires <= now]
    if not lapsed:
        return ""
    after = format_duration(gate.expires)
    said = [
        (
            "again: their own approval of"
            if v.user_id == user_id
            else f"the {' and '.join(sorted(v.roles))}'s approval of"
        )
        + f" {v.at.astimezone(UTC):%H:%M} UTC lapsed after {after}"
        for v in lapsed
    ]
    return "— " + "; ".join(said) + " (the gate's `expires:`)"


def _same_vote(a: Approval, b: Approval) -> bool:
    return (a.step_id, a.phase, a.epoch, a.user_id, a.decision) == (
        b.step_id,
        b.phase,
        b.epoch,
        b.user_id,
        b.decision,
    )


def _stopped(run: Run, new: RunState, kind: str, *, by: str, reason: str) -> Outcome:
    """The run paused or aborted by `by` for `reason` (`kind`: the event saying so)."""
    return Outcome(run=_set_run(run, new, reason), events=(Event(kind=kind, actor=by, detail=reason),))


def _require_going(run: Run, why: str = "") -> None:
    """Refuse a change to a run that has ended (`why`: what an ended run cannot take)."""
    if run.state in (RunState.ABORTED, RunState.COMPLETED):
        raise TransitionRefused(f"run {run.id} is {run.state}{why}")


def _open_next(run: Run, now: datetime, events: list[Event]) -> Run:
    """Open the gate of the next pending step, or complete the run."""
    nxt = run.current
    if nxt is None:
        events.append(Event(kind="run_completed"))
        return _set_run(run, RunState.COMPLETED)
    if nxt.state is StepState.PENDING:
        run = _set_step(run, nxt, StepState.AWAITING_APPROVAL, now)
        events.append(Event(kind="gate_opened", step_id=nxt.step_id, detail="start"))
    return run


# ---------------------------------------------------------------------------------------------
# Transitions


def new_run(run_id: str, plan: Plan, *, by: str, now: datetime) -> Outcome:
    run = Run(
        id=run_id,
        plan=plan,
        state=RunState.ACTIVE,
        created_by=by,
        created_at=now,
        roster=dict(plan.roster),
        steps=tuple(StepRun(step_id=s.id) for s in plan.steps),
    )
    events = [Event(kind="run_started", actor=by)]
    run = _open_next(run, now, events)
    return Outcome(run=run, events=tuple(events))


def click(
    run: Run,
    *,
    step_id: str,
    epoch: int,
    user_id: str,
    decision: str,
    directory: Directory,
    now: datetime,
    confirmation: str | None = None,
    reason: str = "",
    unmet: str = "",
) -> Outcome:
    """A gate button: approve or reject `step_id` as it was at `epoch`. Refusals change nothing.

    `unmet`: what the step's `done` still requires of its evidence (its PR not merged, its checks
    not green: `bot.core.runs.prs.unmet`), read by the caller; a "done" approval is refused with it."""

    refuse = functools.partial(refused, run, step_id, user_id)

    if run.state is RunState.PAUSED:
        return refuse(f"run {run.id} is paused; nothing can be approved until it is resumed")
    if run.state is not RunState.ACTIVE:
        # Ended for good: "until it is resumed" would send people to a resume that is refused.
        return refuse(
            f"run {run.id} is {run.state}: it has ended, and nothing in it can be approved any more"
        )
    try:
        sr = run.step_run(step_id)
    except TransitionRefused as exc:
        return refuse(exc.user_message)
    if sr.epoch != epoch:
        return refuse(
            f"this button is from an earlier state of step `{step_id}`; it is now "
            f"{sr.state.replace('_', ' ')} — use the buttons on its latest message"
        )
    gate = run.gate_for(sr)
    phase = run.phase(sr)
    if gate is None or phase is None:
        return refuse(f"step `{step_id}` is {sr.state.replace('_', ' ')}; it is not waiting for a decision")
    held = frozenset(roles_of(user_id, run.roster, directory))
    step = run.plan.step(step_id)
    if decision == FORCE:
        if phase != "start" or not offers_force(step):
            return refuse(f"step `{step_id}` has no force option: approve or reject it")
        if not reason.strip():
            return refuse("approving with force needs a reason: say why the budgets may be passed")
    elif decision not in (APPROVE, "reject"):
        return refuse(f"`{decision[:20]}` is not a decision on a gate")
    if decision == "reject":
        if not held & set(gate.roles):
            return refuse(f"this step needs {gate.describe()}; you are {_you(held)}")
        return _reject(run, sr, step, phase, user_id, held, now, reason or "rejected")
    votes = [Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at) for a in run.votes(sr, phase)]
    verdict = decide(
        gate,
        user_id=user_id,
        held=held,
        votes=votes,
        now=now,
        started_by=sr.started_by if phase == "done" else "",
    )
    if not verdict.accepted:
        return refuse(verdict.reason)
    if phase == "done" and unmet:
        return refuse(f"`{step_id}` cannot be confirmed done yet: {unmet}")
    if phase == "start" and step.destructive and confirmation != step.id:
        if confirmation is None:
            return Outcome(run=run, accepted=False, needs_confirmation=True, message="type the step id")
        return refuse(f"the confirmation did not match: type `{step.id}` exactly to approve this step")
    run, approval = _voted(
        run,
        sr,
        phase=phase,
        decision=decision,
        user_id=user_id,
        roles=held & set(gate.roles),
        now=now,
        reason=reason.strip() if decision == FORCE else "",
    )
    with_force = f"with force: {approval.reason}" if decision == FORCE else ""
    events = [
        Event(
            kind="approved",
            step_id=step_id,
            actor=user_id,
            detail=phase,
            roles=approval.roles,
            note=" ".join(n for n in (with_force, _lapsed(gate, votes, now, user_id)) if n),
        )
    ]
    if not verdict.satisfied:
        return Outcome(run=run, events=tuple(events))
    if phase == "start":
        given = run.votes(sr, phase)
        run = _set_step(run, sr, StepState.RUNNING, now, started_by=user_id)
        events.append(Event(kind="step_running", step_id=step_id, actor=user_id))
        forced = [a.user_id for a in given if a.decision == FORCE]
        if forced and len(forced) < len(given):
            # Force is the gate's only when every approval that opened it chose it: one person's
            # force would let a budget be passed on a single say-so.
            events.append(
                Event(
                    kind="force_declined",
                    step_id=step_id,
                    detail=f"force was chosen by {', '.join(forced)} only: the step evicts through the "
                    "Eviction API (force needs every approval of the gate)",
                )
            )
        if step.manual:
            events.append(Event(kind="gate_opened", step_id=step_id, detail="done"))
            return Outcome(run=run, events=tuple(events))
        return Outcome(run=run, events=tuple(events), run_actions=step_id)
    run = _set_step(run, run.step_run(step_id), StepState.SUCCEEDED, now)
    events.append(Event(kind="step_succeeded", step_id=step_id, actor=user_id))
    run = _open_next(run, now, events)
    return Outcome(run=run, events=tuple(events))


def offers_force(step: Step) -> bool:
    """Does this step's gate offer the force option (a `FORCE_ACTIONS` action that is no dry run)?"""
    return any(
        call.name in FORCE_ACTIONS
        and str(call.args.get("dry_run", "")).strip().lower() not in ("true", "yes", "1")
        for call in step.actions
    )


def _you(held: frozenset[str]) -> str:
    return "the " + " and the ".join(sorted(held)) if held else "not in this run's roster"


def _reject(
    run: Run,
    sr: StepRun,
    step: Step,
    phase: str,
    user_id: str,
    held: frozenset[str],
    now: datetime,
    reason: str,
) -> Outcome:
    run, _ = _voted(
        run, sr, phase=phase, decision="reject", user_id=user_id, roles=held, now=now, reason=reason
    )
    # At the "done" gate the work ran: its people report it failed, which is not a refused start.
    said = "reported failed" if phase == "done" else "rejected"
    events = [Event(kind="rejected", step_id=sr.step_id, actor=user_id, detail=reason, note=said)]
    return fail(run, run.step_run(sr.step_id), step, now, f"{said} by {user_id}: {reason}", events)


def fail(run: Run, sr: StepRun, step: Step, now: datetime, why: str, events: list[Event]) -> Outcome:
    """`sr` fails with `why` (after `events`): the run pauses, or aborts as the step's `on_failure`
    says; a run paused already stays paused, now on the failure."""
    run = _set_step(run, sr, StepState.FAILED, now, note=why)
    events.append(Event(kind="step_failed", step_id=sr.step_id, detail=why))
    if step.on_failure == "abort":
        run = _set_run(run, RunState.ABORTED, f"step {sr.step_id} failed: {why}")
        events.append(Event(kind="run_aborted", detail=run.reason))
    elif run.state is RunState.PAUSED:
        # Paused already (by hand, or on its evidence): it stays paused, now for the failure, which
        # its card and thread say (the step's end is never dropped for want of a transition).
        run = dataclasses.replace(run, reason=f"step {sr.step_id} failed: {why}")
        events.append(Event(kind="run_paused", detail=run.reason))
    else:
        run = _set_run(run, RunState.PAUSED, f"step {sr.step_id} failed: {why}")
        events.append(Event(kind="run_paused", detail=run.reason))
    return Outcome(run=run, events=tuple(events))


def action_finished(
    run: Run, *, step_id: str, epoch: int, ok: bool, detail: str, now: datetime, left_behind: str = ""
) -> Outcome:
    """The bot's actions for a running step ended (`epoch`: the step's when they started), leaving
    `left_behind` for people though they succeeded."""
    sr = run.step_run(step_id)
    if sr.state is not StepState.RUNNING or sr.epoch != epoch:
        raise TransitionRefused(f"step `{step_id}` is no longer running the actions that just finished")
    events: list[Event] = []
    if not ok:
        return fail(run, sr, run.plan.step(step_id), now, detail or "the action failed", events)
    run = _set_step(run, sr, StepState.SUCCEEDED, now, note=detail, left_behind=left_behind)
    events.append(Event(kind="step_succeeded", step_id=step_id, detail=detail))
    if run.state is RunState.ACTIVE:
        run = _open_next(run, now, events)
    return Outcome(run=run, events=tuple(events))


def pause(run: Run, *, by: str, reason: str, now: datetime) -> Outcome:
    return _stopped(run, RunState.PAUSED, "run_paused", by=by, reason=reason)


def pause_on_evidence(run: Run, *, step_id: str, epoch: int, why: str, now: datetime) -> Outcome:
    """A running step's evidence is Inconclusive (no data never passes): the run pauses with the
    reason, its step still running, until people Wait, Waive or Abort (`bot.core.runs.paused`).
    Nothing changes when the step moved on or the run is not active."""
    sr = run.step_run(step_id)
    if run.state is not RunState.ACTIVE or sr.state is not StepState.RUNNING or sr.epoch != epoch:
        return Outcome(run=run)
    return pause(run, by="", reason=f"{EVIDENCE_PAUSE}`{step_id}`: {why}", now=now)


def evidence_waive_votes(run: Run, sr: StepRun) -> list[Approval]:
    return [
        a
        for a in run.approvals
        if a.step_id == sr.step_id and a.phase == EVIDENCE_WAIVE and a.epoch == sr.epoch
    ]


def evidence_waive_vote(
    run: Run, *, step_id: str, epoch: int, user_id: str, directory: Directory, reason: str, now: datetime
) -> Outcome:
    """The Waive… button of a run paused on Inconclusive evidence: a vote, with a reason; the
    second person, in another of `EVIDENCE_WAIVERS`' roles, makes it count (`satisfied`: the run
    resumes and the step's job is told to pass on the people's word). Refusals change nothing."""
    refusal = paused_refusal(
        run, step_id=step_id, epoch=epoch, user_id=user_id, directory=directory, gate_roles=False
    )
    if refusal is not None:
        return refusal

    refuse = functools.partial(refused, run, step_id, user_id)

    if not run.reason.startswith(EVIDENCE_PAUSE):
        return refuse(f"run {run.id} did not pause on Inconclusive evidence")
    held = frozenset(roles_of(user_id, run.roster, directory)) & set(EVIDENCE_WAIVERS)
    who = " and ".join(f"the {r}" for r in EVIDENCE_WAIVERS)
    if not held:
        return refuse(
            f"waiving Inconclusive evidence needs {who}; you are {_you(frozenset(roles_of(user_id, run.roster, directory)))}"
        )
    cur = run.step_run(step_id)
    votes = evidence_waive_votes(run, cur)
    if any(v.user_id == user_id for v in votes):
        return refuse(
            f"you have already voted to waive the evidence of `{step_id}`; it needs a second person"
        )
    covered_roles = {r for v in votes for r in v.roles}
    if votes and not held - covered_roles:
        return refuse(f"the {', '.join(sorted(held))} has already voted to waive; it needs {who}")
    run, vote = _voted(
        run,
        cur,
        phase=EVIDENCE_WAIVE,
        decision=EVIDENCE_WAIVE,
        user_id=user_id,
        roles=held - covered_roles or held,
        now=now,
        reason=reason,
    )
    events = [
        Event(kind="evidence_waive_voted", step_id=step_id, actor=user_id, detail=reason, roles=vote.roles)
    ]
    if not votes:
        return Outcome(
            run=run,
            events=tuple(events),
            message=f"waiving needs {who}: a second person's vote makes it count",
        )
    run = _reactivated(run)
    events.append(Event(kind="run_resumed", actor=user_id, detail=f"evidence of `{step_id}` waived"))
    return Outcome(run=run, events=tuple(events), message="waived")


def resume(run: Run, *, by: str, now: datetime, reason: str = "") -> Outcome:
    """Resume a paused run; its current step gets a fresh gate (never re-run silently)."""
    run = _reactivated(run)
    events = [Event(kind="run_resumed", actor=by, detail=reason)]
    cur = run.current
    if cur is not None and cur.state in (StepState.FAILED, StepState.INTERRUPTED):
        # The fresh gate still says why the step stopped; a skip or the run's end reads it back.
        before = FAILED_BEFORE if cur.state is StepState.FAILED else INTERRUPTED_BEFORE
        run = _set_step(run, cur, StepState.AWAITING_APPROVAL, now, note=f"{before}{cur.note or cur.state}")
        events.append(Event(kind="gate_opened", step_id=cur.step_id, detail="start"))
    elif cur is None or cur.state is StepState.PENDING:
        # The run ended, or its stopped step was skipped while it was paused: the next gate opens.
        run = _open_next(run, now, events)
    elif run.phase(cur) is not None:
        # A gate open across the pause opens afresh (a new epoch): posted again at the thread's end,
        # the old message's buttons stale, the votes given before the pause not counted; its timeout
        # and escalations count from now (nobody could answer it while the run was paused).
        run = _with_step(run, dataclasses.replace(cur, epoch=cur.epoch + 1, opened_at=now, escalations=0))
    return Outcome(run=run, events=tuple(events))


def abort(run: Run, *, by: str, reason: str, now: datetime) -> Outcome:
    return _stopped(run, RunState.ABORTED, "run_aborted", by=by, reason=reason)


def _skippable(run: Run, step_id: str) -> StepRun:
    """`step_id` of a run still going, in a state it can be skipped from; else TransitionRefused."""
    _require_going(run)
    sr = run.step_run(step_id)
    if StepState.SKIPPED not in STEP_TRANSITIONS[sr.state]:
        raise TransitionRefused(
            f"step `{step_id}` is {sr.state.replace('_', ' ')}; only a step that is not running "
            "and not finished can be skipped"
        )
    return sr


def skip(run: Run, *, step_id: str, by: str, reason: str, now: datetime) -> Outcome:
    """Skip a step that is not running (a running action cannot be skipped: pause or abort)."""
    sr = _skippable(run, step_id)
    failure = failure_of(sr)
    after = f"{SKIPPED_AFTER}{failure}" if failure else ""
    run = _set_step(run, sr, StepState.SKIPPED, now, note=f"skipped by {by}: {reason}{after}")
    events = [Event(kind="step_skipped", step_id=step_id, actor=by, detail=reason)]
    if run.state is RunState.ACTIVE:
        run = _open_next(run, now, events)
    return Outcome(run=run, events=tuple(events))


def failure_of(sr: StepRun) -> str:
    """Why `sr` stopped, when it failed or was interrupted (now, or before a resume re-opened its
    gate); "" for a step that never did."""
    if sr.state is StepState.FAILED:
        return sr.note or "failed"
    if sr.state is StepState.INTERRUPTED:
        return f"interrupted: {sr.note}" if sr.note else "interrupted"
    if sr.state is StepState.SKIPPED and SKIPPED_AFTER in sr.note:
        return sr.note.split(SKIPPED_AFTER, 1)[1]
    if sr.note.startswith(FAILED_BEFORE):
        return sr.note[len(FAILED_BEFORE) :]
    if sr.note.startswith(INTERRUPTED_BEFORE):
        return f"interrupted: {sr.note[len(INTERRUPTED_BEFORE) :]}"
    return ""


def skip_vote(
    run: Run,
    *,
    step_id: str,
    epoch: int,
    user_id: str,
    directory: Directory,
    reason: str,
    now: datetime,
) -> Outcome:
    """The Skip… button of a paused run: a vote to skip its stopped step, counted as the step's own
    gate counts approvals (its roles; two people for `approve: [primary, shadow]`; one vote each).
    Once the gate is satisfied the run resumes past the step, with every voter's reason on record.
    Refusals change nothing."""

    refuse = functools.partial(refused, run, step_id, user_id)

    if run.state is not RunState.PAUSED:
        return refuse(f"run {run.id} is {run.state}; Skip… is for a paused run")
    cur = run.current
    if cur is None or cur.step_id != step_id or cur.epoch != epoch:
        return refuse(f"this button is from an earlier state of run {run.id}; use the buttons on its card")
    if StepState.SKIPPED not in STEP_TRANSITIONS[cur.state]:
        return refuse(f"step `{step_id}` is {cur.state.replace('_', ' ')}; it cannot be skipped")
    voted = _skip_voted(run, cur, user_id=user_id, directory=directory, reason=reason, now=now, resume=True)
    return refuse(voted) if isinstance(voted, str) else voted


def skip_step(
    run: Run, *, step_id: str, user_id: str, directory: Directory, reason: str, now: datetime
) -> Outcome:
    """`/upgrade skip`: a vote to skip a step that is not running, counted as the step's own gate
    counts approvals, as the paused card's Skip… is (four eyes stay four eyes). Once the gate is
    satisfied the step is skipped, every voter's reason on record; a paused run stays paused (its
    Resume opens the next gate). Refusals raise TransitionRefused."""
    sr = _skippable(run, step_id)
    voted = _skip_voted(run, sr, user_id=user_id, directory=directory, reason=reason, now=now, resume=False)
    if isinstance(voted, str):
        raise TransitionRefused(voted)
    return voted


def skip_needs(run: Run, step_id: str, now: datetime) -> str:
    """Who must still vote to skip `step_id` ("the shadow"; "" when no vote is pending)."""
    sr = run.step_run(step_id)
    gate = run.plan.step(step_id).gate
    votes = [Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at) for a in skip_votes(run, sr)]
    _, missing = covered(gate, live_votes(gate, votes, now))
    return " and ".join(missing) if votes else ""


def _skip_voted(
    run: Run, sr: StepRun, *, user_id: str, directory: Directory, reason: str, now: datetime, resume: bool
) -> str | Outcome:
    """One vote to skip `sr` (`_skip_counted`): a refusal's words, or the run with the vote and,
    once the gate is satisfied, the step skipped (a paused run resumed first, with `resume`)."""
    counted = _skip_counted(run, sr, user_id=user_id, directory=directory, reason=reason, now=now)
    if isinstance(counted, str):
        return counted
    run, events, by, why = counted
    if not by:
        return Outcome(run=run, events=tuple(events))
    if resume:
        run = _reactivated(run)
        events.append(Event(kind="run_resumed", actor=user_id, detail=f"to skip `{sr.step_id}`"))
    out = skip(run, step_id=sr.step_id, by=by, reason=why, now=now)
    # The audit names the person who made the skip count; the thread and the step's note every voter
    # ("by U1+U2", as a hand-off's "was …").
    voters = f"by {by}" if "+" in by else ""
    skipped = [
        dataclasses.replace(e, actor=user_id, note=voters) if e.kind == "step_skipped" else e
        for e in out.events
    ]
    return Outcome(run=out.run, events=(*events, *skipped))


def _skip_counted(
    run: Run, sr: StepRun, *, user_id: str, directory: Directory, reason: str, now: datetime
) -> str | tuple[Run, list[Event], str, str]:
    """One vote to skip `sr`, by the step's gate's rules: a refusal's words, or the run with the
    vote, its events, and — once the gate is satisfied — who skipped it (the voters, joined by
    "+") and why (their reasons); ("", "") while it still needs votes."""
    step_id = sr.step_id
    gate = run.plan.step(step_id).gate
    held = frozenset(roles_of(user_id, run.roster, directory))
    votes = [Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at) for a in skip_votes(run, sr)]
    verdict = decide(gate, user_id=user_id, held=held, votes=votes, now=now)
    if not verdict.accepted:
        # The gate's own rules, in the words of a skip.
        _, missing = covered(gate, live_votes(gate, votes, now))
        still = f"; it still needs {' and '.join(missing)}" if missing else ""
        if not held & set(gate.roles):
            return f"skipping `{step_id}` needs {gate.describe()}, as its gate does; you are {_you(held)}"
        if any(v.user_id == user_id for v in votes):
            return f"you have already voted to skip `{step_id}`{still}"
        return f"the {', '.join(sorted(held & set(gate.roles)))} has already voted to skip `{step_id}`{still}"
    run, vote = _voted(
        run,
        sr,
        phase=SKIP,
        decision=SKIP,
        user_id=user_id,
        roles=held & set(gate.roles),
        now=now,
        reason=reason,
    )
    events = [Event(kind="skip_voted", step_id=step_id, actor=user_id, detail=reason, roles=vote.roles)]
    if not verdict.satisfied:
        return run, events, "", ""
    voters = [*skip_votes(run, sr)]
    why = "; ".join(dict.fromkeys(v.reason for v in voters if v.reason)) or "skipped"
    by = voters[0].user_id if len(voters) == 1 else "+".join(v.user_id for v in voters)
    return run, events, by, why


def resume_click(
    run: Run, *, step_id: str, epoch: int, user_id: str, directory: Directory, now: datetime, reason: str = ""
) -> Outcome:
    """The Resume button of a paused run: someone holding a role of the stopped step's gate
    resumes it (the gate opens again, so nothing runs before that gate is approved as usual).
    Refusals change nothing."""
    refusal = paused_refusal(run, step_id=step_id, epoch=epoch, user_id=user_id, directory=directory)
    if refusal is not None:
        return refusal
    return resume(run, by=user_id, now=now, reason=reason or f"from the card, at `{step_id}`")


#: What a paused card's button (or an answer to Inconclusive evidence) does, in a refusal's words.
DOING = {"resume": "resuming", "wait": "waiting for fresh evidence on", "abort": "aborting"}


def not_the_gates(doing: str, step_id: str, gate: Gate, held: frozenset[str]) -> str:
    """A refusal naming what was tried (a key of `DOING`) and who may: "aborting `settle` is for…"."""
    anyone = " or ".join(f"the {r}" for r in gate.roles)
    hold = "holds" if len(gate.roles) == 1 else "hold"
    return f"{DOING[doing]} `{step_id}` is for {anyone}, who {hold} its gate; you are {_you(held)}"


def paused_refusal(
    run: Run,
    *,
    step_id: str,
    epoch: int,
    user_id: str,
    directory: Directory,
    gate_roles: bool = True,
    doing: str = "resume",
) -> Outcome | None:
    """Why a paused card's button may not be used by `user_id` now (None: it may): the run must
    be paused at that step as it was when the card was drawn, and (`gate_roles`) the person hold a
    role of its gate (Waive… has its own roles: `/upgrade waive`'s). A refusal names what the
    button does (`doing`)."""

    refuse = functools.partial(refused, run, step_id, user_id)

    if run.state is not RunState.PAUSED:
        return refuse(f"run {run.id} is {run.state}; this button is for a paused run")
    cur = run.current
    if cur is None or cur.step_id != step_id or cur.epoch != epoch:
        return refuse(f"this button is from an earlier state of run {run.id}; use the buttons on its card")
    gate = run.plan.step(step_id).gate
    held = frozenset(roles_of(user_id, run.roster, directory))
    if gate_roles and not held & set(gate.roles):
        return refuse(not_the_gates(doing, step_id, gate, held))
    return None


def skip_votes(run: Run, sr: StepRun) -> list[Approval]:
    """The votes to skip `sr` as it is now (its epoch): a vote for an earlier failure does not count."""
    return [a for a in run.approvals if a.step_id == sr.step_id and a.phase == SKIP and a.epoch == sr.epoch]


def window_ended(run: Run, *, end: datetime, now: datetime) -> Outcome:
    """A run going or paused past its window's end: an event for the thread, the card and the audit."""
    if (cur := run.current) is None or run.state not in (RunState.ACTIVE, RunState.PAUSED) or now < end:
        return Outcome(run=run)
    after = sum(1 for s in run.steps[run.steps.index(cur) + 1 :] if s.state not in FINISHED)  # as the card
    more = f" and {after} more step{'s' if after != 1 else ''} to go" if after else ", its last step"
    detail = f"with the run at `{cur.step_id}`{more}"
    event = Event(kind="window_ended", detail=detail, note=f"(the window ended {_dated(end)})", at=end)
    return Outcome(run=dataclasses.replace(run), events=(event,))


def note(run: Run, *, by: str, text: str, now: datetime) -> Outcome:
    """A note someone adds to the run's record (what they did outside the bot): an event for the
    thread and the audit log; the run itself does not change."""
    _require_going(run, "; notes go to a run that is still going")
    # A new Run value (equal to the old one) so the note is committed like any transition: the
    # version check orders it among the others and its thread line is written with the commit.
    return Outcome(run=dataclasses.replace(run), events=(Event(kind="note", actor=by, detail=text),))


#: A gate's timeout found due later than this fell due while no bot was ticking (the run ticker
#: runs every 20 s): it counts again rather than fail a step nobody could answer.
DOWN_AT_TIMEOUT = timedelta(minutes=2)

#: How an interrupted step's note begins (`recover`).
STOPPED_MID_ACTION = "the bot stopped while its action ran"
#: ... and a step whose run ended under its action (an abort): "the run was aborted while …".
STOPPED_BY_END = "the run"


def recover(run: Run, *, now: datetime, keep: frozenset[str] = frozenset()) -> Outcome:
    """After a restart: a step whose actions were running did not finish; it waits for a human.

    The step becomes `interrupted` and an active run pauses: `resume` re-opens the step's gate
    (fresh approvals before the action runs again), `skip` records that people finished it.
    """
    events: list[Event] = []
    ended = run.state in (RunState.ABORTED, RunState.COMPLETED)
    for sr in run.steps:
        # `keep`: steps whose long, read-only action (a watch) is still live resume instead.
        if sr.state is StepState.RUNNING and not run.plan.step(sr.step_id).manual and sr.step_id not in keep:
            if ended:
                # The abort stopped its action (or the bot died just after it): no crash to tell
                # the channel of, and no resume to offer a run that has ended.
                why = f"{STOPPED_BY_END} was {run.state} while its action ran"
                run = _set_step(run, sr, StepState.INTERRUPTED, now, note=why)
                events.append(Event(kind="step_stopped", step_id=sr.step_id, detail=why))
                continue
            why = f"{STOPPED_MID_ACTION}; resume to re-approve it, or skip it"
            run = _set_step(run, sr, StepState.INTERRUPTED, now, note=why)
            events.append(Event(kind="step_interrupted", step_id=sr.step_id, detail=why))
            if run.state is RunState.ACTIVE:
                run = _set_run(run, RunState.PAUSED, f"step {sr.step_id} was interrupted by a restart")
                events.append(Event(kind="run_paused", detail=run.reason))
    return Outcome(run=run, events=tuple(events))


def due(run: Run, *, now: datetime) -> Outcome:
    """Escalations and timeouts that are due at `now` for the open gate, if any."""
    cur = run.current
    if run.state is not RunState.ACTIVE or cur is None or run.phase(cur) is None or cur.opened_at is None:
        return Outcome(run=run)
    step = run.plan.step(cur.step_id)
    waited = now - cur.opened_at
    if step.timeout is not None and waited - step.timeout > DOWN_AT_TIMEOUT:
        # Found this late, the timeout fell due while no bot was ticking (down, or no leader):
        # nobody could answer a gate then, so its clock counts again from now, and says why.
        fell_due = cur.opened_at + step.timeout
        run = _with_step(run, dataclasses.replace(cur, opened_at=now))
        # The thread shows `at` as a Slack date (each reader's zone); the audit row, in UTC words.
        why = (
            "while the bot was not running: nobody could answer the gate then, so its "
            f"{format_duration(step.timeout)} counts again from now"
        )
        event = Event(
            kind="timeout_restarted",
            step_id=cur.step_id,
            detail=why,
            note=f"(its timeout fell due {_dated(fell_due)})",
            at=fell_due,
        )
        return Outcome(run=run, events=(event,))
    if step.timeout is not None and waited >= step.timeout:
        why = f"no decision within {format_duration(step.timeout)}"
        return fail(run, cur, step, now, why, [Event(kind="timed_out", step_id=cur.step_id, detail=why)])
    if step.escalate_after is None:
        return Outcome(run=run)
    levels = _escalations(run, cur, now)
    level = cur.escalations
    if level >= len(levels) or waited < step.escalate_after * (level + 1):
        return Outcome(run=run)
    roles = levels[level]
    run = _with_step(run, dataclasses.replace(cur, escalations=level + 1))
    return Outcome(
        run=run,
        events=(
            Event(
                kind="escalated",
                step_id=cur.step_id,
                detail="; ".join(f"{role}: {','.join(run.roster[role])}" for role in roles),
                roles=roles,
            ),
        ),
    )


def _escalations(run: Run, sr: StepRun, now: datetime) -> list[tuple[str, ...]]:
    """Whom each escalation of the open gate mentions: first the roles it still needs (those who
    must act; not someone who already approved), then the coordinator. A roster without them
    falls back to `ESCALATION_ROLES`."""
    first = _needed(run, sr, now) or tuple(r for r in ESCALATION_ROLES[:1] if r in run.roster)
    levels = [first] if first else []
    if "coordinator" in run.roster and "coordinator" not in first:
        levels.append(("coordinator",))
    return levels


def _needed(run: Run, sr: StepRun, now: datetime) -> tuple[str, ...]:
    """The roles of the open gate that no live vote covers yet, as far as the roster names them."""
    gate = run.gate_for(sr)
    phase = run.phase(sr)
    if gate is None or phase is None:
        return ()
    votes = [Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at) for a in run.votes(sr, phase)]
    return tuple(r for r in missing_roles(gate, live_votes(gate, votes, now)) if r in run.roster)


def _dated(moment: datetime) -> str:
    """A moment in a thread line that may be read days later: "Sat 27 Mar 21:00 UTC"."""
    return f"{moment.astimezone(UTC):%a %d %b %H:%M} UTC"


def next_due(run: Run) -> datetime | None:
    """When `due` may next have something to do (for a scheduler); None when nothing waits."""
    cur = run.current
    if run.state is not RunState.ACTIVE or cur is None or run.phase(cur) is None or cur.opened_at is None:
        return None
    step = run.plan.step(cur.step_id)
    times: list[datetime] = []
    if step.timeout is not None:
        times.append(cur.opened_at + step.timeout)
    levels = _escalations(run, cur, now=cur.opened_at)
    if step.escalate_after is not None and cur.escalations < len(levels):
        times.append(cur.opened_at + step.escalate_after * (cur.escalations + 1))
    return min(times) if times else None


def waiting_on(run: Run, sr: StepRun, now: datetime) -> str:
    """Who the open gate still needs, in words ("the shadow"), for the card."""
    gate = run.gate_for(sr)
    phase = run.phase(sr)
    if gate is None or phase is None:
        return ""
    votes = [Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at) for a in run.votes(sr, phase)]
    _, missing = covered(gate, live_votes(gate, votes, now))
    return " and ".join(missing)


def require_member(run: Run, user_id: str, directory: Directory, *, action: str) -> set[str]:
    """The roles `user_id` holds in this run's roster; PermissionDenied when none."""
    held = roles_of(user_id, run.roster, directory)
    if not held:
        raise PermissionDenied(f"{action} is for the people in run {run.id}'s roster; you are not in it")
    return held
