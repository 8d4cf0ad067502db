"""The elector and leader-only triggers in one process, on a SQLite store: winning starts the
duties, losing (another replica's epoch, a fenced write) pauses them at once, and a graceful stop
releases the lease. (Several real processes on PostgreSQL: `test_replicas.py`.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.announcements.service import AnnouncementService
from bot.core.leadership import Leadership
from bot.core.people import StaticDirectory
from bot.core.runs.service import RunService
from bot.errors import Fenced
from bot.frontdoor.leadership import Elector
from bot.frontdoor.probes import Probes
from bot.frontdoor.triggers import Triggers
from bot.records import Fence
from tests.support.signing import get

LEASE, RENEW = timedelta(seconds=15), timedelta(seconds=5)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def triggers_for(store: Store, replica: str = "a") -> Triggers:
    """The triggers of a replica, built with its standing (as `assemble` builds them)."""
    clock = lambda: datetime.now(UTC)  # noqa: E731
    return Triggers(
        announcements=AnnouncementService(store=store, clock=clock),
        runs=RunService(store=store, directory=StaticDirectory(), clock=clock),
        leadership=Leadership(replica=replica, check_fence=store.check_fence),
    )


@pytest.fixture
def triggers(store: Store) -> Iterator[Triggers]:
    t = triggers_for(store)
    yield t
    t.shutdown()


def elector_for(store: Store, triggers: Triggers) -> tuple[Elector, list[Fence]]:
    """The elector of the triggers' replica, on the same standing."""
    elected: list[Fence] = []

    def on_elected(fence: Fence) -> None:
        elected.append(fence)
        triggers.lead(fence)

    elector = Elector(
        store=store,
        leadership=triggers.leadership,
        duration=LEASE,
        renew=RENEW,
        on_elected=on_elected,
        on_deposed=triggers.follow,
    )
    return elector, elected


def test_winning_the_lease_starts_the_duties_and_renewing_does_not_start_them_again(
    store: Store, triggers: Triggers
) -> None:
    elector, elected = elector_for(store, triggers)
    assert elector.try_once()
    assert elector.try_once()
    assert elected == [Fence(holder="a", epoch=1)]
    assert (elector.state.is_leader, elector.state.epoch, elector.state.changes) == (True, 1, 1)
    with triggers.duty() as leading:
        assert leading


def test_a_replica_whose_lease_was_taken_stops_its_duties_at_its_next_round(
    store: Store, triggers: Triggers
) -> None:
    elector, _ = elector_for(store, triggers)
    assert elector.try_once()
    store.acquire_lease("b", epoch=0, duration=LEASE, force=True)
    assert not elector.try_once()
    assert (elector.state.is_leader, elector.state.changes) == (False, 2)
    assert not triggers.leading
    with triggers.duty() as leading:
        assert not leading  # a job that fires now does nothing


def test_a_duty_that_finds_itself_fenced_stops_every_duty_before_the_next_round(
    store: Store, triggers: Triggers
) -> None:
    elector, _ = elector_for(store, triggers)
    assert elector.try_once()
    store.acquire_lease("b", epoch=0, duration=LEASE, force=True)
    # The fence is checked before the job's first step: it raises Fenced. A duty of the timers the
    # lead started may find the fence first (seen once in a whole-suite run): then this replica
    # already follows, and the duty is not run at all. Never is it run as the leader's.
    with contextlib.suppress(Fenced), triggers.duty() as leading:
        assert not leading, "a fenced replica ran a duty as the leader"
    assert not elector.state.is_leader
    assert not triggers.leading
    assert store.lease().holder == "b"


def test_a_graceful_stop_releases_the_lease_for_the_next_replica(store: Store, triggers: Triggers) -> None:
    elector, _ = elector_for(store, triggers)
    assert elector.try_once()
    other_triggers = triggers_for(store, replica="b")
    other, _ = elector_for(store, other_triggers)
    assert not other.try_once()
    elector.stop(release=True)
    assert not triggers.leading
    assert other.try_once()
    assert other.state.epoch == 2
    other_triggers.shutdown()


def test_probes_say_ready_with_the_database_and_slack_up_and_not_after_sigterm(store: Store) -> None:
    calls: list[str] = []
    probes = Probes(store=store, slack_ping=lambda: calls.append("auth.test"))
    status, body = probes.readyz()
    assert status == "200 OK"
    assert b"database ok" in body
    probes.readyz()
    assert calls == ["auth.test"]  # cached: Slack is asked at most every SLACK_TTL
    probes.stop.set()
    assert probes.readyz()[0].startswith("503")
    assert probes.healthz()[0] == "200 OK"


def test_readiness_fails_when_slack_does_not_answer(store: Store) -> None:
    def down() -> None:
        raise OSError("connection refused")

    status, body = Probes(store=store, slack_ping=down).readyz()
    assert status.startswith("503")
    assert b"slack failing" in body


def test_socket_mode_serves_the_probes_on_a_port_of_their_own(store: Store) -> None:
    probes = Probes(store=store, slack_ping=lambda: None)
    server = probes.serve(host="127.0.0.1", port=0)
    try:
        base = f"http://127.0.0.1:{server.effective_port}"
        assert get(f"{base}/healthz").status == 200
        ready = get(f"{base}/readyz")
        assert (ready.status, "database ok" in ready.body) == (200, True)
        assert get(f"{base}/slack/events").status == 404
    finally:
        server.close()
