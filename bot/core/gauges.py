"""What is happening now, read from the database when /metrics is scraped: runs in progress, gates
open and how long the oldest has waited, nodes the bot holds cordoned, cluster jobs running.

Counters say what happened; these say what is. They are read from the store rather than kept in
memory, so every replica, a restarted one included, reports the same numbers (a dashboard takes
`max` over the replicas, not `sum`), and nothing has to be recounted after a failover. The
leader gauge is not here: whether this replica leads is its own state (`Telemetry.leadership`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from bot.adapters.store import Store
from bot.records import RunState, StepState

#: Runs in progress: the states a run can be in before it ends.
IN_PROGRESS = (RunState.ACTIVE.value, RunState.PAUSED.value)
#: At most this many runs in progress are read (more in flight at once would be a runaway).
MAX_RUNS = 500


@dataclass(frozen=True, kw_only=True)
class Now:
    #: Runs in progress by state (`active`, `paused`), each present.
    runs: dict[str, int]
    #: Gates waiting for people (steps awaiting approval in runs in progress).
    open_gates: int
    #: How long the oldest open gate has waited (0 when none is open).
    oldest_gate_seconds: float
    #: Nodes the runs in progress cordoned and did not uncordon since.
    cordoned_nodes: int
    #: Cluster jobs being driven (`live`), by kind.
    jobs: dict[str, int] = field(default_factory=dict)


def read_now(store: Store, now: datetime) -> Now:
    runs = dict.fromkeys(IN_PROGRESS, 0)
    open_gates, oldest, cordoned = 0, 0.0, 0
    for row in store.runs(states=IN_PROGRESS, limit=MAX_RUNS):
        runs[row.state] = runs.get(row.state, 0) + 1
        found = store.run_rows(row.id)
        if found is None:
            continue
        for step in found[1]:
            if step.state is StepState.AWAITING_APPROVAL:
                open_gates += 1
                if step.opened_at is not None:
                    oldest = max(oldest, (now - step.opened_at).total_seconds())
        cordoned += len(_cordoned(store, row.id))
    jobs = Counter(job.kind for job in store.jobs(states=("live",), limit=1000) if not job.dry_run)
    return Now(
        runs=runs, open_gates=open_gates, oldest_gate_seconds=oldest, cordoned_nodes=cordoned, jobs=dict(jobs)
    )


def _cordoned(store: Store, run_id: str) -> set[str]:
    """The nodes a run's jobs cordoned and no uncordon of it gave back (as `abort`'s offer counts)."""
    nodes: set[str] = set()
    for row in store.jobs(states=("live", "interrupted", "done"), run_id=run_id, limit=500):
        if not row.progress or row.dry_run:
            continue
        progress = json.loads(row.progress)
        if row.kind == "uncordon":
            nodes -= {str(n) for n in progress.get("uncordoned", [])}
        else:
            nodes |= {str(n) for n in progress.get("cordoned", [])}
    return nodes
