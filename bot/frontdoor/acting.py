"""Driving cluster jobs: the threads behind `bot.core.jobs.service` (started by the triggers door).

Long actions run where the timers and watches run, never on the command workers: the click that
approves a drain only stores the job; `JobRunner.scan` (a triggers interval job on the leader, and
at once when a job is started, resumed or answered) finds it and starts a `JobDriver` thread.

A scan, for every live job:
- nobody drives it (just started, or resumed): claim it and drive it;
- its driver is gone (a crash, a deposed leader: no heartbeat for `STALE_AFTER`), or it is ours
  but our driver thread is not alive: interrupt it — never continue a mutation silently; its step
  becomes interrupted and waits for people (`resume` continues the same job from its progress);
- it is driven by a live process: leave it.
A driver calls `JobService.advance` until the job ends or is no longer ours, waiting between ticks
as long as the job asks (woken early when people answer its question) and refreshing its heartbeat
meanwhile. Every store write runs in the fence of the triggers job that started the driver, so a
deposed leader writes nothing; `stop_all` stops every driver at once when the replica follows.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.core.jobs.service import HEARTBEAT_SECONDS, JobService, subject
from bot.errors import BotError, Fenced
from bot.records import JobRow

log = logging.getLogger(__name__)

#: How often the runner looks for jobs to drive or to interrupt.
SCAN_SECONDS = 5.0
JOBS = "jobs"


class JobDriver:
    """One job on its own thread (see the module docstring)."""

    def __init__(
        self,
        service: JobService,
        row: JobRow,
        connect: Callable[[str], Any],
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.service = service
        self.row = row
        self.connect = connect
        self.heartbeat_seconds = heartbeat_seconds
        self.stop = threading.Event()
        self.poke = threading.Event()
        self.ticks = 0
        self.ended = False
        # The fence is a context variable: the thread runs in a copy of the scan job's context.
        self._context = contextvars.copy_context()
        self.thread = threading.Thread(
            target=self._context.run, args=(self._run,), name=f"job-{row.id}", daemon=True
        )

    def start(self) -> JobDriver:
        self.thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def _run(self) -> None:
        try:
            self._drive()
        except Fenced as exc:
            log.info("job %s: fenced (%s); stopping", self.row.id, exc.user_message)
        except Exception:
            # Never a silent re-run: the next scan sees our own job without a live driver and
            # interrupts it, so its step waits for people.
            log.exception("job %s: driver failed", self.row.id)
        finally:
            self.stop.set()

    def _drive(self) -> None:
        cluster = self.connect(self.row.cluster)
        with contextlib.closing(cluster):
            while not self.stop.is_set():
                self.poke.clear()
                step = self.service.advance(self.row.id, cluster)
                self.ticks += int(step.ticked)
                if step.done or step.lost:
                    self.ended = step.done
                    return
                self._wait(step.wait)

    def _wait(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.poke.is_set():
                return
            self.poke.wait(min(left, self.heartbeat_seconds))
            if not self.service.heartbeat(self.row.id):
                self.stop.set()


class JobRunner:
    """Claims jobs nobody drives, interrupts those whose driver is gone, drives each on a thread."""

    def __init__(self, service: JobService, connect: Callable[[str], Any], **driver_options: Any) -> None:
        self.service = service
        self.connect = connect
        self.driver_options = driver_options
        self.drivers: dict[int, JobDriver] = {}
        self._lock = threading.RLock()
        self._closed = False
        self.leading: Callable[[], bool] = lambda: True
        self.duty: Callable[[], contextlib.AbstractContextManager[bool]] = lambda: contextlib.nullcontext(
            True
        )

    def scan(self, _now: datetime | None = None) -> list[int]:
        """Drive or interrupt every live job as the module docstring says; the ids started."""
        started: list[int] = []
        with self._lock:
            if self._closed or not self.leading():
                return started
            for job_id in [i for i, d in self.drivers.items() if not d.alive]:
                del self.drivers[job_id]
            self.service.offer_owed()
            for row in self.service.store.jobs(states=("live",)):
                driver = self.drivers.get(row.id)
                if driver is not None:
                    driver.poke.set()  # something changed (an answer): tick now
                    continue
                if not row.owner:
                    if self.service.claim(row):
                        fresh = self.service.store.job(row.id) or row
                        self.drivers[row.id] = JobDriver(
                            self.service, fresh, self.connect, **self.driver_options
                        ).start()
                        started.append(row.id)
                        log.info("driving job %s (%s of run %s)", row.id, row.kind, row.run_id)
                elif row.owner == self.service.owner:
                    self.service.interrupt(row, "its driver stopped unexpectedly")
                elif self.service.stale(row):
                    self.service.interrupt(row, "the bot driving it stopped (a restart or a failover)")
            self._post_owed()
        return started

    def _post_owed(self) -> None:
        """Posts of jobs nobody drives any more (interrupted or ended just before a crash)."""
        owed = {ref.run_id for ref in self.service.store.unposted_messages() if ref.run_id.startswith("job:")}
        for sub in owed:
            job_id = int(sub.split(":", 1)[1])
            if job_id in self.drivers:
                continue
            row = self.service.store.job(job_id)
            if row is not None and subject(row.id) == sub:
                self.service.post_owed(row)

    def wake(self) -> None:
        """On demand (a job started, resumed or answered): scan now, off the caller's thread."""
        threading.Thread(target=self._scan_quietly, name="job-scan", daemon=True).start()

    def _scan_quietly(self) -> None:
        try:
            with self.duty() as ok:
                if ok:
                    self.scan()
        except Fenced as exc:
            log.info("job scan fenced: %s", exc.user_message)
        except BotError as exc:
            log.warning("job scan failed: %s", exc.user_message)

    def stop_all(self, timeout: float = 5.0) -> None:
        """Deposed: stop every driver now (each finishes the tick in hand, whose writes are fenced)."""
        with self._lock:
            drivers = list(self.drivers.values())
            self.drivers.clear()
        for driver in drivers:
            driver.stop.set()
            driver.poke.set()
        for driver in drivers:
            if driver.thread is not threading.current_thread():
                driver.thread.join(timeout=timeout)

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._closed = True
        self.stop_all(timeout)


def start_acting(services: Any, triggers: Any) -> JobRunner:
    """Register the job scan on the triggers front door (before `triggers.start`): every
    `SCAN_SECONDS`, and at once when a job is started, resumed or answered."""
    from bot.adapters.kube import Cluster
    from bot.core.snapshots.service import pick_cluster

    settings = services.settings

    def connect(name: str) -> Any:
        return Cluster.connect(pick_cluster(settings.clusters, name), observe=services.telemetry.kube_request)

    runner = JobRunner(services.jobs, connect)
    runner.leading = lambda: bool(triggers.leading)
    runner.duty = triggers.duty
    before = triggers.on_follow

    def on_follow() -> None:
        if before is not None:
            before()
        runner.stop_all()

    triggers.on_follow = on_follow

    def scan(now: datetime) -> None:
        runner.scan(now)

    triggers.every(JOBS, SCAN_SECONDS, scan)
    services.jobs.on_change = runner.wake
    return runner
