"""The triggers front door: every timer the bot has, on one APScheduler (3.x) engine, run on the
leader only and fenced — announcement jobs, the run ticker, the sync, each long duty's scan
(`bot.core.duties`) and the timers a front door adds. The only module that imports APScheduler.

How to add a timer, leadership, misfires and why the table is the only truth: docs/triggers.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.core.announcements.service import AnnouncementService, Fired
from bot.core.duties import Duties
from bot.core.leadership import Leadership
from bot.core.runs.service import RunService
from bot.errors import BotError, Fenced
from bot.logsetup import correlation
from bot.records import Fence

log = logging.getLogger(__name__)

#: How often pending durable jobs are re-read from the database (other replicas' schedules).
SYNC_SECONDS = 30.0
#: How often escalations and gate timeouts are checked; `escalate_after` is minutes, not seconds.
RUN_TICK_SECONDS = 20.0

ANNOUNCEMENT = "announcement"
#: A pending schedule's window end: closed as missed if no run started in it.
WINDOW_END = "window-end"
RUN_TICKER = "run-ticker"
_SYNC = "sync"
#: The executor of the durable jobs and the sync: one thread, see `Triggers.__init__`.
_DURABLE_THREAD = "default"


@dataclass(frozen=True, kw_only=True)
class Done:
    """What one job did: for the log, and for the caller of `start` or `run_due`."""

    kind: str  # ANNOUNCEMENT, RUN_TICKER, or a kind added later
    key: str  # which one of its kind: an announcement's id; "" for an interval job
    action: str  # an announcement's `Fired.action`; "ticked" for the run ticker
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Due:
    """One item a durable kind's table says is still to do, and when."""

    key: str
    at: datetime
    name: str = ""  # for APScheduler's job list and log


@dataclass(frozen=True, kw_only=True)
class DurableKind:
    """A kind of one-shot job at instants a database table records (see the module docstring)."""

    name: str  # job ids are "<name>:<key>"
    pending: Callable[[], Iterable[Due]]
    fire: Callable[[str, datetime], Done]
    catch_up: Callable[[datetime], Iterable[Done]]


#: An interval timer: its name, every how many seconds, and the job (given the time).
Timer = tuple[str, float, Callable[[datetime], object]]


@dataclass(frozen=True)
class _Every:
    seconds: float
    job: Callable[[datetime], Done | None]
    executor: str


class Triggers:
    """The bot's timers: announcement jobs, the run ticker, and the place for the next ones."""

    def __init__(
        self,
        *,
        announcements: AnnouncementService,
        runs: RunService,
        clock: Callable[[], datetime] | None = None,
        sync_seconds: float = SYNC_SECONDS,
        tick_seconds: float = RUN_TICK_SECONDS,
        duties: Duties | None = None,
        timers: Sequence[Timer] = (),
        on_follow: Sequence[Callable[[], object]] = (),
        leadership: Leadership | None = None,
    ) -> None:
        self.announcements = announcements
        self.runs = runs
        self.clock = clock or announcements.clock
        self.sync_seconds = sync_seconds
        # APScheduler logs every run of every job at INFO (the ticker runs every 20 s); the bot
        # logs what each job did itself.
        logging.getLogger("apscheduler.executors").setLevel(logging.WARNING)
        self._scheduler = BackgroundScheduler(
            jobstores={"default": MemoryJobStore()},
            # One thread for the durable jobs and the sync: announcements are posted one after
            # another, in due order, and a sync never re-adds a job whose post is in flight.
            executors={_DURABLE_THREAD: ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=UTC,
        )
        self._kinds: dict[str, DurableKind] = {}
        #: This replica's standing (`bot.core.leadership`), shared with the duty engine and the
        #: elector; built before them all. On its own (tests that run the timers by hand): solo.
        self.leadership = leadership or Leadership.solo()
        #: The duty engine whose scans these timers run (stopped at once when following).
        self.duties = duties
        #: Told, in order, when this replica starts following.
        self.on_follow = tuple(on_follow)
        self._every: dict[str, _Every] = {_SYNC: _Every(sync_seconds, self._sync_job, _DURABLE_THREAD)}
        #: The scheduler's jobs running now, and whether `shutdown` began (a job that starts after
        #: that returns at once); `_jobs_changed` is told when either changes.
        self._jobs_running = 0
        self._stopping = False
        #: From `start` until `shutdown`: a change of the announcements is synced at once.
        self._started = False
        self._jobs_changed = threading.Condition()

        # -- the timers: the next issues add theirs here ----------------------------------------
        self.add_durable(
            DurableKind(
                name=ANNOUNCEMENT,
                pending=self._pending_announcements,
                fire=lambda key, now: _done(self.announcements.fire(int(key), now)),
                catch_up=lambda now: [_done(f) for f in self.announcements.catch_up(now)],
            )
        )
        # After the announcements (the catch-up skips what fell due in the window first).
        self.add_durable(
            DurableKind(
                name=WINDOW_END,
                pending=self._pending_window_ends,
                fire=lambda key, now: _done(self.announcements.window_ended(int(key), now), WINDOW_END),
                catch_up=lambda now: [_done(f, WINDOW_END) for f in self.announcements.close_missed(now)],
            )
        )
        # The run service reads the time from its own clock (this clock, in production and in
        # tests), so the ticker's `now` only decides *whether* it is due.
        self.every(RUN_TICKER, tick_seconds, lambda _now: self._tick_runs())
        if duties is not None:
            # The long duties (watches, cluster jobs): each kind's scan, on the leader only, in
            # its fence (the engine reads the same standing); following stops every driver at once.
            for name, seconds, scan in duties.scans():
                self.every(name, seconds, _quiet(scan))
        for name, seconds, job in timers:
            self.every(name, seconds, _quiet(job))

    def add_durable(self, kind: DurableKind) -> None:
        """Add a kind of one-shot job kept in a database table (before `start`)."""
        self._kinds[kind.name] = kind

    def every(self, name: str, seconds: float, job: Callable[[datetime], Done | None]) -> None:
        """Add an interval job with a thread of its own (before `start`); it is given the time."""
        self._every[name] = _Every(seconds, job, name)
        self._scheduler.add_executor(ThreadPoolExecutor(1), alias=name)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, paused: bool = False) -> list[Done]:
        """Handle what fell due while the bot was down, then schedule every timer."""
        # Timers started without an election: this process is on its own.
        self.leadership.go_solo()
        now = self.clock()
        done = [d for kind in self._kinds.values() for d in kind.catch_up(now)]
        self._scheduler.start(paused=paused)
        self.sync()
        for name, every in self._every.items():
            self._scheduler.add_job(
                self._run_every,
                IntervalTrigger(seconds=every.seconds, timezone=UTC),
                args=[name],
                id=name,
                name=name,
                executor=every.executor,
                # At once, from the injected clock (`run_due(now)` runs it first): a run or a fleet
                # whose step ended while the bot was down moves on as the bot starts or takes the
                # lead, not one interval later.
                next_run_time=now,
            )
        self._started = True
        if self.duties is not None:
            self.duties.start()  # a row started, resumed or answered is scanned at once now
        return done

    def shutdown(self) -> None:
        """Stop scheduling, and wait for a job that is running to finish."""
        self._started = False
        if self.duties is not None:
            # No scan starts a driver from now on (the drivers running finish the tick in hand).
            self.duties.stop_scanning()
        # The running jobs are waited for here, not by APScheduler's shutdown(wait=True): that
        # waits holding the job stores' lock, which a running sync needs to list its jobs, and the
        # bot hung on SIGTERM so (a replica that took the lead as it was stopping).
        with self._jobs_changed:
            self._stopping = True
            self._jobs_changed.wait_for(lambda: self._jobs_running == 0)
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    @contextlib.contextmanager
    def _job(self) -> Iterator[bool]:
        """One run of a scheduler's job: counted while it runs, for `shutdown` to wait for; False
        (not run) once `shutdown` began."""
        with self._jobs_changed:
            run = not self._stopping
            if run:
                self._jobs_running += 1
        if not run:
            yield False
            return
        try:
            # Its own correlation id: what it logs and the audit rows it writes as the bot share it.
            with correlation():
                yield True
        finally:
            with self._jobs_changed:
                self._jobs_running -= 1
                self._jobs_changed.notify_all()

    # -- leadership ------------------------------------------------------------------------------

    def lead(self, fence: Fence) -> list[Done]:
        """This replica won the lease: catch up on what fell due, then run every timer, fenced."""
        self.leadership.lead(fence)  # already so when the elector moved it
        if not self._scheduler.running:
            with self.duty():
                return self.start()
        with self.duty():
            now = self.clock()
            done = [d for kind in self._kinds.values() for d in kind.catch_up(now)]
        self._scheduler.resume()
        self.sync()
        return done

    def follow(self) -> None:
        """This replica lost the lease: no job starts from now on (one running is fenced)."""
        self.leadership.follow("following")
        self._stop_duties()
        for listener in self.on_follow:
            listener()

    def _stop_duties(self) -> None:
        """Following: no job starts from now on, and every driver stops."""
        if self._scheduler.running:
            self._scheduler.pause()
        if self.duties is not None:
            self.duties.stop_all()

    @property
    def leading(self) -> bool:
        return self.leadership.leading

    def duty(self) -> contextlib.AbstractContextManager[bool]:
        """Run one job's work: fenced while leading, not at all (False) while following. A job
        that finds this replica fenced makes it follow and stops every timer and driver at once
        (the elector tells the rest at its next round)."""
        return self.leadership.duty(stop=self._stop_duties)

    # -- durable jobs ----------------------------------------------------------------------------

    def jobs(self) -> list[Job]:
        """The durable (one-shot) jobs, earliest first."""
        jobs = [j for j in self._scheduler.get_jobs() if j.id not in self._every]
        return sorted(jobs, key=lambda j: (j.next_run_time, j.id))

    def changed(self) -> None:
        """The pending announcements changed (the service's listener): re-read them while the
        timers run (the start reads them anyway; after a shutdown nothing is scheduled)."""
        if self._started:
            self.sync()

    def sync(self) -> None:
        """Make the durable jobs match what their tables say is pending."""
        wanted: set[str] = set()
        for kind in self._kinds.values():
            for due in kind.pending():
                job_id = f"{kind.name}:{due.key}"
                wanted.add(job_id)
                job = self._scheduler.get_job(job_id)
                if job is None or job.next_run_time != due.at:
                    self._scheduler.add_job(
                        self._fire,
                        DateTrigger(run_date=due.at, timezone=UTC),
                        args=[kind.name, due.key],
                        id=job_id,
                        name=due.name or job_id,
                        executor=_DURABLE_THREAD,
                        replace_existing=True,
                    )
        for job in self.jobs():
            if job.id not in wanted:
                # Gone already if the scheduler ran it meanwhile (a date job is removed once run).
                with contextlib.suppress(JobLookupError):
                    job.remove()

    def run_due(self, now: datetime) -> list[Done]:
        """Run every job due at `now`, in due order (tests: an injected instant, no waiting)."""
        done: list[Done] = []
        due = [
            j for j in self._scheduler.get_jobs() if j.next_run_time is not None and j.next_run_time <= now
        ]
        for job in sorted(due, key=lambda j: (j.next_run_time, j.id)):
            every = self._every.get(job.id)
            if every is None:
                # A date job runs once; one that failed comes back at the next sync. One gone
                # already was removed by a sync that a post of this loop set off, because another
                # replica did it meanwhile: it is not run here.
                try:
                    job.remove()
                except JobLookupError:
                    continue
                kind, key = job.args
                done.append(self._kinds[kind].fire(key, now))
                continue
            result = every.job(now)
            if result is not None:
                done.append(result)
            # Coalesced, as APScheduler does: one run for all the intervals `now` skipped over.
            step = timedelta(seconds=every.seconds)
            job.modify(next_run_time=job.next_run_time + ((now - job.next_run_time) // step + 1) * step)
        self.sync()
        return done

    def _fire(self, kind: str, key: str) -> None:
        with self._job() as run:
            if run:
                self._fire_now(kind, key)

    def _fire_now(self, kind: str, key: str) -> None:
        try:
            with self.duty() as leading:
                if not leading:
                    return
                result = self._kinds[kind].fire(key, self.clock())
            log.info("%s %s: %s %s", kind, key, result.action, result.detail)
        except Fenced:
            log.info("%s %s: not done, this replica no longer leads", kind, key)
        except BotError as exc:
            log.warning("%s %s failed: %s", kind, key, exc.user_message)
        except Exception:
            log.exception("%s %s failed unexpectedly", kind, key)
        # One that failed (Slack down) is still pending: the next sync re-adds it, so it is
        # retried every `sync_seconds` until it is done (an announcement: posted, or too late).

    # -- interval jobs ---------------------------------------------------------------------------

    def _run_every(self, name: str) -> None:
        with self._job() as run:
            if run:
                self._run_every_now(name)

    def _run_every_now(self, name: str) -> None:
        try:
            with self.duty() as leading:
                if not leading:
                    return
                result = self._every[name].job(self.clock())
            if result is not None and result.detail:
                log.info("%s: %s %s", name, result.action, result.detail)
        except Fenced:
            log.info("%s: stopped, this replica no longer leads", name)
        except BotError as exc:
            log.warning("%s failed: %s", name, exc.user_message)
        except Exception:
            # Logged and retried at the next interval: a timer thread must not die of one bug.
            log.exception("%s failed unexpectedly", name)

    def _sync_job(self, _now: datetime) -> None:
        self.sync()

    def _tick_runs(self) -> Done:
        # Slack first: what a crash left unposted is settled before anything new is posted.
        self.runs.catch_up_slack()
        outcomes = self.runs.tick()
        detail = "; ".join(f"{o.run.id}: {', '.join(e.kind for e in o.events)}" for o in outcomes)
        return Done(kind=RUN_TICKER, key="", action="ticked", detail=detail)

    # -- announcements ---------------------------------------------------------------------------

    def _pending_announcements(self) -> list[Due]:
        return [
            Due(key=str(row.id), at=row.due_at, name=f"{row.template} of {row.plan_name}")
            for row in self.announcements.pending()
        ]

    def _pending_window_ends(self) -> list[Due]:
        return [
            Due(key=str(s.id), at=s.window_end, name=f"end of schedule #{s.id} of {s.plan_name}")
            for s in self.announcements.store.schedules(states=["scheduled"], limit=500)
        ]


def _quiet(job: Callable[[datetime], object]) -> Callable[[datetime], None]:
    """An interval job whose result is not a `Done` (a scan's ids started)."""

    def run(now: datetime) -> None:
        job(now)

    return run


def _done(fired: Fired, kind: str = ANNOUNCEMENT) -> Done:
    return Done(kind=kind, key=str(fired.id), action=fired.action, detail=fired.detail)
