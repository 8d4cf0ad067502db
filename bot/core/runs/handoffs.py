"""Hand-offs: a role of a run given to someone else for that run (`/upgrade handoff`), refused when
it would leave a gate still to pass unable to pass. A transition of the run like the state
machine's (`bot.core.runs.machine`), kept apart from it for its own checks."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime

from bot.core.runs.machine import FINISHED, Event, Outcome, Run, StepState, _require_going
from bot.core.runs.plansteps import people_of
from bot.errors import PermissionDenied, TransitionRefused


def handoff(run: Run, *, role: str, user_id: str, by: str, now: datetime, via_group: str = "") -> Outcome:
    """Give `role` to `user_id` for this run only; the plan's roster is unchanged. A holder hands
    over their own part (the role's other holders keep it); the coordinator, holding none of it,
    replaces its holders, and the thread names them. `via_group`: the user group of the role's
    holders `by` is a member of (Slack's to say): a member hands the role on beside the group,
    which keeps it (its membership is not the bot's to change). Refused when a gate still to pass
    could then never pass (`_left_stuck`)."""
    _require_going(run)
    if role not in run.roster:
        raise TransitionRefused(f"this run has no role `{role}` (roles: {', '.join(sorted(run.roster))})")
    holders = run.roster[role]
    coordinators = run.roster.get("coordinator", ())
    if via_group and via_group in holders and by not in holders and by not in coordinators:
        if user_id in holders:
            raise TransitionRefused(f"{_named(user_id)} already holds the {role} in this run")
        roster = {**run.roster, role: (*holders, user_id)}
        if stuck := _left_stuck(run, roster, user_id):
            raise TransitionRefused(f"{stuck}; hand the {role} to someone else")
        note = f"beside {via_group}"
        return Outcome(
            run=dataclasses.replace(run, roster=roster),
            events=(Event(kind="handoff", actor=by, detail=user_id, roles=(role,), note=note),),
        )
    if coordinators and by not in holders and by not in coordinators:
        # A role changes hands by its holder's word or the coordinator's, never a third person's.
        raise PermissionDenied(
            f"only the {role} or the coordinator may hand the {role} over "
            f"({', '.join(_named(u) for u in (*holders, *coordinators))})"
        )
    if user_id in holders:
        raise TransitionRefused(f"{_named(user_id)} already holds the {role} in this run")
    kept = tuple(u for u in holders if u != by) if by in holders else ()
    roster = {**run.roster, role: (*kept, user_id)}
    if stuck := _left_stuck(run, roster, user_id):
        raise TransitionRefused(f"{stuck}; hand the {role} to someone else")
    run = dataclasses.replace(run, roster=roster)
    gone = [u for u in holders if u not in kept]
    # `detail` is the new holder (templates mention it); `note` who no longer holds the role.
    return Outcome(
        run=run,
        events=(
            Event(kind="handoff", actor=by, detail=user_id, roles=(role,), note=f"was {','.join(gone)}"),
        ),
    )


def _named(entry: str) -> str:
    """A roster entry in a refusal (shown as plain text): a user's or a user group's id."""
    return f"user group {entry}" if entry.startswith("S") else entry


def _left_stuck(run: Run, roster: Mapping[str, tuple[str, ...]], new: str) -> str:
    """Why a gate still to pass could never pass with `roster`, in words; "" when each still can.
    User groups may hold anyone, so a gate with one is never short. A gate is stuck when it needs
    more different people than its roles now hold (an `approve` gate's roles, a quorum's count);
    when the one person who may confirm a started plain step done is the one who started it (four
    eyes); or when `new` already approved the open gate under another of its roles."""
    for sr in run.steps:
        if sr.state in FINISHED:
            continue
        step = run.plan.step(sr.step_id)
        for gate in (step.gate, step.done_gate):
            people, groups = people_of(gate, roster)
            if groups:
                continue
            need = len(gate.roles) if gate.kind == "approve" else gate.count if gate.kind == "quorum" else 1
            if len(people) < need:
                return f"`{sr.step_id}`'s gate ({gate.describe()}) could then never pass: it needs {need} different people"
        confirmers = {u for r in step.done_gate.roles for u in roster.get(r, ())}
        if (
            sr.state is StepState.RUNNING
            and step.manual
            and step.done_gate.kind == "any_of"
            and confirmers == {sr.started_by}
        ):
            return (
                f"`{sr.step_id}` could then never be confirmed done: {sr.started_by} started it and would be the "
                "only one able to confirm it (four eyes)"
            )
    cur = run.current
    phase = run.phase(cur) if cur is not None else None
    if cur is not None and phase is not None:
        open_gate = run.gate_for(cur)
        voted = [a for a in run.votes(cur, phase) if a.user_id == new]
        if open_gate is not None and open_gate.kind != "any_of" and voted:
            return (
                f"{new} already approved `{cur.step_id}` as the {', '.join(voted[0].roles)}, so could not "
                f"also count for another of its roles (four eyes)"
            )
    return ""
