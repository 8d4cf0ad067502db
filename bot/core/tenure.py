"""How long this replica may still act outside the database: its lease, on its own monotonic clock.

The database fences every write a duty makes (`bot.adapters.store.fencing`), but it never sees a
call to Slack, Kubernetes or AWS. A replica that is paused (SIGSTOP, a frozen VM, a long stall)
between reserving a post and sending it wakes up with the reservation in its hands after another
replica took the work over — and sends it a second time (issue 38). Leases stop that only when the
holder stops acting before its lease can have run out, measured on its own clock:

- each lease round that succeeds (`Elector.try_once`) is recorded with the monotonic time it was
  *started*: the database set the expiry to its own now + duration, and that now was no earlier
  than the start, so `started + duration` never over-states how long the lease lasts;
- a call is made only while at least its client's timeout is left of that (`may_act`), so the call
  has ended, one way or the other, before anyone may take the work over; when less is left (a
  renewal is late) it waits for the next renewal, and past the end it refuses (`LeaseLapsed`);
- work reserved under one unbroken lease (a *term*) is sent only in that term (`reserve`): a round
  that finished after the lease had already run out begins a new term, because another replica may
  have taken the work over in the gap, even though this one holds a fresh lease now;
- another replica's reservation is taken over only after its lease ran out plus a margin
  (`Store.acquire_lease(grace=…)`, `Store.live_replicas`), for the calls still inside Slack or the
  API server when their client gave up;
- effects only the leader makes (Kubernetes writes of jobs, AWS updates) need the leader's lease
  too (`may_lead`);
- a call never asks for more than the lease can give (`fit`): at most the lease less one renewal
  interval is left between two renewals in time, so a client whose own timeout is longer (a
  cluster's 10 s request timeout under a 3 s lease) is checked against that room and its call is
  bounded to it (`GuardedCalls`'s `bound`) — else it would wait for a room no renewal brings.

One `Tenure` per process, built first by `assemble` and handed to every part that acts outside
through its constructor: the Slack gateway, the deliveries, the jobs' cluster and EKS clients
(`GuardedCalls`). A new kind of side effect (Alertmanager silences) makes the same one call with
its own client's timeout. Until the first lease round a `Tenure` does not bound anything: the
terminal's `exec` and the tests that build the services without an elector act as one process.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Collection, Iterator
from datetime import timedelta
from typing import Any, TypeVar, cast

from bot.errors import EvidenceUnavailable, LeaseLapsed

_C = TypeVar("_C")

#: The term the work running in this context was reserved under (`Tenure.reserve`).
_TERM: contextvars.ContextVar[int | None] = contextvars.ContextVar("tenure_term", default=None)


class Tenure:
    """This replica's leases as its own monotonic clock sees them (thread-safe)."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic, room: float | None = None) -> None:
        self.monotonic = monotonic
        #: The longest call the lease holds between two renewals in time (lease − renewal
        #: interval); None: no bound (one process, or a test that sets none).
        self.room = room
        self._cond = threading.Condition()
        self._bounded = False
        #: Until when (monotonic) this replica's own lease (its heartbeat) surely holds.
        self._until = 0.0
        #: Until when it surely leads; 0 while it follows.
        self._lead_until = 0.0
        self._term = 0

    # -- written by the elector --------------------------------------------------------------------

    def renewed(self, *, started: float, finished: float, duration: timedelta, leading: bool) -> None:
        """A lease round that started at `started` and returned at `finished` succeeded: this
        replica's lease holds until `started + duration`, and it leads in it when `leading`."""
        with self._cond:
            if not self._bounded or finished > self._until:
                # The lease ran out before this round was done: others may have acted meanwhile.
                self._term += 1
            self._bounded = True
            self._until = started + duration.total_seconds()
            self._lead_until = self._until if leading else 0.0
            self._cond.notify_all()

    def stop_leading(self) -> None:
        """Deposed, stepped down or shutting down: no leader-only effect from now on."""
        with self._cond:
            self._lead_until = 0.0
            self._cond.notify_all()

    # -- read before every effect ------------------------------------------------------------------

    def fit(self, timeout: float) -> float:
        """What a call whose client allows `timeout` seconds may ask of the lease: `timeout`, or the
        room between two renewals when that is shorter (the caller bounds its call to the result)."""
        return timeout if self.room is None else min(timeout, self.room)

    def left(self) -> float | None:
        """Seconds of this replica's lease left now; None while nothing is bounded."""
        with self._cond:
            return self._until - self.monotonic() if self._bounded else None

    def may_act(self, timeout: float) -> None:
        """Return once a call that may take `timeout` seconds can end inside this replica's lease
        (and inside the term its work was reserved in); `LeaseLapsed` when it cannot any more."""
        self._wait_for(timeout, lead=False)

    def may_lead(self, timeout: float) -> None:
        """`may_act`, for an effect only the leader makes: the leader's lease must hold too."""
        self._wait_for(timeout, lead=True)

    @contextlib.contextmanager
    def reserve(self, timeout: float) -> Iterator[None]:
        """Reserve work (a claim in the database) and act on it in one term: the block runs only
        when a `timeout`-long call fits now, and every `may_act` inside it refuses once the term
        this began in has ended — the work may belong to another replica by then."""
        self.may_act(timeout)
        with self._cond:
            term = self._term if self._bounded else None
        token = _TERM.set(term)
        try:
            yield
        finally:
            _TERM.reset(token)

    def _wait_for(self, timeout: float, *, lead: bool) -> None:
        with self._cond:
            while True:
                if not self._bounded:
                    return
                term = _TERM.get()
                if term is not None and term != self._term:
                    raise LeaseLapsed("this replica's lease ran out after the work was reserved")
                until = self._lead_until if lead else self._until
                if lead and until == 0.0:
                    raise LeaseLapsed("this replica does not lead")
                left = until - self.monotonic()
                if left >= timeout:
                    return
                if left <= 0:
                    raise LeaseLapsed(f"this replica's lease ran out {-left:.1f}s ago")
                # Less than a call's time is left: a renewal is late. Wait for it, not past the end.
                self._cond.wait(left)


#: The Kubernetes writes the cluster jobs make (`bot.core.jobs.common.JobCluster`).
KUBE_WRITES = frozenset(
    {
        "cordon",
        "uncordon",
        "label_node",
        "node_event",
        "evict",
        "delete_pod",
        "set_image",
        "restart_workload",
        # The GitOps owner's path (flux-suspend, argocd-pause …) patches through it.
        "send_json",
    }
)
#: The provider calls that change a cluster (`bot.core.providers.Provider`, what the EKS jobs call).
AWS_UPDATES = frozenset(
    {"update_control_plane", "update_node_pool", "update_addon_version", "rollback_node_pool"}
)


#: The Alertmanager calls that change what pages people: the silences a step holds as a lease.
SILENCE_WRITES = frozenset({"put_silence", "expire_silence"})


class GuardedCalls:
    """A client whose calls in `guarded` are made only while `check(timeout)` allows (the jobs'
    cluster: `Tenure.may_lead` with its request timeout, fitted to the lease), each inside
    `bound(timeout)` — the client's own limit on how long the call may take, so it ends within the
    figure just checked (`Cluster.within`); every other attribute is the client's."""

    def __init__(
        self,
        client: Any,
        *,
        guarded: Collection[str],
        check: Callable[[float], None],
        timeout: float,
        bound: Callable[[float], contextlib.AbstractContextManager[object]] | None = None,
    ) -> None:
        self._client = client
        self._guarded = frozenset(guarded)
        self._check = check
        self._timeout = timeout
        self._bound = bound

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if name not in self._guarded or not callable(value):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._check(self._timeout)
            with self._bound(self._timeout) if self._bound is not None else contextlib.nullcontext():
                return value(*args, **kwargs)

        return guarded

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def guard_silences(client: _C, tenure: Tenure, *, timeout: float) -> _C:
    """An Alertmanager client whose silence writes (`SILENCE_WRITES`) are made only while this
    replica leads with `timeout` left: a paused leader must not extend a silence its successor
    already cut. A refusal is `EvidenceUnavailable`, which the silence lease reads as "not
    answered" — the step goes on and its gate says why (`bot.core.evidence.leases`); reads pass."""

    def check(seconds: float) -> None:
        try:
            tenure.may_lead(seconds)
        except LeaseLapsed as exc:
            raise EvidenceUnavailable(f"silence not changed: {exc}") from None

    return cast(_C, GuardedCalls(client, guarded=SILENCE_WRITES, check=check, timeout=timeout))
