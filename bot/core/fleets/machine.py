"""A fleet run: the parent state machine over its clusters' child runs. Pure: data in, data out.

The fleet walks its stages in order. Within the current stage it is in one *phase*:

    before ──(before gate approved, or none)──▶ running ──(every child ended)──▶ soaking
    soaking ──(soak elapsed, evidence passing all along)──▶ after ──(after gate approved)──▶ next stage

and after the last stage it is `completed`. Rules an SRE team expects of a fleet:
- a child starts only while the fleet is `active`, at most `max_concurrency` at a time, and only
  in the current stage: nothing in a later stage starts while an earlier one is unfinished;
- a stage with more failed clusters than its `failure_budget` pauses the fleet (the canary's
  budget is 0 unless it says otherwise, so a failed canary pauses it). `resume` is refused until
  the failures are skipped (`skip CLUSTER --reason`) or retried (`retry --failed`);
- evidence that fails during the soak pauses the fleet; `resume` starts the soak again from zero,
  since the time before the failure no longer says anything;
- the soak's start is stored, so a restart of the bot resumes the soak where it was;
- a child's start is committed (member `running` with its run id) before the run is created, so
  a crash between the two creates that run once at recovery, never twice.

`advance` is called on every tick and after every change; the verbs (`pause`, `resume`, `skip`,
`retry_failed`, `abort`, `approve`) are the people's side. Each returns an `Outcome` with the
events the service audits and posts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from bot.core.fleets.plan import FleetPlan, ResolvedStage
from bot.core.runs.gates import Vote, covered, decide, live_votes
from bot.core.runs.plans import Gate
from bot.records import FleetVoteRow

ACTIVE, PAUSED, COMPLETED, ABORTED = "active", "paused", "completed", "aborted"
ENDED_FLEET = (COMPLETED, ABORTED)
BEFORE, RUNNING, SOAKING, AFTER = "before", "running", "soaking", "after"
PENDING, STARTED, SUCCEEDED, FAILED, SKIPPED = "pending", "running", "succeeded", "failed", "skipped"
ENDED_MEMBER = (SUCCEEDED, FAILED, SKIPPED)


@dataclass(frozen=True, kw_only=True)
class Member:
    """One cluster of the fleet and its child run."""

    cluster: str
    stage: int
    state: str = PENDING
    #: The child run (set when it is started; a retry gives a new one).
    run_id: str = ""
    attempts: int = 0
    #: Why it failed or was skipped, in words.
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class ChildStatus:
    """What the fleet sees of a child run: running, succeeded or failed, and why."""

    state: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Fleet:
    id: str
    plan: FleetPlan
    stages: tuple[ResolvedStage, ...]
    state: str
    members: tuple[Member, ...]
    stage: int = 0
    phase: str = BEFORE
    soak_started_at: datetime | None = None
    #: The approvals of its stages' gates, as the store keeps them.
    approvals: tuple[FleetVoteRow, ...] = ()
    reason: str = ""
    created_by: str = ""
    created_at: datetime | None = None
    version: int = 0

    @property
    def current(self) -> ResolvedStage:
        return self.stages[min(self.stage, len(self.stages) - 1)]

    def members_of(self, stage: int) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.stage == stage)

    def member(self, cluster: str) -> Member | None:
        return next((m for m in self.members if m.cluster == cluster), None)

    def failed(self, stage: int) -> tuple[Member, ...]:
        return tuple(m for m in self.members_of(stage) if m.state == FAILED)

    def gate(self, which: str, stage: int | None = None) -> Gate | None:
        s = self.stages[self.stage if stage is None else stage].stage
        return s.before if which == BEFORE else s.after

    def votes(self, which: str, stage: int | None = None) -> list[Vote]:
        stage = self.stage if stage is None else stage
        return [
            Vote(user_id=a.user_id, roles=frozenset(a.roles), at=a.at)
            for a in self.approvals
            if a.stage == stage and a.gate == which
        ]

    def waiting_for(self, now: datetime) -> tuple[str, list[str]] | None:
        """(`before`/`after`, what the current gate still needs) while the fleet waits on people."""
        if self.state != ACTIVE or self.phase not in (BEFORE, AFTER):
            return None
        gate = self.gate(self.phase)
        if gate is None:
            return None
        ok, missing = covered(gate, live_votes(gate, self.votes(self.phase), now))
        return None if ok else (self.phase, missing)


@dataclass(frozen=True, kw_only=True)
class FleetEvent:
    kind: str
    detail: str = ""
    actor: str = ""
    cluster: str = ""
    stage: str = ""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    fleet: Fleet
    events: tuple[FleetEvent, ...] = ()
    #: Clusters whose child run is to be created now (their member is already `running`).
    starts: tuple[str, ...] = ()
    #: A refusal, in words (nothing changed).
    refused: str = ""


def new_fleet(
    fleet_id: str, plan: FleetPlan, stages: Sequence[ResolvedStage], *, by: str, now: datetime
) -> Fleet:
    members = tuple(
        Member(cluster=c, stage=i) for i, resolved in enumerate(stages) for c in resolved.clusters
    )
    return Fleet(
        id=fleet_id,
        plan=plan,
        stages=tuple(stages),
        state=ACTIVE,
        members=members,
        created_by=by,
        created_at=now,
    )


def _set_member(fleet: Fleet, cluster: str, **changes: object) -> Fleet:
    return replace(
        fleet,
        members=tuple(replace(m, **changes) if m.cluster == cluster else m for m in fleet.members),  # type: ignore[arg-type]
    )


def _over_budget(fleet: Fleet) -> str:
    """Why the current stage is over its failure budget ("" when it is not)."""
    failed = fleet.failed(fleet.stage)
    budget = fleet.current.stage.failure_budget
    if len(failed) <= budget:
        return ""
    names = ", ".join(f"{m.cluster} ({m.reason or 'failed'})" for m in failed)
    what = (
        "the canary failed"
        if fleet.stage == 0
        else f"stage {fleet.current.stage.name} is over its failure budget"
    )
    return f"{what}: {names}; {len(failed)} failed, {budget} allowed"


def advance(
    fleet: Fleet,
    children: Mapping[str, ChildStatus],
    *,
    now: datetime,
    evidence_failure: str = "",
    new_run_id: Callable[[], str],
) -> Outcome:
    """Move the fleet as far as it can go now.

    `children`: the status of each running member's child run, by cluster. `evidence_failure`: why
    the soak's evidence fails now ("" when it passes or the fleet is not soaking)."""
    events: list[FleetEvent] = []
    starts: list[str] = []
    for m in fleet.members:
        status = children.get(m.cluster)
        if m.state == STARTED and status is not None and status.state in (SUCCEEDED, FAILED):
            fleet = _set_member(fleet, m.cluster, state=status.state, reason=status.detail)
            events.append(
                FleetEvent(
                    kind=f"cluster_{status.state}",
                    cluster=m.cluster,
                    stage=fleet.stages[m.stage].stage.name,
                    detail=status.detail,
                )
            )
    if fleet.state in ENDED_FLEET:
        return Outcome(fleet=fleet, events=tuple(events))
    if fleet.state == ACTIVE and (why := _over_budget(fleet)):
        fleet = replace(fleet, state=PAUSED, reason=why)
        events.append(FleetEvent(kind="fleet_paused", detail=why, stage=fleet.current.stage.name))
    if fleet.state != ACTIVE:
        return Outcome(fleet=fleet, events=tuple(events))

    for _ in range(4 * len(fleet.stages) + 4):  # each pass moves at least one phase, or stops
        stage = fleet.current.stage
        if fleet.phase == BEFORE:
            gate = stage.before
            if gate is not None and not covered(gate, live_votes(gate, fleet.votes(BEFORE), now))[0]:
                break
            fleet = replace(fleet, phase=RUNNING)
            events.append(FleetEvent(kind="stage_started", stage=stage.name))
            continue
        if fleet.phase == RUNNING:
            members = fleet.members_of(fleet.stage)
            running = sum(1 for m in members if m.state == STARTED)
            room = fleet.current.concurrency - running
            for m in members:
                if room <= 0:
                    break
                if m.state == PENDING:
                    run_id = new_run_id()
                    fleet = _set_member(
                        fleet, m.cluster, state=STARTED, run_id=run_id, attempts=m.attempts + 1
                    )
                    starts.append(m.cluster)
                    events.append(
                        FleetEvent(kind="cluster_started", cluster=m.cluster, stage=stage.name, detail=run_id)
                    )
                    room -= 1
            if all(m.state in ENDED_MEMBER for m in fleet.members_of(fleet.stage)):
                if stage.soak and not _upgraded(fleet):
                    # Evidence judged on no cluster proves nothing: people decide, never a "pass".
                    why = _nothing_soaked(fleet)
                    fleet = replace(fleet, phase=SOAKING, state=PAUSED, reason=why, soak_started_at=None)
                    events.append(FleetEvent(kind="fleet_paused", detail=why, stage=stage.name))
                    break
                fleet = replace(fleet, phase=SOAKING, soak_started_at=now)
                if stage.soak:
                    events.append(FleetEvent(kind="soak_started", stage=stage.name, detail=str(stage.soak)))
                continue
            break
        if fleet.phase == SOAKING:
            if stage.soak and fleet.soak_started_at is not None and not _upgraded(fleet):
                why = _nothing_soaked(fleet)  # as above, for a soak begun before a cluster left it
                fleet = replace(fleet, state=PAUSED, reason=why, soak_started_at=None)
                events.append(FleetEvent(kind="fleet_paused", detail=why, stage=stage.name))
                break
            if stage.soak:
                if evidence_failure:
                    why = f"the soak of stage {stage.name} failed: {evidence_failure}"
                    fleet = replace(fleet, state=PAUSED, reason=why, soak_started_at=None)
                    events.append(FleetEvent(kind="fleet_paused", detail=why, stage=stage.name))
                    break
                started = fleet.soak_started_at or now
                if now - started < stage.soak:
                    break
                events.append(FleetEvent(kind="soak_passed", stage=stage.name))
            fleet = replace(fleet, phase=AFTER)
            continue
        if fleet.phase == AFTER:
            gate = stage.after
            if gate is not None and not covered(gate, live_votes(gate, fleet.votes(AFTER), now))[0]:
                break
            events.append(FleetEvent(kind="stage_done", stage=stage.name))
            if fleet.stage + 1 >= len(fleet.stages):
                fleet = replace(fleet, state=COMPLETED, reason="")
                events.append(FleetEvent(kind="fleet_completed", detail=loose_ends(fleet)))
                break
            fleet = replace(fleet, stage=fleet.stage + 1, phase=BEFORE, soak_started_at=None)
            continue
        break
    return Outcome(fleet=fleet, events=tuple(events), starts=tuple(starts))


#: How a child run's `ChildStatus.detail` begins when it completed with failed steps skipped.
COMPLETED_WITH = "completed with "
#: How a child's detail counts its steps that succeeded leaving work for people, and its failed
#: steps people skipped, in its run's words (`runs.paused.Ending.honest`: "1 step not all done",
#: "2 failed steps skipped"); a fleet stored before said "1 step(s) not all done" and "2 failed
#: step(s) skipped", which these find as well.
NOT_ALL_DONE = "not all done"
WENT_PAST = "failed step"
#: How a fleet paused on a soak with no upgraded cluster to judge begins its reason.
NOTHING_SOAKED = "no cluster of stage"


def _upgraded(fleet: Fleet) -> list[Member]:
    """The current stage's clusters whose child run completed: what its soak's evidence is about."""
    return [m for m in fleet.members_of(fleet.stage) if m.state == SUCCEEDED]


def _nothing_soaked(fleet: Fleet) -> str:
    stage = fleet.current.stage
    members = ", ".join(
        f"{m.cluster} {m.state}" + (f" ({m.reason})" if m.reason else "")
        for m in fleet.members_of(fleet.stage)
    )
    return (
        f"{NOTHING_SOAKED} {stage.name} was upgraded ({members}), so its soak has nothing to judge; "
        "`fleet resume` goes on without it, `fleet abort` stops the fleet"
    )


def with_skipped_failures(member: Member) -> bool:
    """A cluster whose child run completed only because people skipped failed steps of it, or with
    steps that succeeded leaving work for people (`NOT_ALL_DONE`)."""
    return member.state == SUCCEEDED and member.reason.startswith(COMPLETED_WITH)


def loose_ends(fleet: Fleet) -> str:
    """What a fleet's end leaves undone, in words ("" when every cluster completed cleanly):
    "1 failed (c-dev1), 2 skipped (c-ci, c-lab1), 1 went past failed steps (agora-ci)"."""
    groups = (
        ("failed", [m.cluster for m in fleet.members if m.state == FAILED]),
        ("skipped", [m.cluster for m in fleet.members if m.state == SKIPPED]),
        (
            "went past failed steps",
            [m.cluster for m in fleet.members if with_skipped_failures(m) and WENT_PAST in m.reason],
        ),
        (
            "with steps not all done",
            [m.cluster for m in fleet.members if with_skipped_failures(m) and NOT_ALL_DONE in m.reason],
        ),
        ("never started", [m.cluster for m in fleet.members if m.state == PENDING]),
    )
    return ", ".join(f"{len(names)} {what} ({', '.join(names)})" for what, names in groups if names)


def soaking_with_evidence(fleet: Fleet) -> tuple[str, ...]:
    """The evidence to judge now: the current stage's, while it soaks (else nothing)."""
    if fleet.state == ACTIVE and fleet.phase == SOAKING and fleet.current.stage.soak:
        return fleet.current.stage.evidence
    return ()


# ---------------------------------------------------------------------------------------------
# The fleet card's buttons

#: Button action id → what it asks: approve the gate the fleet waits on, pause, resume, carry the
#: canary's waivers to the later clusters.
BUTTONS = {
    "fleet_approve": "approve",
    "fleet_pause": "pause",
    "fleet_resume": "resume",
    "fleet_carry": "carry",
}
#: fleet id | stage index | mark, each bounded; ASCII digits only (as a run's `ButtonRef`).
_FLEET_BUTTON = re.compile(r"(F[0-9A-F]{1,12})\|([0-9]{1,4})\|(before|after|active|paused|carry)", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class FleetButton:
    """What a fleet card's button carries: the fleet, the stage and what the card showed when it
    was drawn (the gate it waited on, the fleet's state, or the carry offer), so a click on a
    card drawn before the fleet moved is answered as stale instead of acting on the new state."""

    fleet_id: str
    stage: int
    mark: str
    decision: str = "approve"

    def encode(self) -> str:
        return f"{self.fleet_id}|{self.stage}|{self.mark}"

    @classmethod
    def decode(cls, value: str, decision: str) -> FleetButton | None:
        """None for anything `encode` does not make (a button value comes from outside)."""
        match = _FLEET_BUTTON.fullmatch(value) if len(value) <= 100 and decision else None
        if match is None:
            return None
        return cls(fleet_id=match[1], stage=int(match[2]), mark=match[3], decision=decision)


def buttons(fleet: Fleet, now: datetime, *, offer: bool) -> list[FleetButton]:
    """The buttons the card offers now: Approve while a gate waits on people, Carry while the
    canary's waivers are on offer, Pause while active, Resume while paused (and within budget)."""
    out = []
    waiting = fleet.waiting_for(now)
    if waiting is not None:
        out.append(FleetButton(fleet_id=fleet.id, stage=fleet.stage, mark=waiting[0], decision="approve"))
    if offer and fleet.state not in ENDED_FLEET:
        out.append(FleetButton(fleet_id=fleet.id, stage=fleet.stage, mark="carry", decision="carry"))
    if fleet.state == ACTIVE:
        out.append(FleetButton(fleet_id=fleet.id, stage=fleet.stage, mark=ACTIVE, decision="pause"))
    elif fleet.state == PAUSED and not _over_budget(fleet):
        # Over its budget, Resume would be refused: the card says to skip or retry instead.
        out.append(FleetButton(fleet_id=fleet.id, stage=fleet.stage, mark=PAUSED, decision="resume"))
    return out


def over_budget_next(fleet: Fleet) -> str:
    """What people can do with a fleet paused over its stage's failure budget ("" otherwise)."""
    if fleet.state != PAUSED or not _over_budget(fleet):
        return ""
    return (
        "Skip a failed cluster (`/upgrade fleet skip CLUSTER --reason …`) or run them again "
        "(`/upgrade fleet retry --failed`); Resume returns once the stage is within its budget"
    )


def stale(fleet: Fleet, button: FleetButton, now: datetime, *, offer: bool) -> str:
    """Why `button` no longer fits the fleet ("" when the card still offers it): the fleet moved
    to another stage, its gate closed, its state changed, or the offer went."""
    if button.fleet_id != fleet.id:
        return f"this button is for fleet {button.fleet_id}, not {fleet.id}"
    offered = {(b.stage, b.mark, b.decision) for b in buttons(fleet, now, offer=offer)}
    if (button.stage, button.mark, button.decision) in offered:
        return ""
    if fleet.state in ENDED_FLEET:
        now_is = f"{fleet.state}"
    else:
        now_is = f"{fleet.state}, stage {fleet.stage + 1} `{fleet.current.stage.name}`, {fleet.phase}"
    return (
        f"this button is from an earlier state of fleet {fleet.id}; it is now {now_is} "
        "— use the buttons on the fleet card"
    )


# ---------------------------------------------------------------------------------------------
# The people's side


def _refuse(fleet: Fleet, why: str) -> Outcome:
    return Outcome(fleet=fleet, refused=why)


def approve(fleet: Fleet, *, user_id: str, held: frozenset[str], now: datetime) -> Outcome:
    """An approval of the gate the fleet waits on (the current stage's `before` or `after`)."""
    if fleet.state != ACTIVE:
        return _refuse(fleet, f"the fleet is {fleet.state}; no gate is open")
    if fleet.phase not in (BEFORE, AFTER) or fleet.gate(fleet.phase) is None:
        return _refuse(fleet, f"stage {fleet.current.stage.name} is {fleet.phase}; no gate is open")
    which = fleet.phase
    gate = fleet.gate(which)
    assert gate is not None
    # Four eyes: whoever started the fleet cannot alone let it past a stage.
    verdict = decide(
        gate,
        user_id=user_id,
        held=held,
        votes=fleet.votes(which),
        now=now,
        started_by=fleet.created_by if which == AFTER else "",
    )
    if not verdict.accepted:
        return _refuse(
            fleet,
            verdict.reason.replace("this step", f"the {which} gate of stage {fleet.current.stage.name}"),
        )
    vote = FleetVoteRow(
        fleet_id=fleet.id,
        stage=fleet.stage,
        gate=which,
        user_id=user_id,
        roles=tuple(sorted(held & set(gate.roles))),
        at=now,
    )
    fleet = replace(fleet, approvals=(*fleet.approvals, vote))
    return Outcome(
        fleet=fleet,
        events=(
            FleetEvent(
                kind="gate_approved",
                actor=user_id,
                stage=fleet.current.stage.name,
                detail=f"{which} gate" + (" (satisfied)" if verdict.satisfied else ""),
            ),
        ),
    )


def pause(fleet: Fleet, *, actor: str, reason: str) -> Outcome:
    if fleet.state != ACTIVE:
        return _refuse(fleet, f"the fleet is {fleet.state}, not active")
    why = f"paused by {actor}" + (f": {reason}" if reason else "")
    # Nothing judges a paused fleet's evidence, so its soak's clock stops: time nobody watched is not
    # soaked (the card said "…, passing" all through a pause), and `resume` soaks again from zero, as
    # after a failed soak.
    return Outcome(
        fleet=replace(
            fleet,
            state=PAUSED,
            reason=why,
            soak_started_at=None if fleet.phase == SOAKING else fleet.soak_started_at,
        ),
        events=(FleetEvent(kind="fleet_paused", actor=actor, detail=why, stage=fleet.current.stage.name),),
    )


def resume(fleet: Fleet, *, actor: str, now: datetime) -> Outcome:
    if fleet.state != PAUSED:
        return _refuse(fleet, f"the fleet is {fleet.state}, not paused")
    if why := _over_budget(fleet):
        return _refuse(
            fleet,
            f"{why}. Skip them (`fleet skip CLUSTER --reason …`) or retry them (`fleet retry --failed`) first",
        )
    if fleet.phase == SOAKING and fleet.reason.startswith(NOTHING_SOAKED) and not _upgraded(fleet):
        # People go on knowing the soak had nothing to judge: it is skipped, and says so.
        stage = fleet.current.stage.name
        return Outcome(
            fleet=replace(fleet, state=ACTIVE, reason="", phase=AFTER, soak_started_at=None),
            events=(
                FleetEvent(kind="fleet_resumed", actor=actor, stage=stage),
                FleetEvent(
                    kind="soak_skipped", actor=actor, stage=stage, detail="no cluster of it was upgraded"
                ),
            ),
        )
    soak_restarted = fleet.phase == SOAKING and fleet.soak_started_at is None
    fleet = replace(
        fleet, state=ACTIVE, reason="", soak_started_at=now if soak_restarted else fleet.soak_started_at
    )
    events = [FleetEvent(kind="fleet_resumed", actor=actor, stage=fleet.current.stage.name)]
    if soak_restarted:
        events.append(
            FleetEvent(kind="soak_started", stage=fleet.current.stage.name, detail="again, from zero")
        )
    return Outcome(fleet=fleet, events=tuple(events))


def skip(fleet: Fleet, *, cluster: str, actor: str, reason: str) -> Outcome:
    """Leave a failed or not yet started cluster out of the fleet, with the reason (audited)."""
    if fleet.state in ENDED_FLEET:
        return _refuse(fleet, f"the fleet is {fleet.state}")
    if not reason.strip():
        return _refuse(fleet, "say why: `fleet skip CLUSTER --reason …`")
    member = fleet.member(cluster)
    if member is None:
        names = ", ".join(m.cluster for m in fleet.members)
        return _refuse(fleet, f"`{cluster}` is not in this fleet (its clusters: {names})")
    if member.state not in (FAILED, PENDING):
        return _refuse(
            fleet,
            f"{cluster} is {member.state}; only a failed or pending cluster can be skipped"
            + (" (abort its run first)" if member.state == STARTED else ""),
        )
    if member.stage < fleet.stage:
        return _refuse(fleet, f"{cluster}'s stage is over")
    fleet = _set_member(fleet, cluster, state=SKIPPED, reason=reason.strip())
    return Outcome(
        fleet=fleet,
        events=(
            FleetEvent(
                kind="cluster_skipped",
                actor=actor,
                cluster=cluster,
                stage=fleet.stages[member.stage].stage.name,
                detail=reason.strip(),
            ),
        ),
    )


def retry_failed(fleet: Fleet, *, actor: str) -> Outcome:
    """The current stage's failed clusters run again (a new child each, on the pinned plan)."""
    if fleet.state in ENDED_FLEET:
        return _refuse(fleet, f"the fleet is {fleet.state}")
    failed = fleet.failed(fleet.stage)
    if not failed:
        return _refuse(fleet, f"no cluster of stage {fleet.current.stage.name} has failed")
    events = []
    for m in failed:
        fleet = _set_member(fleet, m.cluster, state=PENDING, run_id="", reason="")
        events.append(
            FleetEvent(kind="cluster_retried", actor=actor, cluster=m.cluster, stage=fleet.current.stage.name)
        )
    if (
        fleet.state == PAUSED
        and not _over_budget(fleet)
        and fleet.reason.startswith(("the canary", "stage "))
    ):
        fleet = replace(fleet, state=ACTIVE, reason="")
        events.append(FleetEvent(kind="fleet_resumed", actor=actor, stage=fleet.current.stage.name))
    return Outcome(fleet=fleet, events=tuple(events))


def abort(fleet: Fleet, *, actor: str, reason: str) -> Outcome:
    if fleet.state in ENDED_FLEET:
        return _refuse(fleet, f"the fleet is already {fleet.state}")
    why = f"aborted by {actor}" + (f": {reason}" if reason else "")
    return Outcome(
        fleet=replace(fleet, state=ABORTED, reason=why),
        events=(FleetEvent(kind="fleet_aborted", actor=actor, detail=why),),
    )


def unreachable(fleet: Fleet, *, cluster: str, why: str = "") -> Outcome:
    """A cluster whose API server did not answer at its turn, before its child run was created.

    With `skip_unreachable` it is skipped, the reason on record. Without it the fleet pauses
    naming the cluster and why, and the cluster waits, pending: `resume` tries it again (its
    API server is asked again at its turn), `skip CLUSTER --reason` leaves it out."""
    member = fleet.member(cluster)
    if member is None or member.state != STARTED:
        return _refuse(fleet, f"{cluster} is not starting")
    stage = fleet.stages[member.stage].stage.name
    said = f": {why}" if why else ""
    if fleet.plan.skip_unreachable:
        fleet = _set_member(fleet, cluster, state=SKIPPED, run_id="", reason=f"unreachable at its turn{said}")
        event = FleetEvent(
            kind="cluster_skipped",
            cluster=cluster,
            stage=stage,
            detail=f"unreachable at its turn (skip_unreachable){said}",
        )
        return Outcome(fleet=fleet, events=(event,))
    reason = f"{cluster} is unreachable{said}"
    fleet = _set_member(fleet, cluster, state=PENDING, run_id="", reason=reason)
    if fleet.state == ACTIVE:
        fleet = replace(fleet, state=PAUSED, reason=reason)
    return Outcome(
        fleet=fleet,
        events=(
            FleetEvent(kind="cluster_unreachable", cluster=cluster, stage=stage, detail=why),
            FleetEvent(kind="fleet_paused", stage=stage, detail=reason),
        ),
    )
