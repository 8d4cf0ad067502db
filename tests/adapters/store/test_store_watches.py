"""The watches table (migration 7): a live owner's watch is never taken, a stale one is; every
driver write names its owner, so a process that lost the watch writes nothing; a published summary
and the posts it owes are one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.adapters.store.schema import watch_samples
from bot.adapters.store.watches import MAX_SAMPLES
from bot.records import WatchRow

NOW = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _watch(store: Store, **fields: object) -> int:
    row = WatchRow(id=0, cluster="prod", channel="C0OPS", started_by="U0A", started_at=NOW, **fields)  # type: ignore[arg-type]
    return store.create_watch(row)


def test_a_watch_round_trips(store: Store) -> None:
    watch_id = _watch(
        store, nodegroups=("ng-a",), namespaces=("web",), target='{"x": 1}', run_id="r1", step_id="s1"
    )
    row = store.watch(watch_id)
    assert row is not None
    assert (row.nodegroups, row.namespaces, row.target, row.state, row.owner) == (
        ("ng-a",),
        ("web",),
        '{"x": 1}',
        "live",
        "",
    )
    assert store.watch_of_step("r1", "s1") == row
    assert store.watches() == [row]
    assert store.watch(2**70) is None


def test_a_live_owners_watch_is_not_taken_a_stale_ones_is(store: Store) -> None:
    watch_id = _watch(store)
    stale = NOW - timedelta(seconds=15)
    assert store.claim_watch(watch_id, owner="p1", now=NOW, stale_before=stale)
    assert store.claim_watch(watch_id, owner="p1", now=NOW, stale_before=stale)  # ours: kept
    assert not store.claim_watch(watch_id, owner="p2", now=NOW + timedelta(seconds=5), stale_before=stale)
    assert store.heartbeat_watch(watch_id, owner="p1", now=NOW + timedelta(seconds=10))
    later = NOW + timedelta(seconds=30)
    assert store.claim_watch(watch_id, owner="p2", now=later, stale_before=later - timedelta(seconds=15))
    # p1 lost it: its heartbeat and its publish write nothing.
    assert not store.heartbeat_watch(watch_id, owner="p1", now=later)
    assert not store.publish_watch(
        watch_id, owner="p1", summary="{}", at=later, outbox=[("k", '{"text": "x"}')]
    )
    assert store.messages(f"watch:{watch_id}") == {}
    row = store.watch(watch_id)
    assert row is not None
    assert (row.owner, row.summary) == ("p2", "")


def test_publish_stores_the_summary_and_the_owed_posts_together_and_can_end(store: Store) -> None:
    watch_id = _watch(store)
    assert store.claim_watch(watch_id, owner="p1", now=NOW, stale_before=NOW)
    assert store.publish_watch(
        watch_id,
        owner="p1",
        summary='{"a": 1}',
        at=NOW,
        outbox=[("batch:m1", '{"text": "two"}')],
        markers=["m1", "m2"],
    )
    refs = store.messages(f"watch:{watch_id}")
    assert set(refs) == {"batch:m1", "m1", "m2"}
    assert (refs["batch:m1"].ts, refs["batch:m1"].owner) == ("", "")  # an outbox row waiting
    assert refs["m1"].ts == "batched"
    assert store.request_watch_end(watch_id, by="U0B")
    assert store.publish_watch(
        watch_id, owner="p1", summary='{"a": 2}', at=NOW, end_reason="unwatched by <@U0B>"
    )
    row = store.watch(watch_id)
    assert row is not None
    assert (row.state, row.end_reason, row.summary, row.end_requested_by) == (
        "ended",
        "unwatched by <@U0B>",
        '{"a": 2}',
        "U0B",
    )
    assert not store.claim_watch(watch_id, owner="p2", now=NOW, stale_before=NOW + timedelta(days=1))
    assert not store.request_watch_end(watch_id, by="U0B")
    assert store.watches() == []
    assert store.watches(live=False) == [row]


def test_only_the_watchs_driver_samples_and_a_watch_keeps_at_most_max_samples(store: Store) -> None:
    watch_id = _watch(store)
    assert store.claim_watch(watch_id, owner="p1", now=NOW, stale_before=NOW)
    assert not store.add_watch_sample(watch_id, owner="p2", at=NOW, counts={"CrashLoopBackOff": 1})
    assert store.watch_samples(watch_id) == []
    assert store.add_watch_sample(watch_id, owner="p1", at=NOW, counts={"Pending/unschedulable stuck": 2})
    assert store.watch_samples(watch_id) == [(NOW, {"Pending/unschedulable stuck": 2})]
    # Nearly full, written in one transaction (5,000 commits one by one would take seconds).
    with store.engine.begin() as conn:
        conn.execute(
            watch_samples.insert(),
            [
                {"watch_id": watch_id, "at": NOW + timedelta(seconds=i), "counts": '{"CrashLoopBackOff": 1}'}
                for i in range(1, MAX_SAMPLES - 1)
            ],
        )
    last = NOW + timedelta(hours=2)
    assert store.add_watch_sample(watch_id, owner="p1", at=last, counts={"CrashLoopBackOff": 3})
    assert not store.add_watch_sample(watch_id, owner="p1", at=last + timedelta(seconds=30), counts={})
    samples = store.watch_samples(watch_id)
    assert len(samples) == MAX_SAMPLES == 5000
    assert samples[-1] == (last, {"CrashLoopBackOff": 3})
    # Another watch's samples are its own.
    other = _watch(store)
    assert store.watch_samples(other) == []
