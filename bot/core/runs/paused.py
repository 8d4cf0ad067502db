"""What a paused run says, and how a run ends: the card's pause section and its honest ending.

A paused card says why the run paused, who may move it on, and offers the buttons for it:
- **Resume** re-opens the stopped step's gate (nothing re-runs until it is approved again): one
  person holding a role of that gate;
- **Skip…** asks for a reason and counts as the step's own gate counts (its roles; two people for
  `approve: [primary, shadow]`): `machine.skip_vote`;
- **Waive…**, where Required findings of a `check` step caused the pause, asks for the finding,
  a duration and a reason and follows `/upgrade waive`'s rules (asked by one of the action
  approvers; a Required finding's waiver waits for a second role to confirm it).

Why a run paused is decided by `PAUSE_KINDS`, tried in order on the stopped step; the first that
recognises it wins. A new kind of pause is one more
function in that tuple and one more line in the card template's `why` words.

A run paused on **Inconclusive evidence** (its step still running: the `alerts` job got no
trustworthy answer) offers instead: **Wait** (check again: one person holding a role of the step's
gate), **Waive…** (two people, the primary and the shadow, each with a reason, audited: the step
passes on their word), **Abort** (the step fails; the run pauses on the failure as usual).

A run that completed past failed steps is not a success: `ending` names each failed step that was
skipped, who skipped it and why, and the findings those steps left open; the card, the thread,
the completed announcement and `rehearse`'s last line say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.actions.check import required_ids
from bot.core.kube.owners import action
from bot.core.runs import machine as R

#: The button action ids of a paused card.
RESUME, SKIP, WAIVE = "paused_resume", "paused_skip", "paused_waive"
#: ... and of one paused on Inconclusive evidence: check again, waive (two people), abort the step.
WAIT, EVIDENCE_WAIVE, ABORT = "paused_wait", "paused_evidence_waive", "paused_abort"
#: The evidence pause's kind (the alerts job's choice keys start with it).
EVIDENCE = "evidence_inconclusive"


@dataclass(frozen=True, kw_only=True)
class PauseCause:
    """Why a run is paused: `kind` ("finding", "failed", "interrupted", "by_person"), the step it
    stopped at, the words for the card, and the Required finding ids a Waive… may accept."""

    kind: str
    step_id: str
    why: str
    findings: tuple[str, ...] = ()


#: One kind of pause: the cause when it recognises the stopped step, else None.
PauseKind = Callable[[R.Run, R.StepRun], PauseCause | None]


def _evidence(run: R.Run, sr: R.StepRun) -> PauseCause | None:
    # The step still runs: its evidence job asks people (`machine.pause_on_evidence`).
    if sr.state is not R.StepState.RUNNING or not run.reason.startswith(R.EVIDENCE_PAUSE):
        return None
    why = run.reason.split(": ", 1)[1] if ": " in run.reason else run.reason
    return PauseCause(kind=EVIDENCE, step_id=sr.step_id, why=why)


def _finding(run: R.Run, sr: R.StepRun) -> PauseCause | None:
    # A `check` step that failed on Required findings (not one a person rejected: that is "failed").
    if sr.state is not R.StepState.FAILED or not any(
        c.name == "check" for c in run.plan.step(sr.step_id).actions
    ):
        return None
    ids = required_ids(sr.note)
    if not ids:
        return None
    return PauseCause(kind="finding", step_id=sr.step_id, why=sr.note, findings=ids)


def _failed(run: R.Run, sr: R.StepRun) -> PauseCause | None:
    if sr.state is not R.StepState.FAILED:
        return None
    return PauseCause(kind="failed", step_id=sr.step_id, why=sr.note or "its action failed")


def _interrupted(run: R.Run, sr: R.StepRun) -> PauseCause | None:
    if sr.state is not R.StepState.INTERRUPTED:
        return None
    return PauseCause(kind="interrupted", step_id=sr.step_id, why=sr.note or "the bot stopped while it ran")


def _not_started(run: R.Run, sr: R.StepRun) -> PauseCause | None:
    # The step it stopped at was skipped while the run was paused: the next has not begun.
    if sr.state is not R.StepState.PENDING:
        return None
    skipped = [
        (s.finished_at, s.step_id) for s in run.steps if s.state is R.StepState.SKIPPED and s.finished_at
    ]
    why = f"`{max(skipped)[1]}` was skipped while the run was paused" if skipped else run.reason
    return PauseCause(kind="not_started", step_id=sr.step_id, why=why)


#: The kinds of pause, tried in order.
PAUSE_KINDS: tuple[PauseKind, ...] = (_evidence, _finding, _failed, _interrupted, _not_started)


def pause_cause(run: R.Run, kinds: Sequence[PauseKind] = PAUSE_KINDS) -> PauseCause | None:
    """Why `run` is paused (None when it is not): the first kind that recognises its stopped step;
    else someone paused it (`/upgrade pause`), and the run's reason says why."""
    cur = run.current
    if run.state is not R.RunState.PAUSED or cur is None:
        return None
    for kind in kinds:
        cause = kind(run, cur)
        if cause is not None:
            return cause
    return PauseCause(kind="by_person", step_id=cur.step_id, why=run.reason)


def _people(run: R.Run, roles: Sequence[str]) -> list[dict[str, object]]:
    return [{"role": role, "people": list(run.roster.get(role, ()))} for role in roles]


def paused_view(
    run: R.Run, *, waive_roles: Sequence[str] = ("primary", "shadow")
) -> dict[str, object] | None:
    """The card's pause section: the cause, who may resume, skip and waive (roles with their
    people), whether the step can be skipped, and the buttons' value. None unless paused."""
    cause = pause_cause(run)
    if cause is None:
        return None
    cur = run.step_run(cause.step_id)
    gate = run.plan.step(cause.step_id).gate
    votes = R.skip_votes(run, cur)
    return {
        "cause": cause,
        "step": run.plan.step(cause.step_id),
        "value": R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch).encode(),
        "resume": _people(run, gate.roles),
        "skip": _people(run, gate.roles),
        # One person for an `any_of` gate; the gate's own count otherwise (four eyes).
        "skip_rule": gate.describe() if gate.kind != "any_of" else "",
        "skippable": R.StepState.SKIPPED in R.STEP_TRANSITIONS[cur.state],
        "skip_votes": [{"user": v.user_id, "reason": v.reason} for v in votes],
        "waive": _people(run, waive_roles) if cause.findings else [],
        "findings": list(cause.findings),
        # Inconclusive evidence: Wait / Waive… (two people) / Abort, instead of Resume / Skip….
        "evidence": cause.kind == EVIDENCE,
        "evidence_waive": _people(run, R.EVIDENCE_WAIVERS),
        "evidence_votes": [{"user": v.user_id, "reason": v.reason} for v in R.evidence_waive_votes(run, cur)],
    }


@dataclass(frozen=True, kw_only=True)
class SkippedFailure:
    """A step the run went past after it failed: who skipped it, why, and what had failed."""

    step_id: str
    title: str
    by: str
    reason: str
    failure: str


def skipped_failures(run: R.Run) -> list[SkippedFailure]:
    """The steps that failed (or were interrupted) and were skipped, in the plan's order."""
    out = []
    for sr in run.steps:
        if sr.state is not R.StepState.SKIPPED or R.SKIPPED_AFTER not in sr.note:
            continue
        head, failure = sr.note.split(R.SKIPPED_AFTER, 1)
        match = _SKIPPED_BY.match(head)
        by, reason = (match[1], match[2]) if match else ("", head)
        out.append(
            SkippedFailure(
                step_id=sr.step_id,
                title=run.plan.step(sr.step_id).title,
                by=by,
                reason=reason,
                failure=failure,
            )
        )
    return out


#: A skipped step's note as `machine.skip_step` writes it: who skipped it, and why.
_SKIPPED_BY = re.compile(r"skipped by (\S+): (.*)", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class Ending:
    """How a completed run ended: the failed steps it went past and the findings they left open."""

    skipped: tuple[SkippedFailure, ...]
    #: Finding id → the failed steps that named it (a check's Required ids, a known issue's id).
    findings: Mapping[str, tuple[str, ...]]
    #: GitOps owners a step of the run suspended or paused and none resumed, each with the action
    #: that resumes it: they do not reconcile (nor revert a drift, nor deploy) until then.
    held: tuple[str, ...] = ()
    #: (step id, what it left for people) of each step that succeeded without doing all it was
    #: asked (a drain that skipped nodes: still cordoned), in the plan's order.
    left: tuple[tuple[str, str], ...] = ()

    @property
    def honest(self) -> str:
        """The words for the run's end: "completed", "completed with N failed steps skipped", "…
        and M steps not all done"."""
        n, m = len(self.skipped), len(self.left)
        said = [f"{n} failed step{'s' if n != 1 else ''} skipped"] if n else []
        said += [f"{m} step{'s' if m != 1 else ''} not all done"] if m else []
        return "completed with " + " and ".join(said) if said else "completed"


def ending(run: R.Run) -> Ending:
    """What a run's end must say (meaningful once it completed; any state reads)."""
    skipped = tuple(skipped_failures(run))
    findings: dict[str, list[str]] = {}
    for s in skipped:
        for fid in _finding_ids(s.failure):
            findings.setdefault(fid, []).append(s.step_id)
    left = tuple(
        (sr.step_id, sr.left_behind)
        for sr in run.steps
        if sr.state is R.StepState.SUCCEEDED and sr.left_behind
    )
    return Ending(
        skipped=skipped, findings={k: tuple(v) for k, v in findings.items()}, held=_held(run), left=left
    )


#: The owner's-path actions that hold an owner, and the one that lets it go, by the argument they name it by.
_HOLDS = {"flux-suspend": ("flux-resume", "object"), "argocd-pause": ("argocd-resume", "application")}
_RELEASES = {resume: hold for hold, (resume, _) in _HOLDS.items()}


def _held(run: R.Run) -> tuple[str, ...]:
    """`/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"`
    (whole, as people type it: `action`) for each owner a succeeded step of the run suspended or paused and no later succeeded step
    resumed, in the order they were held."""
    held: dict[tuple[str, str], str] = {}
    for sr in run.steps:
        if sr.state is not R.StepState.SUCCEEDED:
            continue
        for call in run.plan.step(sr.step_id).actions:
            if call.name in _HOLDS:
                resume, arg = _HOLDS[call.name]
                name = str(call.args.get(arg, ""))
                held[(call.name, name)] = action(f"{resume} {arg}={name}", cluster=run.plan.cluster)
            elif call.name in _RELEASES:
                arg = _HOLDS[_RELEASES[call.name]][1]
                held.pop((_RELEASES[call.name], str(call.args.get(arg, ""))), None)
    return tuple(held.values())


def _finding_ids(failure: str) -> tuple[str, ...]:
    """The finding ids a failure's words name: a check's Required ids, or the known issues (KI…)
    a job or a watch explained the failure with."""
    ids = list(required_ids(failure))
    ids.extend(word for word in _KNOWN_ISSUE.findall(failure) if word not in ids)
    return tuple(ids)


#: A known-issue rule's id as the jobs and the watch quote it ("— KI004 Vault-injected pod …").
_KNOWN_ISSUE = re.compile(r"\b(KI[0-9]{3,})\b")
