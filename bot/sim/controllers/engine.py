"""The controller loop: work queues fed by store changes, timers on the simulated clock.

Controllers are event-driven, like the real ones behind informers: every change to the store is
offered to each controller (`on_change`), which queues the keys it must reconcile; `settle()`
drains the queues until nothing is left to do. Anything with a duration — an image pull, a
readiness delay, a back-off, a node joining — is a timer at a simulated time. The engine thread
fires timers as the clock reaches them (real time × speed); `advance(seconds)` fires them at once,
in order, so a test can step a frozen clock (`speed=0`) deterministically.

One lock (the store's RLock) covers everything: HTTP handlers, the engine thread and `advance`
never interleave inside a write, so a controller always reads a consistent cluster.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import SimClock
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.objects import Ids
from bot.sim.apiserver.store import Record, Store

log = logging.getLogger(__name__)

#: A controller that keeps failing on one key is retried after this many simulated seconds.
RETRY_SECONDS = 1.0
#: The engine thread, catching up with its clock, lets the lock go after this many real seconds of
#: work, for YIELD_SECONDS, so that requests and watch bookmarks are not held up behind it.
BUSY_SECONDS = 0.05
YIELD_SECONDS = 0.002
#: settle() gives up (and logs) after this many reconciles, so a controller bug cannot hang the sim.
MAX_SETTLE_STEPS = 200_000


class Controller(Protocol):
    name: str

    def on_change(self, record: Record) -> None: ...

    def sync(self, key: Any) -> None: ...


@dataclass(frozen=True)
class Repeats:
    """A timer that is one run of a job repeated `every` seconds (each run arms the next), whose
    runs in between leave nothing anyone reads but what the last says and how many there were:
    when time is moved on at once (`advance`), the runs due on the way are one call,
    `caught_up(n)`, at the last one's time."""

    every: float
    caught_up: Callable[[int], None]


@dataclass(order=True)
class _Timer:
    due: float
    seq: int
    fn: Callable[[], None] = field(compare=False)
    key: Hashable | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)
    repeats: Repeats | None = field(compare=False, default=None)


class Engine:
    def __init__(self, store: Store, api: Api, clock: SimClock, ids: Ids) -> None:
        self.store = store
        self.api = api
        self.clock = clock
        self.ids = ids
        self.lock = store.lock
        self._wake = threading.Condition(self.lock)
        self._timers: list[_Timer] = []
        self._timer_keys: dict[Hashable, _Timer] = {}
        self._seq = itertools.count()
        self.controllers: list[Controller] = []
        self._queues: dict[str, OrderedDict[Any, None]] = {}
        self._coalesced: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._settling = False
        self.errors: list[str] = []
        self._waiters = threading.Condition(self.lock)
        store.listeners.append(self._on_change)

    # ---- controllers and queues -----------------------------------------------------------------

    def add(self, controller: Controller, *, coalesce: bool = False) -> None:
        """Register a controller. A `coalesce` controller (one that reconciles a whole set at once,
        like the DaemonSet controller over every node) syncs once after all the timers due at the
        same simulated instant, not after each: same sim-clock timing, fewer passes."""
        self.controllers.append(controller)
        self._queues[controller.name] = OrderedDict()
        if coalesce:
            self._coalesced.add(controller.name)

    def enqueue(self, controller: str, key: Any) -> None:
        self._queues[controller][key] = None
        self._wake.notify()

    def _on_change(self, record: Record) -> None:
        for c in self.controllers:
            c.on_change(record)
        self._waiters.notify_all()

    def settle(self, *, instant_continues: bool = False) -> None:
        """Reconcile until every queue is empty (called with the lock held). With
        `instant_continues` (more timers are due at this same simulated instant), the coalescing
        controllers' queues are left for the settle that follows the instant's last timer."""
        if self._settling:
            return
        self._settling = True
        try:
            steps = 0
            while True:
                progressed = False
                for c in self.controllers:
                    if instant_continues and c.name in self._coalesced:
                        continue
                    queue = self._queues[c.name]
                    while queue:
                        key, _ = queue.popitem(last=False)
                        progressed = True
                        steps += 1
                        try:
                            c.sync(key)
                        except ApiError as exc:
                            # Raced with a client write (409/404): look again shortly, as real controllers do.
                            log.debug("%s %r: %s; retrying", c.name, key, exc)
                            self.after(RETRY_SECONDS, functools.partial(self.enqueue, c.name, key))
                        except Exception as exc:
                            log.exception("controller %s failed on %r", c.name, key)
                            self.errors.append(f"{c.name} {key!r}: {exc!r}")
                            self.after(RETRY_SECONDS * 5, functools.partial(self.enqueue, c.name, key))
                        if steps > MAX_SETTLE_STEPS:
                            log.error("controllers did not settle after %d steps", steps)
                            return
                if not progressed:
                    return
        finally:
            self._settling = False

    # ---- timers ---------------------------------------------------------------------------------

    def at(
        self,
        due: float,
        fn: Callable[[], None],
        *,
        key: Hashable | None = None,
        repeats: Repeats | None = None,
    ) -> None:
        """Run `fn` (under the lock) when simulated time reaches `due`; a keyed timer replaces its
        predecessor. `repeats`: caught up at once by an `advance` (`Repeats`)."""
        with self.lock:
            if key is not None:
                old = self._timer_keys.pop(key, None)
                if old is not None:
                    old.cancelled = True
            timer = _Timer(due, next(self._seq), fn, key, repeats=repeats)
            heapq.heappush(self._timers, timer)
            if key is not None:
                self._timer_keys[key] = timer
            self._wake.notify()

    def after(
        self,
        delay: float,
        fn: Callable[[], None],
        *,
        key: Hashable | None = None,
        repeats: Repeats | None = None,
    ) -> None:
        self.at(self.clock.now() + max(0.0, delay), fn, key=key, repeats=repeats)

    def cancel(self, key: Hashable) -> None:
        with self.lock:
            old = self._timer_keys.pop(key, None)
            if old is not None:
                old.cancelled = True

    def every(
        self, period: float, fn: Callable[[], None], *, key: Hashable, catch_up_once: bool = False
    ) -> None:
        """A periodic job (compaction, lease renewals, deprecated-API callers). `catch_up_once`:
        when time is moved on at once (`advance`), the job runs once, at its last due time on the
        way, not at each — for a job whose runs in between leave nothing anyone reads (a kubelet's
        Lease renewals over the hours a rehearsal's idle sim stood still: most of its catching up)."""

        def tick() -> None:
            fn()
            arm()

        def arm() -> None:
            self.after(
                period, tick, key=key, repeats=Repeats(period, lambda _: tick()) if catch_up_once else None
            )

        arm()

    def _next_due(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].due if self._timers else None

    def _pop_due(self, until: float) -> _Timer | None:
        due = self._next_due()
        if due is None or due > until:
            return None
        timer = heapq.heappop(self._timers)
        if timer.key is not None and self._timer_keys.get(timer.key) is timer:
            del self._timer_keys[timer.key]
        return timer

    def _fire(self, timer: _Timer) -> None:
        try:
            timer.fn()
        except ApiError as exc:
            log.debug("timer %r: %s", timer.key, exc)
        except Exception as exc:
            log.exception("timer %r failed", timer.key)
            self.errors.append(f"timer {timer.key!r}: {exc!r}")

    def run_due(self, *, yield_every: float | None = None) -> None:
        """Fire every timer due by now, settling after each (lock held). With `yield_every` (real
        seconds), the lock is let go briefly that often, between two timers: a sim that has fallen
        behind its clock still answers requests and sends watch bookmarks while it catches up."""
        started = time.monotonic()
        while True:
            timer = self._pop_due(self.clock.now())
            if timer is None:
                break
            self._fire(timer)
            self.settle(instant_continues=self._next_due() == timer.due)
            if yield_every is not None and time.monotonic() - started >= yield_every:
                self._wake.wait(YIELD_SECONDS)  # releases the lock; HTTP handlers waiting for it run
                started = time.monotonic()
        self.settle()

    def advance(self, seconds: float) -> None:
        """Move simulated time forward by `seconds`, firing each timer at its own time, in order."""
        with self.lock:
            target = self.clock.now() + max(0.0, seconds)
            instant_continues = False
            while True:
                self.settle(instant_continues=instant_continues)
                due = self._next_due()
                if due is None or due > target:
                    break
                self.clock.jump_to(due)
                timer = self._pop_due(due)
                repeats = timer.repeats if timer is not None else None
                if timer is not None and repeats is not None and due + repeats.every <= target:
                    # Its runs due by `target`: this one and `later` more, one call at the last's time.
                    later = math.floor((target - due) / repeats.every)
                    self.at(
                        due + repeats.every * later,
                        functools.partial(repeats.caught_up, later + 1),
                        key=timer.key,
                    )
                elif timer is not None:
                    self._fire(timer)
                instant_continues = self._next_due() == due
            self.clock.jump_to(target)
            self.run_due()

    # ---- waiting (tests) -----------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], Any], timeout: float) -> Any:
        """Block until `predicate()` (evaluated under the lock after every change) is truthy."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return value
                self._waiters.wait(min(remaining, 0.25))

    # ---- thread ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sim-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self.lock:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        with self.lock:
            while not self._stopping:
                self.run_due(yield_every=BUSY_SECONDS)
                due = self._next_due()
                wait = None if due is None else self.clock.real_seconds_until(due)
                # Re-check at least every half second: the speed may change, and a frozen clock
                # (speed 0) still has queued work to settle when clients write.
                self._wake.wait(0.5 if wait is None else min(max(wait, 0.0), 0.5))
