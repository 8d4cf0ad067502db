"""The watch driver's streams (issue 13) on both backends, as the bot's RBAC identity: one list +
watch per kind of `KINDS`; a stream the server ends is resumed from its last version without a new
list (bookmarks keep it current); one resumed from a compacted version gets 410 and lists again
(a SYNC that replaces the kind's state)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from kubernetes import client

from bot.core.kube.wire import WEvent, WNode
from bot.core.watches.schema import KINDS
from bot.frontdoor.watching import Stream
from tests.support.backends import TIMEOUT, Backend


def _event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": namespace},
        "reason": "BackOff",
        "message": "Back-off restarting failed container app",
        "type": "Warning",
        "source": {"component": "kubelet"},
    }


def _take(out: queue.Queue[tuple[str, str, Any]], match: Any, what: str) -> tuple[str, str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            item = out.get(timeout=0.5)
        except queue.Empty:
            continue
        if match(item):
            return item
    raise AssertionError(f"no {what} within {TIMEOUT}s")


def test_every_kind_lists_then_streams_and_resumes_without_listing_again(backend: Backend) -> None:
    bot = backend.bot()
    out: queue.Queue[tuple[str, str, Any]] = queue.Queue()
    stop = threading.Event()
    streams = [Stream(bot, kind, out, stop, stream_seconds=2).start() for kind in KINDS]
    try:
        synced: set[str] = set()
        while synced != set(KINDS):
            kind, _, items = _take(out, lambda i: i[1] == "SYNC", "SYNC of every kind")
            synced.add(kind)
            if kind == "node":
                assert all(isinstance(n, WNode) for n in items)  # typed structs, not client models
        time.sleep(5)  # every stream was ended by the server at least twice and resumed
        (name,) = backend.add_nodes("watched", 1, version="v1.25.16")
        _, _, node = _take(
            out, lambda i: i[0] == "node" and i[1] == "ADDED" and i[2].metadata.name == name, "ADDED node"
        )
        assert isinstance(node, WNode)
        assert all(s.syncs == 1 for s in streams), {
            s.kind: (s.syncs, s.restarts, s.resource_version) for s in streams
        }
        # (A resumed watch on a pooled connection the server had closed may fail once and be
        # started again after a backoff: still from its version, so no list.)
    finally:
        stop.set()


def test_a_stream_resumed_from_a_compacted_version_lists_again(backend: Backend) -> None:
    core = client.CoreV1Api(backend.api)
    ns = backend.namespace
    bot = backend.bot()
    core.create_namespaced_event(ns, _event("first", ns))
    stale = next(iter(bot.list_pages("/api/v1/events"))).resource_version
    core.create_namespaced_event(ns, _event("second", ns))
    core.patch_namespaced_event("second", ns, {"count": 2})
    backend.expire_history()

    out: queue.Queue[tuple[str, str, Any]] = queue.Queue()
    stop = threading.Event()
    stream = Stream(bot, "event", out, stop, stream_seconds=5)
    stream.resource_version = stale  # as a driver that was away while the history was compacted
    stream.start()
    try:
        _, _, items = _take(out, lambda i: i[1] == "SYNC", "a new list after the 410")
        assert all(isinstance(e, WEvent) for e in items)
        assert {"first", "second"} <= {e.metadata.name for e in items if e.metadata.namespace == ns}
        assert stream.syncs == 1
        core.create_namespaced_event(ns, _event("third", ns))
        _take(out, lambda i: i[1] == "ADDED" and i[2].metadata.name == "third", "the event after the list")
    finally:
        stop.set()


def test_list_watch_reduces_every_listed_item_and_every_event_as_it_is_decoded(backend: Backend) -> None:
    bot = backend.bot()
    # The real control plane starts with no nodes: one is there before the list, another comes after.
    backend.add_nodes("listed", 1, version="v1.25.16")
    stop = threading.Event()
    seen: list[str] = []

    def reduce(node: WNode) -> str:
        seen.append(node.metadata.name)
        return f"reduced:{node.metadata.name}"

    out: queue.Queue[tuple[str, str, Any]] = queue.Queue()

    def run() -> None:
        for event in bot.list_watch(
            "/api/v1/nodes", item_type=WNode, timeout_seconds=2, stop=stop, reduce=reduce
        ):
            out.put(("node", event.type, event.object))

    threading.Thread(target=run, daemon=True).start()
    try:
        _, _, listed = _take(out, lambda i: i[1] == "SYNC", "SYNC")
        assert listed["items"]
        assert listed["items"] == [f"reduced:{name}" for name in seen]
        (name,) = backend.add_nodes("reduced", 1, version="v1.25.16")
        _take(out, lambda i: i[1] == "ADDED" and i[2] == f"reduced:{name}", "reduced ADDED node")
        assert name in seen
    finally:
        stop.set()
