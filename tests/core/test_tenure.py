"""The lease as this replica's own monotonic clock sees it (`bot.core.tenure`, issue 38)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from bot.core.tenure import KUBE_WRITES, GuardedCalls, Tenure
from bot.errors import Fenced, LeaseLapsed
from tests.support.clock import FakeMonotonic

LEASE = timedelta(seconds=15)


def renewed(tenure: Tenure, at: float, *, took: float = 0.1, leading: bool = True) -> None:
    tenure.renewed(started=at, finished=at + took, duration=LEASE, leading=leading)


def test_nothing_is_bounded_before_the_first_lease_round() -> None:
    tenure = Tenure(monotonic=FakeMonotonic(1000.0))
    tenure.may_act(60)
    tenure.may_lead(60)
    assert tenure.left() is None


def test_a_call_is_made_only_while_the_lease_since_its_renewal_started_outlasts_the_timeout() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0)
    clock.advance(9.0)
    tenure.may_act(6.0)  # 15 - 9 = 6 left: a 6 s call ends inside the lease
    clock.advance(12.0)  # paused: the lease ran out 6 s ago
    with pytest.raises(LeaseLapsed) as raised:
        tenure.may_act(6.0)
    assert isinstance(raised.value, Fenced)  # a duty that meets it stops, as when fenced


def test_a_late_renewal_is_waited_for_rather_than_sending_past_the_lease() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0)
    clock.advance(11.0)  # 4 s left: too little for a 6 s call, but not over
    done = threading.Event()

    def call() -> None:
        tenure.may_act(6.0)
        done.set()

    caller = threading.Thread(target=call)
    caller.start()
    assert not done.wait(0.2)
    renewed(tenure, 111.0)  # the renewal in time: a new 15 s
    assert done.wait(5)
    caller.join()


def test_work_reserved_before_a_pause_is_not_sent_after_a_fresh_renewal() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0)
    with tenure.reserve(6.0):
        tenure.may_act(6.0)
        clock.advance(40.0)  # paused past the lease: another replica may have taken the work
        renewed(tenure, 140.0)  # woken, and its heartbeat renewed before the send
        assert (tenure.left() or 0) > 6
        with pytest.raises(LeaseLapsed):
            tenure.may_act(6.0)
    # New work, reserved now, is this term's.
    with tenure.reserve(6.0):
        tenure.may_act(6.0)


def test_renewals_in_time_keep_the_term_of_work_in_flight() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0)
    with tenure.reserve(6.0):
        for at in (105.0, 110.0, 115.0):
            clock.now = at
            renewed(tenure, at, took=2.0)
        tenure.may_act(6.0)


def test_leader_only_effects_need_the_leaders_lease() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0, leading=False)
    tenure.may_act(5.0)
    with pytest.raises(LeaseLapsed):
        tenure.may_lead(5.0)
    renewed(tenure, 101.0, leading=True)
    tenure.may_lead(5.0)
    tenure.stop_leading()
    with pytest.raises(LeaseLapsed):
        tenure.may_lead(5.0)


class Cluster:
    def __init__(self) -> None:
        self.writes: list[str] = []
        self.closed = False

    def get_json(self, path: str) -> dict[str, str]:
        return {"path": path}

    def evict(self, namespace: str, pod: str) -> bool:
        self.writes.append(f"{namespace}/{pod}")
        return True

    def close(self) -> None:
        self.closed = True


def test_a_jobs_cluster_writes_only_inside_the_leaders_lease_and_reads_freely() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock)
    renewed(tenure, 100.0)
    cluster = Cluster()
    guarded = GuardedCalls(cluster, guarded=KUBE_WRITES, check=tenure.may_lead, timeout=10.0)
    assert guarded.evict("shop", "api-1")
    clock.advance(30.0)
    assert guarded.get_json("/api/v1/nodes") == {"path": "/api/v1/nodes"}
    with pytest.raises(LeaseLapsed):
        guarded.evict("shop", "api-2")
    assert cluster.writes == ["shop/api-1"]
    guarded.close()
    assert cluster.closed


def test_a_call_asks_the_lease_for_no_more_than_it_holds_between_two_renewals() -> None:
    """A 3 s lease renewed every 0.5 s never has a cluster's 10 s request timeout left: the job's
    write asked for it and waited until the lease lapsed (test_replicas_drain). It asks for the
    room instead, and is bounded to it."""
    assert Tenure().fit(10.0) == 10.0
    tenure = Tenure(room=2.5)
    assert tenure.fit(10.0) == 2.5
    assert tenure.fit(1.5) == 1.5


def test_a_guarded_write_is_checked_and_bounded_by_the_same_figure() -> None:
    clock = FakeMonotonic(100.0)
    tenure = Tenure(monotonic=clock, room=2.5)
    tenure.renewed(started=100.0, finished=100.1, duration=timedelta(seconds=3), leading=True)
    bounds: list[float] = []

    @contextlib.contextmanager
    def within(seconds: float) -> Iterator[None]:
        bounds.append(seconds)
        yield

    cluster = Cluster()
    guarded = GuardedCalls(
        cluster, guarded=KUBE_WRITES, check=tenure.may_lead, timeout=tenure.fit(10.0), bound=within
    )
    assert guarded.evict("shop", "api-1")  # at once: 3 s of lease left, 2.5 s asked
    assert bounds == [2.5]
    guarded.get_json("/api/v1/nodes")  # a read is neither checked nor bounded
    assert bounds == [2.5]
