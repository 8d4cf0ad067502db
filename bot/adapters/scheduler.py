"""The scheduler adapter: the only module that imports APScheduler (3.x).

It decides *when* to call `AnnouncementService.fire`; the database decides *what* is due. Jobs
live in APScheduler's in-memory job store and are re-created from the database at start and on
every sync (after a schedule or a cancellation in this process, and every `sync_seconds` for
schedules made by another replica). Why not `SQLAlchemyJobStore`: it would be a second copy of
the truth (pickled callables) that can disagree with the announcements table — a cancelled
announcement whose job survived, a job lost while its row is pending — and it would need
SQLAlchemy outside the store. With the table as the only truth there is nothing to reconcile.

Misfires: APScheduler's own misfire grace is turned off (`misfire_grace_time=None`, coalesced),
so a job that fires late always runs and `announcements.decide()` says what lateness means:
on time, sent marked delayed within the configured grace, or skipped and audited. At start,
announcements that fell due while the bot was down are handled before the front door serves.

Tests inject the clock: `start(paused=True)` builds the jobs without running them, and
`run_due(now)` runs the jobs due at `now` — no sleeping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger

from bot.errors import BotError
from bot.records import AnnouncementRow

log = logging.getLogger(__name__)

#: How often pending announcements are re-read from the database (other replicas' schedules).
SYNC_SECONDS = 30.0
_PREFIX = "announcement:"


class Fired(Protocol):
    """What firing one announcement did (`bot.core.announcement_service.Fired` is one)."""

    @property
    def id(self) -> int: ...

    @property
    def action(self) -> str: ...

    @property
    def detail(self) -> str: ...


class Announcements(Protocol):
    """What the scheduler needs of the announcement service (the core's `AnnouncementService`);
    a Protocol, because adapters never import the core that sits above them."""

    clock: Callable[[], datetime]
    on_change: Callable[[], None] | None

    def pending(self) -> Sequence[AnnouncementRow]: ...

    def fire(self, announcement_id: int, now: datetime | None = None) -> Fired: ...

    def catch_up(self, now: datetime) -> Sequence[Fired]: ...


class AnnouncementScheduler:
    def __init__(
        self,
        service: Announcements,
        *,
        clock: Callable[[], datetime] | None = None,
        sync_seconds: float = SYNC_SECONDS,
    ) -> None:
        self.service = service
        self.clock = clock or service.clock
        self.sync_seconds = sync_seconds
        # APScheduler logs every run of every job at INFO (the sync runs every 30 s); the bot
        # logs what each announcement did itself.
        logging.getLogger("apscheduler.executors").setLevel(logging.WARNING)
        self._scheduler = BackgroundScheduler(
            jobstores={"default": MemoryJobStore()},
            # One thread: announcements are posted one after another, in due order.
            executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )

    def start(self, *, paused: bool = False) -> list[Fired]:
        """Handle what fell due while the bot was down, then schedule the rest from the database."""
        fired = list(self.service.catch_up(self.clock()))
        self._scheduler.start(paused=paused)
        self.sync()
        self._scheduler.add_job(self._sync_safely, "interval", seconds=self.sync_seconds, id="sync")
        self.service.on_change = self.sync
        return fired

    def shutdown(self) -> None:
        self.service.on_change = None
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    def jobs(self) -> list[Job]:
        """The announcement jobs, earliest first."""
        jobs = [j for j in self._scheduler.get_jobs() if j.id.startswith(_PREFIX)]
        return sorted(jobs, key=lambda j: (j.next_run_time, j.id))

    def sync(self) -> None:
        """Make the jobs match the pending announcements in the database."""
        wanted: set[str] = set()
        for row in self.service.pending():
            job_id = f"{_PREFIX}{row.id}"
            wanted.add(job_id)
            job = self._scheduler.get_job(job_id)
            if job is None or job.next_run_time != row.due_at:
                self._scheduler.add_job(
                    self._fire,
                    DateTrigger(run_date=row.due_at, timezone=UTC),
                    args=[row.id],
                    id=job_id,
                    name=f"{row.template} of {row.plan_name}",
                    replace_existing=True,
                )
        for job in self.jobs():
            if job.id not in wanted:
                job.remove()

    def run_due(self, now: datetime) -> list[Fired]:
        """Run the jobs due at `now` (tests: an injected instant instead of waiting for it)."""
        fired = []
        for job in self.jobs():
            if job.next_run_time is not None and job.next_run_time <= now:
                job.remove()  # a date job runs once; one that failed comes back at the next sync
                fired.append(self.service.fire(int(job.args[0]), now))
        self.sync()
        return fired

    def _fire(self, announcement_id: int) -> None:
        try:
            result = self.service.fire(announcement_id, self.clock())
            log.info("announcement %s: %s %s", announcement_id, result.action, result.detail)
        except BotError as exc:
            log.warning("announcement %s failed: %s", announcement_id, exc.user_message)
        except Exception:
            log.exception("announcement %s failed unexpectedly", announcement_id)
        # One that failed (Slack down) is still pending: the next sync re-adds it, so it is
        # retried every `sync_seconds` until it is posted or `decide()` says it is too late.

    def _sync_safely(self) -> None:
        try:
            self.sync()
        except BotError as exc:
            log.warning("could not read the pending announcements: %s", exc.user_message)
