"""Watches: bookmarks keep a quiet watch's version current, and a 410 is answered by a new list."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from bot.adapters.kube import WatchEvent
from bot.errors import WatchExpired
from tests.contract.workloads import pending_pod
from tests.support.backends import TIMEOUT, Backend


def test_a_watch_with_bookmarks_sees_changes_then_bookmarks(backend: Backend) -> None:
    core = client.CoreV1Api(backend.api)
    ns = backend.namespace
    path = f"/api/v1/namespaces/{ns}/pods"
    bot = backend.bot()
    start = next(iter(bot.list_pages(path))).resource_version
    core.create_namespaced_pod(ns, pending_pod("watched"))

    started = time.monotonic()
    events = list(bot.watch(path, resource_version=start, timeout_seconds=5))
    assert time.monotonic() - started < 5 + 3  # the server ends the stream at its timeout

    changes = [e for e in events if e.type != "BOOKMARK"]
    assert changes[0].type == "ADDED"
    assert changes[0].object["metadata"]["name"] == "watched"
    assert all(e.object["metadata"]["name"] == "watched" for e in changes)
    # kube-apiserver's watch cache sends a bookmark 2 s before the watch's timeout (and every
    # minute), and only when its version has moved past the last event this watch was sent.
    bookmarks = [e for e in events if e.type == "BOOKMARK"]
    assert bookmarks, [e.type for e in events]
    last = bookmarks[-1]
    # A bookmark carries only a resourceVersion, at least that of every change sent before it.
    assert last.object == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": last.resource_version},
        "spec": {"containers": None},  # the empty Pod struct, as Go serializes it
        "status": {},
    }
    assert int(last.resource_version) >= max(int(e.resource_version) for e in changes)

    # Resuming from the bookmark replays nothing that was already seen.
    core.create_namespaced_pod(ns, pending_pod("after"))
    resumed = list(bot.watch(path, resource_version=last.resource_version, timeout_seconds=3))
    names = [e.object["metadata"]["name"] for e in resumed if e.type != "BOOKMARK"]
    assert names
    assert set(names) == {"after"}


def _event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": namespace},
        "reason": "BackOff",
        "message": "Back-off restarting failed container app",
        "type": "Warning",
        "source": {"component": "kubelet"},
    }


def test_a_watch_from_a_compacted_version_is_410_and_list_watch_lists_again(backend: Backend) -> None:
    """Events, because their watches are served from etcd: its compaction is what makes them 410.

    (Pods and Deployments are served from the API server's watch cache, which keeps answering
    from older versions after a compaction for as long as they are in its window; a watch that
    falls out of it gets 410 all the same, and list_watch answers it the same way.)
    """
    core = client.CoreV1Api(backend.api)
    ns = backend.namespace
    path = f"/api/v1/namespaces/{ns}/events"
    bot = backend.bot()
    core.create_namespaced_event(ns, _event("first", ns))
    stale = next(iter(bot.list_pages(path))).resource_version
    core.create_namespaced_event(ns, _event("second", ns))
    core.patch_namespaced_event("second", ns, {"count": 2})
    # etcd keeps the compaction revision itself: with two writes since `stale`, the first change
    # after it is gone, so the watch cannot start there.
    backend.expire_history()

    with pytest.raises(WatchExpired) as expired:
        list(bot.watch(path, resource_version=stale, timeout_seconds=5))
    assert expired.value.status == 410
    assert expired.value.user_message.endswith(": The resourceVersion for the provided watch is too old.")

    stream = bot.list_watch(path, resource_version=stale, timeout_seconds=5)
    try:
        sync = next(stream)
        assert sync.type == "SYNC"
        assert sorted(e["metadata"]["name"] for e in sync.object["items"]) == ["first", "second"]
        assert int(sync.resource_version) > int(stale)
        core.create_namespaced_event(ns, _event("third", ns))
        added = _next_change(stream)
        assert (added.type, added.object["metadata"]["name"]) == ("ADDED", "third")
    finally:
        stream.close()


def _next_change(stream: Any) -> WatchEvent:
    deadline = time.monotonic() + TIMEOUT
    for event in stream:
        if event.type != "BOOKMARK":
            return event  # type: ignore[no-any-return]
        assert time.monotonic() < deadline
    raise AssertionError("the stream ended")
