"""The kube adapter decodes lists and watches into the caller's type, over real HTTP (the sim).

Typed and raw decoding page alike; a watch hands out the caller's structs with the version to
resume from, and an ERROR event is an error whatever that type; the pages fetched ahead stop when
the caller stops; an expired continue token and a body of the wrong shape are the adapter's errors,
raised where the page would have been, and so is any error of a page fetched ahead; a helper that
dies mid-list loses nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from kubernetes import client

from bot.adapters.kube import Cluster, fetching_ahead, prefetch
from bot.adapters.kube.pages import MAPPER_NICENESS
from bot.core.snapshots import schema
from bot.errors import ClusterError, ClusterForbidden, ContinueExpired, WatchExpired
from bot.frontdoor.cli.connect import connect as terminal_connect
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.contract.workloads import pending_pod


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("small", speed=0.0, seed=1)


@pytest.fixture
def bot(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim)))
    yield cluster
    cluster.close()


def test_a_typed_list_pages_like_a_raw_one_and_keeps_only_the_declared_fields(bot: Cluster) -> None:
    raw = list(bot.list_pages("/api/v1/pods", limit=3))
    typed = list(bot.list_pages("/api/v1/pods", limit=3, item_type=schema.Pod))
    assert len(raw) > 2, "the small scenario has several pages of 3 pods"
    assert [[p["metadata"]["name"] for p in page.items] for page in raw] == [
        [p.metadata.name for p in page.items] for page in typed
    ]
    assert [(p.resource_version, bool(p.continue_token)) for p in raw] == [
        (p.resource_version, bool(p.continue_token)) for p in typed
    ]
    first_raw, first = raw[0].items[0], typed[0].items[0]
    assert isinstance(first, schema.Pod)
    assert first.spec.node_name == first_raw["spec"].get("nodeName")
    assert first.status.pod_ip == first_raw["status"].get("podIP")
    assert not hasattr(first.spec, "tolerations")  # undeclared: skipped, never built


def test_a_typed_watch_hands_out_the_callers_structs_with_the_version_to_resume_from(
    bot: Cluster, sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    core = client.CoreV1Api(kube_api(sim))
    path = "/api/v1/namespaces/default/pods"
    start = next(iter(bot.list_pages(path))).resource_version
    core.create_namespaced_pod("default", pending_pod("watched"))

    events = list(bot.watch(path, resource_version=start, timeout_seconds=3, item_type=schema.Pod))
    changes = [e for e in events if e.type != "BOOKMARK"]
    assert [(e.type, e.object.metadata.name) for e in changes][:1] == [("ADDED", "watched")]
    assert all(isinstance(e.object, schema.Pod) for e in events)
    assert all(int(e.resource_version) > int(start) for e in events)


def test_a_list_the_caller_stops_early_stops_fetching_ahead(bot: Cluster) -> None:
    pages = bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)
    next(pages)
    assert fetching_ahead() == 1, "pages are fetched ahead by a helper (a child process on Linux)"
    pages.close()
    assert fetching_ahead() == 0


def _niceness(pid: int) -> int:
    # /proc/PID/stat: the 19th field, counted from the state (the 3rd) after the command's ")".
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _fetched(cluster: Cluster) -> Generator[Any, None, None]:
    return cast(Generator[Any, None, None], cluster.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod))


def _mapped(cluster: Cluster) -> Generator[Any, None, None]:
    mapped = cluster.map_pages("/api/v1/pods", limit=2, item_type=schema.Pod, transform=lambda items: b"")
    return cast(Generator[Any, None, None], iter(mapped))


@pytest.mark.parametrize(
    ("connect", "lists", "below"),
    [
        (Cluster.connect, _fetched, prefetch.CHILD_NICENESS),
        (Cluster.connect, _mapped, MAPPER_NICENESS),
        (terminal_connect, _fetched, 0),
        (terminal_connect, _mapped, 0),
    ],
    ids=["served-fetcher", "served-mapper", "terminal-fetcher", "terminal-mapper"],
)
def test_the_served_bots_list_helpers_run_below_it_and_a_terminal_commands_at_its_own_priority(
    sim: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    connect: Callable[[ClusterConfig], Cluster],
    lists: Callable[[Cluster], Generator[Any, None, None]],
    below: int,
) -> None:
    # The served bot answers Slack while a list is fetched; a terminal command waits for the list.
    config = ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim))
    with contextlib.closing(connect(config)) as cluster:
        pages = lists(cluster)
        try:
            next(pages)
            next(pages)  # the helper's first page: it has set its priority by then
            (helper,) = prefetch._CHILDREN
            assert _niceness(helper) == _niceness(os.getpid()) + below
        finally:
            pages.close()


def test_an_expired_continue_token_raises_continue_expired_after_the_pages_before_it(
    bot: Cluster, sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    core = client.CoreV1Api(kube_api(sim))
    pages = bot.list_pages("/api/v1/pods", limit=1, item_type=schema.Pod)
    seen = [next(pages)]
    # A write, then a compaction past the list's version: the tokens of this list are now too old.
    # At most a few pages were fetched ahead (PREFETCH), far fewer than the pods there are.
    core.create_namespaced_pod("default", pending_pod("later"))
    sim.control.compact()
    with pytest.raises(ContinueExpired) as expired:
        seen.extend(pages)
    assert expired.value.status == 410
    assert 1 <= len(seen) <= 5
    assert fetching_ahead() == 0


def test_a_body_of_an_unexpected_shape_is_a_cluster_error_that_names_the_list(bot: Cluster) -> None:
    class Misread(msgspec.Struct):
        metadata: dict[str, int]  # names are strings on the wire: this cannot decode

    with pytest.raises(ClusterError) as wrong:
        list(bot.list_pages("/api/v1/namespaces", item_type=Misread))
    assert "GET /api/v1/namespaces returned an unexpected body" in wrong.value.user_message
    assert fetching_ahead() == 0


@pytest.mark.parametrize(
    "item_type",
    [schema.Event, schema.Pod],
    ids=["a-status-fits-the-type-by-accident", "a-status-does-not-fit-the-type"],
)
def test_a_410_error_event_is_watch_expired_whatever_type_the_watch_decodes_into(
    item_type: type[Any], bot: Cluster, sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    core = client.CoreV1Api(kube_api(sim))
    path = "/api/v1/namespaces/default/events"  # served from etcd, so compaction makes it 410
    event = {
        "metadata": {"name": "first"},
        "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "default"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container app",
        "type": "Warning",
    }
    core.create_namespaced_event("default", event)
    stale = next(iter(bot.list_pages(path))).resource_version
    core.create_namespaced_event("default", {**event, "metadata": {"name": "second"}})
    core.patch_namespaced_event("second", "default", {"count": 2})
    sim.control.compact()

    with pytest.raises(WatchExpired) as expired:
        list(bot.watch(path, resource_version=stale, timeout_seconds=5, item_type=item_type))
    assert expired.value.status == 410


def test_an_api_error_of_a_page_fetched_ahead_is_raised_as_the_same_error(
    bot: Cluster, sim: SimCluster
) -> None:
    pages = bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)
    first = next(pages)
    assert first.continue_token
    assert fetching_ahead() == 1
    sim.control.set_transport(error_rate=1.0, error_status=403, path_prefix="/api/v1/pods")
    try:
        # The helper may have fetched a page or two before the fault: those still arrive.
        with pytest.raises(ClusterForbidden) as forbidden:
            for _ in pages:
                pass
    finally:
        sim.control.set_transport()
    assert forbidden.value.status == 403
    assert "not allowed to GET /api/v1/pods" in forbidden.value.user_message
    assert fetching_ahead() == 0


def test_a_helper_that_dies_mid_list_costs_nothing_the_list_goes_on_in_the_caller(bot: Cluster) -> None:
    whole = [
        p.metadata.name for page in bot.list_pages("/api/v1/pods", item_type=schema.Pod) for p in page.items
    ]
    pages = bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)
    names = [p.metadata.name for p in next(pages).items]
    (helper,) = prefetch._CHILDREN
    os.kill(helper, signal.SIGKILL)
    names += [p.metadata.name for page in pages for p in page.items]
    assert names == whole, "every pod once, in order, whether the helper or the caller fetched it"
    assert fetching_ahead() == 0


def test_pages_larger_than_a_shared_slot_come_through_the_pipe_alike(
    bot: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = [
        p.metadata.name for page in bot.list_pages("/api/v1/pods", item_type=schema.Pod) for p in page.items
    ]
    monkeypatch.setattr(
        prefetch, "SLOT_BYTES", 64
    )  # every page of 2 pods is larger: the pipe carries them all
    names = [
        p.metadata.name
        for page in bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)
        for p in page.items
    ]
    assert names == whole
    assert fetching_ahead() == 0


def test_without_memory_for_a_helper_the_list_is_fetched_by_the_caller(
    bot: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = [
        p.metadata.name for page in bot.list_pages("/api/v1/pods", item_type=schema.Pod) for p in page.items
    ]
    monkeypatch.setattr(prefetch, "SLOT_BYTES", 1 << 60)  # the shared slots cannot be mapped
    pages = bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)
    names = [p.metadata.name for p in next(pages).items]
    assert fetching_ahead() == 0, "no helper was started"
    names += [p.metadata.name for page in pages for p in page.items]
    assert names == whole


def names_of(items: list[schema.Pod]) -> bytes:
    return msgspec.json.encode([p.metadata.name for p in items])


def test_a_mapped_list_is_each_page_transformed_in_a_helper_process(bot: Cluster) -> None:
    pages = list(bot.list_pages("/api/v1/pods", limit=3, item_type=schema.Pod))
    mapped = bot.map_pages("/api/v1/pods", limit=3, item_type=schema.Pod, transform=names_of)
    assert fetching_ahead() == 1, "the helper works ahead before the caller asks for a page"
    with mapped:
        got = list(mapped)
    assert [m.data for m in got] == [names_of(p.items) for p in pages]
    assert [(m.count, m.resource_version, m.continue_token != "") for m in got] == [
        (len(p.items), p.resource_version, p.continue_token != "") for p in pages
    ]
    assert fetching_ahead() == 0

    def pid_of(_items: list[schema.Pod]) -> bytes:
        return str(os.getpid()).encode()

    with bot.map_pages("/api/v1/pods", limit=3, item_type=schema.Pod, transform=pid_of) as where:
        pids = [m.data for m in where]
    here = str(os.getpid()).encode()
    assert len(pids) > 2
    assert pids[0] == here, "the first page, fetched before the list was known to have more, is mapped here"
    assert len(set(pids[1:])) == 1, "one helper transformed every later page"
    assert here not in pids[1:], "transformed outside this process"


def test_a_mapped_list_of_one_page_forks_no_helper(bot: Cluster) -> None:
    whole = list(bot.list_pages("/api/v1/pods", item_type=schema.Pod))
    assert len(whole) == 1
    forked: list[int] = []
    os.register_at_fork(after_in_parent=lambda: forked.append(1))
    before = len(forked)
    with bot.map_pages("/api/v1/pods", item_type=schema.Pod, transform=names_of) as mapped:
        got = list(mapped)
    assert [m.data for m in got] == [names_of(whole[0].items)]
    assert len(forked) == before, "a list that fits one page is not worth a fork"
    assert fetching_ahead() == 0


def test_a_mapped_list_nobody_reads_stops_its_helper_when_closed(bot: Cluster) -> None:
    mapped = bot.map_pages("/api/v1/pods", limit=1, item_type=schema.Pod, transform=names_of)
    assert fetching_ahead() == 1
    mapped.close()
    assert fetching_ahead() == 0


def test_an_api_error_of_a_mapped_list_is_raised_where_its_page_would_have_been(
    bot: Cluster, sim: SimCluster
) -> None:
    sim.control.set_transport(error_rate=1.0, error_status=403, path_prefix="/api/v1/pods")
    try:
        with (
            pytest.raises(ClusterForbidden) as forbidden,
            bot.map_pages("/api/v1/pods", limit=2, item_type=schema.Pod, transform=names_of) as mapped,
        ):
            list(mapped)
    finally:
        sim.control.set_transport()
    assert forbidden.value.status == 403
    assert "not allowed to GET /api/v1/pods" in forbidden.value.user_message
    assert fetching_ahead() == 0


def test_a_mapping_helper_that_dies_mid_list_costs_nothing_the_caller_maps_the_rest(bot: Cluster) -> None:
    whole = [names_of(page.items) for page in bot.list_pages("/api/v1/pods", limit=2, item_type=schema.Pod)]
    with bot.map_pages("/api/v1/pods", limit=2, item_type=schema.Pod, transform=names_of) as mapped:
        pages = iter(mapped)
        got = [next(pages).data]
        (helper,) = prefetch._CHILDREN
        os.kill(helper, signal.SIGKILL)
        got += [m.data for m in pages]
    assert got == whole, "every page once, in order, whether the helper or the caller mapped it"
    assert fetching_ahead() == 0


def test_a_list_watch_whose_stop_is_set_opens_no_new_watch_when_its_stream_ends(bot: Cluster) -> None:
    stop = threading.Event()
    stream = bot.list_watch("/api/v1/nodes", timeout_seconds=1, item_type=schema.Node, stop=stop)
    assert next(stream).type == "SYNC"
    stop.set()
    rest: list[Any] = []
    reader = threading.Thread(target=lambda: rest.extend(stream), daemon=True)
    reader.start()
    reader.join(timeout=15)
    assert not reader.is_alive(), "the stream ended with its watch instead of watching again"
