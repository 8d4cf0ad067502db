"""A gate's dry run, read once when the gate opens and kept with it (issue 23).

The run's cards ask `for_gate` before they post the gate of a step that changes the cluster. The
first call for a gate (a step at an epoch) reads the cluster (`bot.core.jobs.preview`) and keeps
the result in the database; every later call — the card edits after each click, the catch-up after
a restart, another replica — gets the kept one, so the gate message never changes under the
people approving it and the cluster is read once per gate. Two processes reading at the same
moment both read; the first to keep it wins and both show that one.

It runs where the run service publishes (a worker, the triggers door, a job's driver), never on a
thread that acknowledges Slack. A cluster that cannot be reached is kept as a one-line reason:
the gate still works, and says why it shows no dry run.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.adapters.store import Store
from bot.core.jobs import preview
from bot.core.jobs.base import JobRegistry
from bot.core.runs import machine as R
from bot.errors import BotError

log = logging.getLogger(__name__)


class GateDryRuns:
    """Reads (once) and keeps the dry run of each gate whose step changes the cluster."""

    def __init__(
        self,
        *,
        store: Store,
        jobs: JobRegistry,
        connect: Callable[[str], Any],
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.jobs = jobs
        #: Cluster name (as a plan names it) → the kube adapter; closed after the reading.
        self.connect = connect
        self.clock = clock

    def for_gate(self, run: R.Run, sr: R.StepRun) -> dict[str, Any] | None:
        """The dry run of the open start gate of `sr`, read now if it was never read; None for a
        step that changes nothing in the cluster (or a gate that is not a start gate)."""
        if run.phase(sr) != "start":
            return None
        calls = preview.changes_cluster(run.plan.step(sr.step_id).actions)
        if not calls:
            return None
        kept = self.store.gate_dry_run(run_id=run.id, step_id=sr.step_id, epoch=sr.epoch)
        if kept is not None:
            loaded: dict[str, Any] = json.loads(kept)
            return loaded
        # A resumed step continues its interrupted job from its stored progress: its dry run says so.
        earlier = self.store.job_of_step(run.id, sr.step_id)
        resumed = (
            {earlier.kind: json.loads(earlier.progress)}
            if earlier is not None and earlier.state != "done" and earlier.progress
            else {}
        )
        body = self._read(run.plan.cluster, calls, resumed)
        if not self.store.save_gate_dry_run(
            run_id=run.id, step_id=sr.step_id, epoch=sr.epoch, at=self.clock(), body=json.dumps(body)
        ):
            # Another worker kept one first: show theirs, the one every other reader shows.
            kept = self.store.gate_dry_run(run_id=run.id, step_id=sr.step_id, epoch=sr.epoch)
            if kept is not None:
                body = json.loads(kept)
        log.info(
            "dry run of %s/%s (epoch %s) read: %s", run.id, sr.step_id, sr.epoch, body.get("error") or "ok"
        )
        return body

    def _read(
        self, cluster_name: str, calls: list[Any], resumed: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        now = self.clock()
        try:
            cluster = self.connect(cluster_name)
            with contextlib.closing(cluster):
                return preview.read(
                    cluster, calls, self.jobs, now=now, resumed=resumed, cluster_name=cluster_name
                )
        except BotError as exc:
            log.warning("dry run on %s could not be read: %s", cluster_name, exc.user_message)
            return preview.failed(now, exc.user_message)
        except Exception:
            log.exception("dry run on %s failed", cluster_name)
            return preview.failed(now, "an internal error while reading the cluster (the bot's log has it)")
