"""A watch samples its unhealthy pods by class for the run report (issue 31): when the counts
changed since its last sample, at most every 30 s of its clock, once as it starts and once as it
ends; an unchanged state writes nothing. The real store (SQLite), the real watch state folding pod
events, the watch service without Slack (`deliveries=None`), on a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.kube.objects import CRASHLOOP, IMAGEPULL
from bot.core.rendering import Renderer
from bot.core.watches.model import WatchState
from bot.core.watches.service import SAMPLE_SECONDS, WatchService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.watch_objects import GROUP_LABEL, crashing, pod

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _service(store: Store, clock: FakeClock, owner: str = "p1") -> WatchService:
    return WatchService(
        store=store,
        deliveries=None,
        renderer=Renderer([BUILTIN_TEMPLATES]),
        clock=clock,
        owner=owner,
        node_group_labels=(GROUP_LABEL,),
    )


def test_a_watch_samples_its_unhealthy_pods_when_they_change_at_most_every_30_s(store: Store) -> None:
    assert SAMPLE_SECONDS == 30
    clock = FakeClock(T0)
    service = _service(store, clock)
    row = service.start(cluster="prod", channel="C0OPS", started_by="U0ALICE", run_id="", step_id="")
    assert service.claim(row)
    state = WatchState(service.spec(row))
    for kind in ("node", "deployment", "daemonset", "statefulset", "event"):
        state.sync(kind, [], clock())
    state.sync("pod", [pod(f"ok-{i}", deployment="ok") for i in range(5)], clock())

    service.publish(row, state)  # the first sample, at once: nothing unhealthy
    assert store.watch_samples(row.id) == [(T0, {})]

    clock.advance(timedelta(seconds=10))
    service.publish(row, state)  # unchanged within 30 s: nothing written
    clock.advance(timedelta(seconds=40))
    service.publish(row, state)  # unchanged after 30 s: still nothing (no change, no sample)
    assert len(store.watch_samples(row.id)) == 1

    state.apply("pod", "ADDED", crashing("api-1", deployment="api"), clock())
    state.apply("pod", "ADDED", crashing("api-2", deployment="api"), clock())
    changed = clock()
    service.publish(row, state)  # changed, 50 s after the last sample: written
    assert store.watch_samples(row.id)[-1] == (changed, {CRASHLOOP: 2})

    clock.advance(timedelta(seconds=5))
    state.apply(
        "pod", "ADDED", pod("img-1", ready=False, waiting="ImagePullBackOff", deployment="img"), clock()
    )
    service.publish(row, state)  # changed but only 5 s later: held back
    assert len(store.watch_samples(row.id)) == 2
    clock.advance(timedelta(seconds=26))
    service.publish(row, state)  # the held change, once 30 s have passed (the driver publishes on)
    assert store.watch_samples(row.id)[-1] == (clock(), {CRASHLOOP: 2, IMAGEPULL: 1})
    clock.advance(timedelta(seconds=1))
    service.publish(row, state)
    assert len(store.watch_samples(row.id)) == 3

    # A new process driving the watch (after a restart) knows the last sample from the store.
    again = _service(store, clock)
    clock.advance(timedelta(seconds=3))
    again.publish(row, state)
    assert len(store.watch_samples(row.id)) == 3

    # Ending (unwatch): the final sample at once, whatever the time since the last.
    service.request_end(row.id, by="U0BOB")
    published = again.publish(row, state)
    assert published.ended
    samples = store.watch_samples(row.id)
    assert samples[-1] == (clock(), {CRASHLOOP: 2, IMAGEPULL: 1})
    assert len(samples) == 4
    # Ended: no more samples, and nothing from a process that does not drive the watch.
    assert not store.add_watch_sample(row.id, owner="p1", at=clock(), counts={})
