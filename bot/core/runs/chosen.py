"""What people chose past a safeguard on a run's steps, read from the run's votes: a gate approved
with force (every approval of the gate that started the step chose force: one person's force is
declined, `machine.approve`) and Inconclusive evidence waived (two people voted, with reasons,
`machine.evidence_waive_vote`). The card's finished step line and the completed announcement say
them as what they were, never as a plain success (the report reads the audit: `report.forced_past`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.jobs.common import APPROVING, FORCE
from bot.core.runs import machine as R

#: The card's and announcement's words for each choice.
FORCED = "approved with force"
WAIVED = "evidence waived"


@dataclass(frozen=True, kw_only=True)
class Chosen:
    """One choice past a safeguard on step `step_id`: what, by whom (user ids) and why (each
    person's reason, in the order they gave it)."""

    step_id: str
    what: str
    by: tuple[str, ...]
    reasons: tuple[str, ...]

    def text(self) -> str:
        """ "approved with force by U1 (why) and U2 (why)": ids, shown by the card's `people` filter."""
        said = [f"{u} ({r})" if r else u for u, r in zip(self.by, self.reasons, strict=True)]
        return f"{self.what} by {' and '.join(said)}"


def _by_epoch(votes: Sequence[R.Approval]) -> dict[int, list[R.Approval]]:
    out: dict[int, list[R.Approval]] = {}
    for v in votes:
        out.setdefault(v.epoch, []).append(v)
    return out


def chosen_of(run: R.Run, sr: R.StepRun) -> list[Chosen]:
    """The choices past a safeguard that let step `sr` go on: its start gate approved with force
    (the last gate it started from), its Inconclusive evidence waived (each time two people did)."""
    if sr.state in (R.StepState.PENDING, R.StepState.AWAITING_APPROVAL):
        return []
    mine = [a for a in run.approvals if a.step_id == sr.step_id]
    out: list[Chosen] = []
    starts = _by_epoch([a for a in mine if a.phase == "start" and a.decision in APPROVING])
    if starts:
        last = starts[max(starts)]
        if all(a.decision == FORCE for a in last):
            out.append(_chosen(sr.step_id, FORCED, last))
    for votes in _by_epoch([a for a in mine if a.phase == R.EVIDENCE_WAIVE]).values():
        if len(votes) >= 2:
            out.append(_chosen(sr.step_id, WAIVED, votes))
    return out


def _chosen(step_id: str, what: str, votes: Sequence[R.Approval]) -> Chosen:
    return Chosen(
        step_id=step_id,
        what=what,
        by=tuple(v.user_id for v in votes),
        reasons=tuple(" ".join(v.reason.split()) for v in votes),
    )


def run_chosen(run: R.Run) -> list[Chosen]:
    """Every choice past a safeguard in the run, in step order."""
    return [c for sr in run.steps for c in chosen_of(run, sr)]
