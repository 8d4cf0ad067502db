"""Live sections of a run's card: what a long action (a watch, a drain, a restart) shows while it
runs, in the run's own card rather than a second one.

A long action's driver keeps its section's lines up to date in the database; the run card's
renderer asks every registered `LiveSource` for the sections of the run it renders. The card is
edited through the same coalescing path as every card edit, so a busy drain does not exceed Slack's
budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from bot.records import FileAttachment

if TYPE_CHECKING:
    from bot.core.audit import Who


@dataclass(frozen=True, kw_only=True)
class LiveSection:
    """One long action's live view in the run card: a title and a few short lines (never a list of
    thousands of pods: counts, progress bars and the top few names)."""

    step_id: str
    title: str
    lines: tuple[str, ...] = ()
    #: When the section last changed (shown as a Slack date token; None when unknown).
    updated_at: datetime | None = None
    #: The action was interrupted (its driver stopped): `resume` continues it while the run goes on.
    interrupted: bool = False
    #: Not an action running but what one left for people (nodes left cordoned after an abort).
    left: bool = False
    #: Whose answer left it so (a Slack user id, shown as a mention), for a `left` one.
    by: str = ""


@dataclass(frozen=True)
class EvidenceAnswer:
    """The run's verdict on an answer to its step's Inconclusive evidence (`StepReports.answer_evidence`):
    `counts`, the job gets it now and records `text` as its reason (a waiver's: every voter's); else
    `text` says what it still needs (a first vote to waive)."""

    counts: bool
    text: str


class LiveSource(Protocol):
    """Gives the live sections of one run (each source: the watches, the cluster jobs)."""

    def __call__(self, run_id: str) -> Sequence[LiveSection]: ...


# -- the ports between the runs and their long actions (the assembly ties them) ------------------


class StepReports(Protocol):
    """What a long action (a cluster job, a watch) reports back to the run whose step it is: the
    runs implement it (`bot.core.runs.service.RunService`)."""

    def finish_long(
        self,
        run_id: str,
        step_id: str,
        *,
        ok: bool,
        detail: str,
        files: tuple[FileAttachment, ...] = (),
        left_behind: str = "",
    ) -> object:
        """The long action ended: commit the step (safe to call twice); `files` go with its line
        in the thread (a GitOps action's backup of the manifest it changed); `left_behind`, what
        an action that succeeded left for people (`StepRun.left_behind`)."""

    def interrupt_step(self, run_id: str, step_id: str, *, epoch: int) -> object:
        """Its driver died under the running step: the step waits for people."""

    def publish_run(self, run_id: str) -> None:
        """Its live section changed: bring the run's card up to date."""

    def succeeds_with_open_findings(self, run_id: str, step_id: str) -> bool:
        """Whether the step's plan says a target reached with a known issue still open succeeds."""

    def pause_on_evidence(self, run_id: str, step_id: str, *, epoch: int, why: str) -> object:
        """Its evidence is Inconclusive: the run pauses (the step still running) and asks people."""

    def answer_evidence(
        self,
        run_id: str,
        step_id: str,
        *,
        epoch: int,
        option: str,
        user_id: str,
        reason: str,
        who: Who | None = None,
    ) -> EvidenceAnswer:
        """Someone answers its Inconclusive evidence (`wait`, `waive` or `abort`), through any door:
        the run's rules decide (who may; two people to waive) and the run resumes when it counts.
        `who`: the click or command it came through (for the audit). A UserError says why not."""


class LongActions(Protocol):
    """What the runs need of their long actions (`bot.core.runs.long.StepLongActions`)."""

    def live(self, run_id: str, step_id: str) -> bool:
        """The step's long action is still live: a restart resumes the step."""

    def driven(self, run_id: str, step_id: str) -> bool:
        """A cluster job drives the step on the leader (its own driver watches over it)."""

    def sections(self, run_id: str) -> Sequence[LiveSection]:
        """The live sections of the run's card."""
