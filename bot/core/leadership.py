"""This replica's standing among the replicas, built first: `starting` → `solo` | `leader(fence)` |
`follower`.

One `Leadership` per process, built by `assemble` before every part that reads it and handed to
them in their constructors: the duty engine (`bot.core.duties.Duties`), the triggers
(`bot.frontdoor.triggers.Triggers`) and the elector (`bot.frontdoor.leadership.Elector`). Nothing
is tied to it afterwards; it holds no listeners. The parts read it before each piece of work, and
each part that opens a duty says what it stops when that duty finds this replica fenced.

- `starting`: nothing decided yet; no duty runs.
- `solo`: no election (one process on its own: the terminal's `exec`, a rehearsal, a test that
  runs the timers by hand); every duty runs, unfenced.
- `leader(fence)`: the elector won the lease; every duty runs in the fence, so a write made after
  another replica took over is refused in its own transaction (`bot.adapters.store.fencing`).
- `follower`: another replica leads (or this one lost the lease, was fenced or is shutting down);
  no duty runs.

Only the elector moves a replica to `leader`; it, a duty that found itself fenced, or a shutdown
moves it to `follower`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from enum import StrEnum

from bot.adapters.store import fencing
from bot.core.tenure import Tenure
from bot.errors import Fenced
from bot.records import Fence

log = logging.getLogger(__name__)

#: Why a replica stops leading when it stops itself (`follow`'s `why`).
SHUTTING_DOWN = "shutting down"


class Standing(StrEnum):
    STARTING = "starting"
    SOLO = "solo"
    LEADER = "leader"
    FOLLOWER = "follower"


class Leadership:
    """This replica's standing (thread-safe); read by the duties, the triggers, the probes and
    /metrics, written by the elector (see the module docstring)."""

    def __init__(
        self,
        *,
        replica: str = "",
        tenure: Tenure | None = None,
        check_fence: Callable[[], None] = lambda: None,
        standing: Standing = Standing.STARTING,
    ) -> None:
        #: This replica's name on the leader's lease.
        self.replica = replica
        self._tenure = tenure
        #: Checks the fence in the database before a duty's first step (`Store.check_fence`): a
        #: card edit or a Slack search comes before any write.
        self._check_fence = check_fence
        self._lock = threading.RLock()
        self._standing = standing
        self._fence: Fence | None = None
        #: The epoch this replica led with last (kept while it follows, for /metrics).
        self.epoch = 0
        #: How many times this replica became leader or stopped being one.
        self.changes = 0

    @classmethod
    def solo(cls) -> Leadership:
        """A process on its own: every duty runs, unfenced."""
        return cls(standing=Standing.SOLO)

    # -- reading ---------------------------------------------------------------------------------

    @property
    def standing(self) -> Standing:
        return self._standing

    @property
    def fence(self) -> Fence | None:
        """The fence duties write with while this replica leads; None otherwise."""
        with self._lock:
            return self._fence

    @property
    def is_leader(self) -> bool:
        return self._standing is Standing.LEADER

    @property
    def leading(self) -> bool:
        """Whether duties run here: alone, or as the leader."""
        return self._standing in (Standing.SOLO, Standing.LEADER)

    @property
    def elected(self) -> bool:
        """Whether an election decides here (the elector moved this replica out of `starting`
        to `leader` or `follower`), as opposed to `starting` or `solo`."""
        return self._standing in (Standing.LEADER, Standing.FOLLOWER)

    # -- moving ----------------------------------------------------------------------------------

    def go_solo(self) -> None:
        """`starting` → `solo`: the timers start without an election. Once elected, it stays so."""
        with self._lock:
            if self._standing is Standing.STARTING:
                self._standing = Standing.SOLO

    def lead(self, fence: Fence) -> bool:
        """→ `leader(fence)`; whether this is a new term (not a renewal of the one held)."""
        with self._lock:
            if self._standing is Standing.LEADER and self._fence == fence:
                return False
            self._standing, self._fence, self.epoch = Standing.LEADER, fence, fence.epoch
            self.changes += 1
        log.info("this replica leads now (epoch %s)", fence.epoch)
        return True

    def follow(self, why: str = "") -> bool:
        """→ `follower`: no leader-only effect from now on; whether it was leading."""
        with self._lock:
            was = self._standing is Standing.LEADER
            self._standing, self._fence = Standing.FOLLOWER, None
            if self._tenure is not None:
                self._tenure.stop_leading()
            if was:
                self.changes += 1
        if was:
            # Handing the lease back at a shutdown is routine (every deploy), not a lease lost: an
            # alert on the warning would fire on every deploy.
            level = logging.INFO if why == SHUTTING_DOWN else logging.WARNING
            log.log(level, "this replica no longer leads (epoch %s): %s", self.epoch, why)
        return was

    # -- a duty ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def duty(self, stop: Callable[[], object] = lambda: None) -> Iterator[bool]:
        """One duty's work: fenced while leading, unfenced when solo, not at all (False) while
        starting or following. A write that finds this replica fenced makes it follow and calls
        `stop` (what the caller stops at once: its timers, its drivers), even when the caller
        swallows the error."""
        with self._lock:
            standing, fence = self._standing, self._fence
        if standing in (Standing.STARTING, Standing.FOLLOWER):
            yield False
            return
        if fence is None:
            yield True
            return

        def fenced(error: Fenced) -> None:
            with self._lock:
                if self._fence != fence:
                    return  # already followed (or a later term began): nothing more to stop
            log.warning("a duty was fenced: %s", error.user_message)
            self.follow(error.user_message)
            stop()

        with fencing(fence, fenced):
            self._check_fence()
            yield True
