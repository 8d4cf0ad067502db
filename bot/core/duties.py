"""The engine of long duties: rows in a table that say "keep doing this" (a watch, a cluster job),
each driven on a thread of its own by the leader (kopf's daemons are the model).

A duty kind (`DutyKind`) declares what differs: the live rows, how a row is claimed (and the
driver that then drives it), its heartbeat, when a row is stale (its driver is gone) and how it is
interrupted. The engine does the rest, once for every kind:

- `scan` (a timer every `scan_seconds`, and at once on `wake`): for every live row of a kind,
  poke its driver if this process drives it; else interrupt it if the kind says it is stale;
  else claim it and start its driver;
- a driver runs in a copy of the context of the scan that started it: the scan runs in the
  leader's fence (`bot.adapters.store.fencing`), so a deposed leader's driver writes nothing;
- `stop_all` stops every driver at once when the replica starts following; `shutdown` stops them
  for good.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Any, Protocol

from bot.core.leadership import Leadership
from bot.errors import BotError, Fenced
from bot.logsetup import correlation, log_context

log = logging.getLogger(__name__)


class Driver(ABC):
    """One row driven on its own thread; a kind subclasses it and writes `drive`."""

    #: For the thread's name and the log: "watch", "job".
    noun = "duty"

    def __init__(self, row_id: int) -> None:
        self.row_id = row_id
        self.stop = threading.Event()
        #: Set when something changed for the row (an answer): a waiting driver ticks now.
        self.poke = threading.Event()
        self.thread: threading.Thread | None = None

    @abstractmethod
    def drive(self) -> None:
        """Drive the row until it is done or `stop` is set."""

    def log_fields(self) -> dict[str, str]:
        """What every log line of the driver's thread carries (`bot.logsetup.log_context`: a job's
        run, step and job id); nothing by default."""
        return {}

    def start(self) -> Driver:
        # The fence is a context variable: the thread runs in a copy of the scan's context.
        context = contextvars.copy_context()
        self.thread = threading.Thread(
            target=context.run, args=(self._run,), name=f"{self.noun}-{self.row_id}", daemon=True
        )
        self.thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def halt(self) -> None:
        self.stop.set()
        self.poke.set()

    def join(self, timeout: float) -> None:
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=timeout)

    def _run(self) -> None:
        # Its own correlation id: its log lines and the audit rows it writes as the bot share it
        # (a click that poked the scan has its own, on the rows of what the person did).
        with correlation(), log_context(**self.log_fields()):
            self._drive()

    def _drive(self) -> None:
        try:
            self.drive()
        except Fenced as exc:
            # Deposed: the next leader takes the row over (or interrupts it) by its heartbeat.
            log.info("%s %s: fenced (%s); stopping", self.noun, self.row_id, exc.user_message)
        except Exception:
            # Never a silent re-run: the next scan sees the row without a live driver.
            log.exception("%s %s: driver failed", self.noun, self.row_id)
        finally:
            self.stop.set()


class Row(Protocol):
    @property
    def id(self) -> int: ...


class DutyKind(Protocol):
    """What one kind of long duty declares (see the module docstring)."""

    name: str
    scan_seconds: float

    def live(self) -> Iterable[Any]:
        """The rows that say the duty is still to be done."""

    def stale(self, row: Any) -> str | None:
        """Why a row nobody here drives must be interrupted (its driver is gone), or None."""

    def interrupt(self, row: Any, reason: str) -> None: ...

    def claim(self, row: Any) -> Driver | None:
        """Take the row over; its driver (not started), or None if it is not ours to take."""

    def heartbeat(self, row_id: int) -> bool:
        """Refresh the row's heartbeat; False when it is no longer ours (the driver stops)."""

    def before_scan(self) -> None: ...

    def after_scan(self, driving: Collection[int]) -> None: ...


class Lane:
    """One kind's drivers, keyed by row id."""

    def __init__(self, kind: DutyKind, engine: Duties) -> None:
        self.kind = kind
        self.engine = engine
        self.drivers: dict[int, Driver] = {}
        # Re-entrant: a scan's fenced claim steps the replica down, which calls `stop_all`.
        self._lock = threading.RLock()
        self._closed = False

    def scan(self, _now: datetime | None = None) -> list[int]:
        """Drive, poke or interrupt every live row as the module docstring says; the ids started."""
        started: list[int] = []
        with self._lock:
            if self._closed or not self.engine.leading():
                return started
            for row_id in [i for i, d in self.drivers.items() if not d.alive]:
                del self.drivers[row_id]
            self.kind.before_scan()
            for row in self.kind.live():
                driver = self.drivers.get(row.id)
                if driver is not None:
                    driver.poke.set()  # something changed (an answer): tick now
                    continue
                reason = self.kind.stale(row)
                if reason is not None:
                    self.kind.interrupt(row, reason)
                    continue
                claimed = self.kind.claim(row)
                if claimed is not None:
                    self.drivers[row.id] = claimed.start()
                    started.append(row.id)
            self.kind.after_scan(self.drivers.keys())
        return started

    def wake(self) -> None:
        """On demand (a row started, resumed or answered): scan now, off the caller's thread."""
        threading.Thread(target=self._scan_quietly, name=f"{self.kind.name}-scan", daemon=True).start()

    def _scan_quietly(self) -> None:
        try:
            with self.engine.duty() as ok:
                if ok:
                    self.scan()
        except Fenced as exc:
            log.info("%s scan fenced: %s", self.kind.name, exc.user_message)
        except BotError as exc:
            log.warning("%s scan failed: %s", self.kind.name, exc.user_message)

    def stop_all(self, timeout: float = 5.0) -> None:
        """Deposed: stop every driver now (each finishes the tick in hand, whose writes are
        fenced); a later scan, once leading again, takes the rows again."""
        with self._lock:
            drivers = list(self.drivers.values())
            self.drivers.clear()
        for driver in drivers:
            driver.halt()
        for driver in drivers:
            driver.join(timeout)

    def shutdown(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._closed = True
        self.stop_all(timeout)


class Duties:
    """Every kind of long duty, run in the leader's fence (see the module docstring)."""

    def __init__(
        self, *, leadership: Leadership | None = None, started: bool = True, kinds: Iterable[DutyKind] = ()
    ) -> None:
        #: This replica's standing, shared with the triggers that run the scans and the elector
        #: (built before them all). On its own (a test that drives one kind by hand): solo.
        self.leadership = leadership or Leadership.solo()
        #: Whether a wake scans at once: from `start` (the triggers' timers run; an engine of its
        #: own is started when built) until `stop_scanning` (the timers stopped for good).
        self._started = started
        #: Set once the timers stopped for good: no scan claims a row from then on.
        self._stopped = False
        self.lanes: dict[str, Lane] = {}
        for kind in kinds:
            self.add(kind)

    def add(self, kind: DutyKind) -> Lane:
        lane = self.lanes[kind.name] = Lane(kind, self)
        return lane

    def leading(self) -> bool:
        """Whether a scan may drive rows: this replica leads (or is alone), and no shutdown began."""
        return not self._stopped and self.leadership.leading

    def duty(self) -> contextlib.AbstractContextManager[bool]:
        """The context a scan off a timer's thread (`wake`) runs in: the leader's fence. A scan
        that finds this replica fenced stops every driver at once."""
        return self.leadership.duty(stop=self.stop_all)

    def start(self) -> None:
        """The timers run: a wake scans at once from now on."""
        self._started = True

    def stop_scanning(self) -> None:
        """The timers stopped (a shutdown began): no scan claims a row from now on."""
        self._started, self._stopped = False, True

    def wake(self, name: str) -> None:
        if self._started:
            self.lanes[name].wake()

    def scans(self) -> list[tuple[str, float, Callable[[datetime], object]]]:
        """The timers: each kind's scan, every `scan_seconds` (the triggers register them)."""
        return [(name, lane.kind.scan_seconds, lane.scan) for name, lane in self.lanes.items()]

    def stop_all(self) -> None:
        for lane in self.lanes.values():
            lane.stop_all()

    def shutdown(self) -> None:
        for lane in self.lanes.values():
            lane.shutdown()
