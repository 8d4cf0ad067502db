"""Which replica drives the singleton duties: the leader's lease, renewed on a thread of its own.

Every replica serves commands and clicks; only the leader drives the duties the triggers front
door runs (announcement jobs, the run ticker; next: watches and long-running actions) and the
recovery of what a dead leader left. The lease lives in the shared database (`leadership` row,
`Store.acquire_lease`) rather than in a `coordination.k8s.io` Lease, because the fence must be
checked in the *same transaction* as each write a duty makes (`bot.adapters.store.fencing`), which
only the database itself can do; the embedded SQLite default gets it for free (its one replica is
simply the leader), and no RBAC on Leases is needed.

`Elector` tries the lease every `renew` interval: a follower takes it once it is free (released
by a SIGTERM) or expired; the leader renews it. Winning calls `on_elected(fence)`; losing — the
lease taken by another, a renewal that has not succeeded for `duration - renew` (database down:
stop before another replica may take over), or a duty that found itself fenced — calls
`on_deposed()` at once, and the replica goes on serving as a follower. Python's `kubernetes`
`leaderelection` module neither releases on shutdown nor stops the work when the lease is lost
(KUBERNETES_FACTS.md); this does both.

The elector writes this replica's standing into the `bot.core.leadership.Leadership` it is built
with, the one the duties and the triggers read (`Elector.state` is it too: the metrics and the
probes read whether this replica leads, with which epoch, and how many times that changed here).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from bot.adapters.store import Store
from bot.core.leadership import SHUTTING_DOWN, Leadership
from bot.core.tenure import Tenure
from bot.errors import BotError, Fenced
from bot.records import Fence

log = logging.getLogger(__name__)


class Elector:
    def __init__(
        self,
        *,
        store: Store,
        leadership: Leadership,
        duration: timedelta,
        renew: timedelta,
        on_elected: Callable[[Fence], object] = lambda _fence: None,
        on_deposed: Callable[[], object] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
        tenure: Tenure | None = None,
        grace: timedelta = timedelta(0),
    ) -> None:
        self.store = store
        #: Where each round that succeeded is recorded, for the checks before every call outside.
        self.tenure = tenure or Tenure(monotonic=monotonic)
        #: How long past its expiry a lease held by another replica is left alone (its last calls
        #: may still be inside Slack or the API server when their client gave up).
        self.grace = grace
        self.duration = duration
        self.renew = renew
        self._elected = on_elected
        self._deposed = on_deposed
        self.monotonic = monotonic
        #: This replica's standing, shared with the duties and the triggers (built before them).
        self.state = leadership
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Whether `on_elected` was told and `on_deposed` not since: a duty that found itself
        #: fenced moves the standing to follower itself, and `on_deposed` is told at the next round.
        self._told = False
        #: When (monotonic) the last renewal that succeeded was started.
        self._renewed = 0.0
        #: When (monotonic) the loop last went round: the liveness probe's "not wedged".
        self.last_beat = monotonic()

    @property
    def fence(self) -> Fence | None:
        """The fence duties write with while this replica leads; None while it follows."""
        return self.state.fence

    def try_once(self, *, force: bool = False) -> bool:
        """One attempt to take or renew the lease (`force`: take it even from a holder that has not
        let go); whether this replica leads afterwards."""
        self.last_beat = self.monotonic()
        started = self.monotonic()
        with self._lock:
            if self._told and not self.state.is_leader:
                self._lose("a duty was fenced")
            epoch = self.state.epoch if self.state.is_leader else 0
        try:
            lease = self.store.acquire_lease(
                self.state.replica, epoch=epoch, duration=self.duration, force=force, grace=self.grace
            )
        except BotError as exc:
            log.warning("could not reach the lease: %s", exc.user_message)
            with self._lock:
                # A leader that cannot renew stops its duties before the lease can expire.
                overdue = self.monotonic() - self._renewed >= (self.duration - self.renew).total_seconds()
                if self.state.is_leader and overdue:
                    self._lose("the lease could not be renewed in time")
            return self.fence is not None
        finished = self.monotonic()
        with self._lock:
            # Every round that succeeded renewed this replica's heartbeat (its own lease); when it
            # holds the leader's lease too, leader-only effects may be made until the same bound.
            self.tenure.renewed(
                started=started,
                finished=finished,
                duration=self.duration,
                leading=lease.held_by(self.state.replica),
            )
            if lease.held_by(self.state.replica):
                self._renewed = started
                elected = self.state.lead(Fence(holder=self.state.replica, epoch=lease.epoch))
            else:
                if self.state.is_leader:
                    self._lose(f"{lease.holder or 'nobody'} holds the lease (epoch {lease.epoch})")
                return False
        if elected:
            fence = self.fence
            if fence is not None:
                self._told = True
                try:
                    self._elected(fence)
                except Fenced as exc:
                    self.fenced(exc)  # another replica took over while this one was recovering
                except Exception:
                    log.exception("taking over the duties failed; stepping down")
                    self.step_down("taking over failed")
        return self.fence is not None

    def fenced(self, error: Fenced) -> None:
        """A duty's write was refused: another replica leads; stop every duty now."""
        self.step_down(error.user_message)

    def step_down(self, why: str) -> None:
        with self._lock:
            if self.state.is_leader or self._told:
                self._lose(why)

    def _lose(self, why: str) -> None:
        self.state.follow(why)
        self.tenure.stop_leading()
        if not self._told:
            return
        self._told = False
        try:
            self._deposed()
        except Exception:
            log.exception("stopping the duties failed")

    # -- the renewal thread ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="leader-lease", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.renew.total_seconds()):
            try:
                self.try_once()
            except Exception:
                # The thread must outlive one bug; the next round tries again.
                log.exception("the lease round failed unexpectedly")

    def halt(self) -> None:
        """No more rounds: this replica neither renews nor wins the lease from now on (a shutdown
        begins; the duties are stopped next, then `stop` releases the lease)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.duration.total_seconds())

    def stop(self, *, release: bool = True) -> None:
        """Stop renewing; with `release`, stop the duties and give the lease up so another replica
        takes over at once (a SIGTERM) instead of after the lease expired."""
        self.halt()
        with self._lock:
            was, epoch = self.state.is_leader, self.state.epoch
            if was or self._told:
                self._lose(SHUTTING_DOWN)
        if release and was:
            try:
                if self.store.release_lease(self.state.replica, epoch=epoch):
                    log.info("released the lease (epoch %s)", epoch)
            except BotError as exc:
                log.warning("could not release the lease (it expires by itself): %s", exc.user_message)
