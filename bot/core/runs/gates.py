"""Gate decisions: may this person's click count, and is the gate now satisfied?

Pure functions over plain data, with the time passed in. The rules an SRE team expects:
- only people holding one of the gate's roles may decide; anyone else is told which roles the
  step needs and which they hold;
- one person holding two roles counts once: `approve: [primary, shadow]` needs two different
  people, found by matching approvers to roles (so the order of clicks does not matter);
- four-eyes: whoever started a step (their approval set it running) cannot be the only person
  confirming it is done;
- approvals may expire (`expires:` on the gate): old ones stop counting and may be given again;
- a click that adds nothing (a second approval by the same person, or a role already covered)
  is refused with the reason, so a double click never counts twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.core.runs.plans import Gate


@dataclass(frozen=True, kw_only=True)
class Vote:
    """One recorded approval as the gate sees it: who, which of their roles count, when."""

    user_id: str
    roles: frozenset[str]
    at: datetime


@dataclass(frozen=True, kw_only=True)
class Verdict:
    accepted: bool
    reason: str = ""
    #: True when, with this vote, the gate is satisfied.
    satisfied: bool = False


def live_votes(gate: Gate, votes: Iterable[Vote], now: datetime) -> list[Vote]:
    """Votes that still count: not expired, and only the roles this gate asks for."""
    out: list[Vote] = []
    for vote in votes:
        if gate.expires is not None and vote.at + gate.expires <= now:
            continue
        roles = vote.roles & set(gate.roles)
        if roles:
            out.append(Vote(user_id=vote.user_id, roles=frozenset(roles), at=vote.at))
    return out


def _matching(roles: Sequence[str], people: Mapping[str, frozenset[str]]) -> dict[str, str]:
    """Assign distinct people to roles (bipartite matching by augmenting paths); role → user."""
    owner: dict[str, str] = {}  # role → user

    def place(user: str, seen: set[str]) -> bool:
        for role in roles:
            if role in people[user] and role not in seen:
                seen.add(role)
                if role not in owner or place(owner[role], seen):
                    owner[role] = user
                    return True
        return False

    for user in people:
        place(user, set())
    return owner


def _roles_by_person(votes: Sequence[Vote]) -> dict[str, frozenset[str]]:
    """Each voter's roles, over all their votes."""
    people: dict[str, frozenset[str]] = {}
    for vote in votes:
        people[vote.user_id] = people.get(vote.user_id, frozenset()) | vote.roles
    return people


def missing_roles(gate: Gate, votes: Sequence[Vote]) -> tuple[str, ...]:
    """The gate's roles that `votes` do not cover yet: an `approve` gate's uncovered roles (one
    person counts for one), every role of an unmet `any_of`, an unmet quorum's role."""
    people = _roles_by_person(votes)
    if gate.kind == "approve":
        owner = _matching(gate.roles, people)
        return tuple(r for r in gate.roles if r not in owner)
    return () if covered(gate, votes)[0] else tuple(gate.roles)


def covered(gate: Gate, votes: Sequence[Vote]) -> tuple[bool, list[str]]:
    """(satisfied, what is still missing, in words). Ignores four-eyes; see `decide`."""
    people = _roles_by_person(votes)
    if gate.kind == "approve":
        owner = _matching(gate.roles, people)
        missing = [f"the {r}" for r in gate.roles if r not in owner]
        return not missing, missing
    if gate.kind == "any_of":
        ok = any(people.values())
        return ok, [] if ok else [" or ".join(f"the {r}" for r in gate.roles)]
    have = sum(1 for roles in people.values() if gate.roles[0] in roles)
    left = gate.count - have
    return left <= 0, [] if left <= 0 else [f"{left} more {gate.roles[0]}"]


def describe_roles(held: Iterable[str]) -> str:
    names = sorted(held)
    if not names:
        return "not in this run's roster"
    return "the " + " and the ".join(names)


def decide(
    gate: Gate,
    *,
    user_id: str,
    held: frozenset[str],
    votes: Sequence[Vote],
    now: datetime,
    started_by: str = "",
) -> Verdict:
    """May `user_id` (holding `held` roles in the run's roster) approve now?"""
    current = live_votes(gate, votes, now)
    useful = held & set(gate.roles)
    if not useful:
        return Verdict(
            accepted=False,
            reason=f"this step needs {gate.describe()}; you are {describe_roles(held)}",
        )
    if any(v.user_id == user_id for v in current):
        _, missing = covered(gate, current)
        still = f"; it still needs {' and '.join(missing)}" if missing else ""
        return Verdict(accepted=False, reason=f"you have already approved this step{still}")
    before_ok, before_missing = covered(gate, current)
    after = [*current, Vote(user_id=user_id, roles=frozenset(useful), at=now)]
    after_ok, after_missing = covered(gate, after)
    if not before_ok and before_missing == after_missing and gate.kind == "approve":
        # The roles this person holds are already covered by others: one person, one count.
        taken = ", ".join(sorted(useful))
        return Verdict(
            accepted=False,
            reason=f"the {taken} approval is already given; this step still needs {' and '.join(after_missing)}",
        )
    if after_ok and started_by and {v.user_id for v in after} == {started_by}:
        return Verdict(
            accepted=False,
            reason=f"four eyes: you started this step, so someone else in {gate.describe()} must confirm it",
        )
    return Verdict(accepted=True, satisfied=after_ok)
