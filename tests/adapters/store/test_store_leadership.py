"""The leader's lease and the fence, against SQLite and a real PostgreSQL server (migration 9)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bot.adapters.store import Store, fencing
from bot.adapters.store.engine import IDLE_TRANSACTION_SECONDS
from bot.errors import Fenced
from bot.records import AuditEntry, Fence, Lease
from tests.support.postgres import drop_every_table
from tests.support.testbed import wait_until

LEASE = timedelta(seconds=15)


def audit(detail: str) -> AuditEntry:
    return AuditEntry(
        at=datetime.now(UTC),
        user_id="bot",
        channel_id="",
        source="timer",
        kind="run",
        subcommand="tick",
        arguments="",
        outcome="ok",
        detail=detail,
        correlation_id="",
        run_id="",
    )


def test_the_first_replica_takes_the_lease_with_epoch_1_and_renewing_keeps_the_epoch(store: Store) -> None:
    first = store.acquire_lease("a", epoch=0, duration=LEASE)
    assert (first.holder, first.epoch, first.held_by("a")) == ("a", 1, True)
    again = store.acquire_lease("a", epoch=1, duration=LEASE)
    assert (again.holder, again.epoch) == ("a", 1)
    assert again.expires_at >= first.expires_at
    assert again.acquired_at == first.acquired_at


def test_another_replica_cannot_take_a_lease_that_has_not_expired(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=LEASE)
    seen = store.acquire_lease("b", epoch=0, duration=LEASE)
    assert (seen.holder, seen.epoch, seen.held_by("b")) == ("a", 1, False)
    assert store.live_replicas(LEASE) == {"a", "b"}


def test_an_expired_lease_is_taken_over_only_after_the_margin(store: Store) -> None:
    """Issue 38: the holder stops calling out before its lease ends by its own clock; the margin
    covers a call of its still inside Slack or the API server when its client gave up."""
    store.acquire_lease("a", epoch=0, duration=timedelta(seconds=0.2))
    wait_until(lambda: store.lease().expires_at <= store.lease().now, timeout=5, what="the lease to expire")
    early = store.acquire_lease("b", epoch=0, duration=LEASE, grace=timedelta(seconds=60))
    assert (early.holder, early.epoch) == ("a", 1)

    def taken() -> Lease | None:
        lease = store.acquire_lease("b", epoch=0, duration=LEASE, grace=timedelta(seconds=0.2))
        return lease if lease.held_by("b") else None

    later = wait_until(taken, timeout=5, what="the lease to be taken after the margin")
    assert (later.holder, later.epoch) == ("b", 2)


def test_an_expired_lease_is_taken_with_the_next_epoch(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=timedelta(seconds=0.3))
    wait_until(
        lambda: store.acquire_lease("b", epoch=0, duration=LEASE).held_by("b"),
        timeout=5,
        what="the expired lease to be taken",
    )
    lease = store.lease()
    assert (lease.holder, lease.epoch) == ("b", 2)
    # The old holder's renewal with its old epoch is a takeover attempt, refused while b holds it.
    assert store.acquire_lease("a", epoch=1, duration=LEASE).holder == "b"


def test_a_released_lease_is_taken_at_once_and_the_leaver_is_no_longer_live(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=LEASE)
    store.acquire_lease("b", epoch=0, duration=LEASE)
    assert store.release_lease("a", epoch=1)
    assert not store.release_lease("a", epoch=1)  # once
    taken = store.acquire_lease("b", epoch=0, duration=LEASE)
    assert (taken.holder, taken.epoch) == ("b", 2)
    assert store.live_replicas(LEASE) == {"b"}


def test_force_takes_a_held_lease_and_fences_its_holder(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=LEASE)
    taken = store.acquire_lease("b", epoch=0, duration=LEASE, force=True)
    assert (taken.holder, taken.epoch) == ("b", 2)
    with pytest.raises(Fenced), fencing(Fence(holder="a", epoch=1)):
        store.record_audit(audit("from the old leader"))


def test_a_write_with_a_stale_epoch_is_refused_and_writes_nothing(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=timedelta(seconds=0.2))
    wait_until(
        lambda: store.acquire_lease("b", epoch=0, duration=LEASE).held_by("b"), timeout=5, what="a takeover"
    )
    told: list[Fenced] = []
    with pytest.raises(Fenced), fencing(Fence(holder="a", epoch=1), told.append):
        store.record_audit(audit("stale"))
    assert len(told) == 1
    with fencing(Fence(holder="b", epoch=2)):
        store.record_audit(audit("current"))
        store.check_fence()
    assert [e.detail for e in store.audit_entries()] == ["current"]


def test_outside_a_duty_nothing_is_fenced(store: Store) -> None:
    store.acquire_lease("a", epoch=0, duration=LEASE)
    store.record_audit(audit("a command on a follower"))
    store.check_fence()
    assert len(store.audit_entries()) == 1


def test_on_postgresql_a_takeover_waits_for_the_old_leaders_write_in_flight(
    postgres_url: str,
) -> None:
    store = Store.open(postgres_url)
    try:
        store.acquire_lease("a", epoch=0, duration=timedelta(seconds=0.2))
        wait_until(lambda: store.lease().expires_at <= store.lease().now, timeout=5, what="expiry")
        order: list[str] = []
        # A duty's transaction, begun while `a` still holds epoch 1: the leadership row share-locked.
        with fencing(Fence(holder="a", epoch=1)), store.engine.begin():

            def take_over() -> None:
                store.acquire_lease("b", epoch=0, duration=LEASE)
                order.append("takeover")

            thread = threading.Thread(target=take_over)
            thread.start()
            thread.join(timeout=1.0)
            assert thread.is_alive(), "the takeover waits for the fenced write to commit"
            order.append("a's write commits")
        thread.join(timeout=10)
        assert order == ["a's write commits", "takeover"]
        assert store.lease().holder == "b"
    finally:
        drop_every_table(store.engine.url.render_as_string(hide_password=False))
        store.close()


def test_on_postgresql_a_leader_stopped_in_the_middle_of_a_write_holds_a_takeover_back_only_for_a_while(
    postgres_url: str,
) -> None:
    store, other = Store.open(postgres_url), Store.open(postgres_url)
    try:
        store.acquire_lease("a", epoch=0, duration=timedelta(seconds=0.2))
        wait_until(lambda: store.lease().expires_at <= store.lease().now, timeout=5, what="expiry")
        taken: list[Lease] = []

        def take_over() -> None:
            taken.append(other.acquire_lease("b", epoch=0, duration=LEASE))

        waited: list[float] = []

        def stopped_leaders_write() -> None:
            # `a` is stopped (SIGSTOP, a frozen VM) in the middle of a duty's write: its transaction
            # stays open, the leadership row share-locked, while `b` tries to take the lease over.
            with fencing(Fence(holder="a", epoch=1)), store.engine.begin() as conn:
                started = time.monotonic()
                thread = threading.Thread(target=take_over, daemon=True)
                thread.start()
                thread.join(timeout=IDLE_TRANSACTION_SECONDS + 10)
                waited.append(time.monotonic() - started)
                assert not thread.is_alive(), "the takeover still waits for the stopped leader's transaction"
                # `a` wakes up: the server ended its transaction, and its write never lands.
                conn.execute(sa.text("SELECT 1"))

        with pytest.raises(sa.exc.DBAPIError, match="idle-in-transaction timeout"):
            stopped_leaders_write()
        assert taken[0].held_by("b")
        assert IDLE_TRANSACTION_SECONDS - 1 < waited[0] < IDLE_TRANSACTION_SECONDS + 5
        assert store.lease().holder == "b"
    finally:
        drop_every_table(store.engine.url.render_as_string(hide_password=False))
        other.close()
        store.close()
