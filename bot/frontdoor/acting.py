"""Driving cluster jobs: the threads behind `bot.core.jobs.service` (started by the triggers door).

Long actions run where the timers and watches run, never on the command workers: the click that
approves a drain only stores the job; the duty engine's scan (`bot.core.duties`: a triggers
interval job on the leader, and at once when a job is started, resumed or answered) finds it and
starts a `JobDriver` thread. `JobDuty` is the jobs' kind of duty. A scan, for every live job:
- nobody drives it (just started, or resumed): claim it and drive it;
- its driver is gone (a crash, a deposed leader: no heartbeat for `STALE_AFTER`), or it is ours
  but our driver thread is not alive: interrupt it — never continue a mutation silently; its step
  becomes interrupted and waits for people (`resume` continues the same job from its progress);
- it is driven by a live process: leave it.
A driver calls `JobService.advance` until the job ends or is no longer ours, waiting between ticks
as long as the job asks (woken early when people answer its question) and refreshing its heartbeat
meanwhile. Every store write runs in the fence of the triggers job that started the driver, so a
deposed leader writes nothing; the engine stops every driver at once when the replica follows.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from bot.core.duties import Driver
from bot.core.jobs.service import HEARTBEAT_SECONDS, JobService, subject
from bot.frontdoor.serviceduty import ServiceDuty
from bot.records import JobRow

log = logging.getLogger(__name__)

JOBS = "jobs"


class JobDriver(Driver):
    """One job on its own thread: `JobService.advance` until it ends or is no longer ours."""

    noun = "job"

    def __init__(
        self,
        service: JobService,
        row: JobRow,
        connect: Callable[[str], Any],
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        wait_scale: float = 1.0,
    ) -> None:
        super().__init__(row.id)
        #: Real seconds per second a job asks to wait between ticks: 1, except in a rehearsal,
        #: whose sim runs its clock faster (a 10 s poll of an EKS update is 10 simulated seconds).
        self.wait_scale = wait_scale
        self.service = service
        self.row = row
        self.connect = connect
        self.heartbeat_seconds = heartbeat_seconds
        self.ticks = 0
        self.ended = False

    def log_fields(self) -> dict[str, str]:
        return {"run_id": self.row.run_id, "step": self.row.step_id, "job": str(self.row.id)}

    def drive(self) -> None:
        # On the driver's thread: this line carries the correlation id of the job's audit rows.
        log.info("driving job %s (%s of run %s)", self.row.id, self.row.kind, self.row.run_id)
        cluster = self.connect(self.row.cluster)
        with contextlib.closing(cluster):
            while not self.stop.is_set():
                self.poke.clear()
                step = self.service.advance(self.row.id, cluster)
                self.ticks += int(step.ticked)
                if step.done or step.lost:
                    self.ended = step.done
                    return
                # Scaled, never below 0.05 s nor above what the job asked (1.0: exactly that).
                self._wait(min(step.wait, max(step.wait * self.wait_scale, 0.05)))

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.poke.is_set():
                return
            self.poke.wait(min(left, self.heartbeat_seconds))
            if not self.service.heartbeat(self.row.id):
                self.stop.set()


class JobDuty(ServiceDuty[JobService, Any]):
    """Cluster jobs as a kind of long duty: a job nobody drives is claimed; one whose driver is
    gone is interrupted (never continued silently: people resume it)."""

    name = JOBS

    def live(self) -> list[JobRow]:
        return self.service.store.jobs(states=("live",))

    def stale(self, row: JobRow) -> str | None:
        if not row.owner:
            return None
        if row.owner == self.service.owner:
            return "its driver stopped unexpectedly"
        if self.service.stale(row):
            return "the bot driving it stopped (a restart or a failover)"
        return None

    def interrupt(self, row: JobRow, reason: str) -> None:
        self.service.interrupt(row, reason)

    def claim(self, row: JobRow) -> JobDriver | None:
        if row.owner or not self.service.claim(row):
            return None  # driven by a live process: left to it
        fresh = self.service.store.job(row.id) or row
        return JobDriver(self.service, fresh, self.connect, **self.driver_options)

    def before_scan(self) -> None:
        self.service.offer_owed()

    def after_scan(self, driving: Collection[int]) -> None:
        """Posts of jobs nobody drives any more (interrupted or ended just before a crash)."""
        owed = {ref.run_id for ref in self.service.store.unposted_messages() if ref.run_id.startswith("job:")}
        for sub in owed:
            job_id = int(sub.split(":", 1)[1])
            if job_id in driving:
                continue
            row = self.service.store.job(job_id)
            if row is not None and subject(row.id) == sub:
                self.service.post_owed(row)
