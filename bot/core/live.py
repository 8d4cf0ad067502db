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
from typing import Protocol


@dataclass(frozen=True, kw_only=True)
class LiveSection:
    """One long action's live view in the run card: a title and a few short lines (never a list of
    thousands of pods: counts, progress bars and the top few names)."""

    step_id: str
    title: str
    lines: tuple[str, ...] = ()
    #: When the section last changed (shown as a Slack date token; None when unknown).
    updated_at: datetime | None = None


class LiveSource(Protocol):
    """Gives the live sections of one run (each source: the watches, the cluster jobs)."""

    def __call__(self, run_id: str) -> Sequence[LiveSection]: ...
