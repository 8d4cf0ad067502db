"""Several replicas (issue 16): an acknowledged request belongs to the replica that accepted it.
The leader works off the items of a replica that is gone — once — and never one a live replica,
or this process itself, is still working off."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.frontdoor.inbox import Inbox
from bot.frontdoor.workers import WorkerPool


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def inbox(store: Store, owner: str, live: set[str], pool: WorkerPool, seen: list[tuple[str, str]]) -> Inbox:
    box = Inbox(store=store, workers=pool, clock=lambda: datetime.now(UTC))
    box.owner = owner
    box.live_owners = lambda: set(live)
    box.handle("command", lambda payload, cid, how: seen.append((owner, str(payload["text"]))))
    return box


def test_the_leader_takes_over_only_the_requests_of_a_replica_that_is_gone(store: Store) -> None:
    pool = WorkerPool(2)
    seen: list[tuple[str, str]] = []
    live = {"follower", "leader"}
    follower = inbox(store, "follower", live, pool, seen)
    leader = inbox(store, "leader", live, pool, seen)
    accepted = follower.accept("command", "k1", {"text": "snapshot pre"})
    assert accepted is not None  # stored, acknowledged, and the follower dies before its worker ran it
    mine = leader.accept("command", "k2", {"text": "help"})
    assert mine is not None

    assert leader.replay() == 0  # the follower is alive: it is its request; the other is in flight here
    assert pool.idle(5)
    assert seen == []
    live.discard("follower")
    assert leader.replay() == 1
    assert pool.idle(5)
    assert seen == [("leader", "snapshot pre")]
    assert leader.replay() == 0  # taken and done: never twice
    item: Any = store.inbox_item(accepted[0])
    assert (item.state, item.owner) == ("done", "leader")
    pool.stop(grace=5)


def test_a_replica_that_wakes_after_the_leader_took_its_request_over_does_not_answer_again(
    store: Store,
) -> None:
    """The follower was paused past its lease in the middle of a command: the leader took the
    request over and answered the person; the follower, awake, finds it is no longer its own and
    leaves the answer to the leader (one reply, not two)."""
    pool = WorkerPool(2)
    live = {"follower", "leader"}
    replies: list[str] = []
    leader = Inbox(store=store, workers=pool, clock=lambda: datetime.now(UTC), owner="leader")
    leader.live_owners = lambda: set(live)
    leader.handle("command", lambda payload, cid, how: replies.append(f"leader: {how}"))
    follower = Inbox(store=store, workers=pool, clock=lambda: datetime.now(UTC), owner="follower")

    def paused_mid_command(payload: dict[str, Any], cid: str, how: str) -> None:
        # Its work is done; then it stops answering, and the leader finds it gone.
        live.discard("follower")
        assert leader.replay() == 1
        assert pool.idle(5)
        if follower.still_ours(cid):
            replies.append("follower")

    follower.handle("command", paused_mid_command)
    accepted = follower.accept("command", "k1", {"text": "pause R1 lunch"})
    assert accepted is not None
    follower.work(accepted[0], replay=False)
    assert replies == ["leader: replay"]
    # Its own request, not taken over, is answered by it as before.
    follower.handle("command", lambda payload, cid, how: replies.append(f"own: {follower.still_ours(cid)}"))
    again = follower.accept("command", "k2", {"text": "help"})
    assert again is not None
    follower.work(again[0], replay=False)
    assert replies[-1] == "own: True"
    pool.stop(grace=5)
