"""Issue 13's acceptance on the sim: a watch driven through the real kube adapter, the real Slack
client against the Slack stub and a real SQLite store, through the `eks-nodegroups` upgrade."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.store import Store
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.watches.service import subject
from bot.core.watches.spec import Target
from bot.core.watches.summary import Summary
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import WatchHarness as Harness
from tests.support.watch_harness import published as _published
from tests.support.watch_harness import step as _step
from tests.support.watch_harness import wait as _wait
from tests.support.watch_threads import milestone_lines_once

CHANNEL = "C0WATCH"
UPGRADED = ("control-plane", "istio", "ng-shared", "others", "logging")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _truth(kubeconfig: Path) -> dict[str, tuple[int, int]]:
    """Per node group, read back through the API: (nodes, nodes on 1.25.16)."""
    cluster = Cluster.connect(ClusterConfig(name="truth", kubeconfig=kubeconfig))
    try:
        nodes = cluster.get_json("/api/v1/nodes")["items"]
    finally:
        cluster.close()
    out: dict[str, list[int]] = {}
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        group = next((labels[k] for k in DEFAULT_NODE_GROUP_LABELS if k in labels), "")
        if not group and labels.get("eks.amazonaws.com/compute-type") == "fargate":
            group = "fargate"  # EKS Fargate nodes carry no node-group label
        counts = out.setdefault(group, [0, 0])
        counts[0] += 1
        counts[1] += "v1.25.16" in node["status"]["nodeInfo"]["kubeletVersion"]
    return {g: (c[0], c[1]) for g, c in out.items()}


def _thread(stub: SlackStub, card_ts: str) -> list[str]:
    return [m["text"] for m in stub.posted(CHANNEL) if m.get("thread_ts") == card_ts]


def _figures(summary: Summary) -> dict[str, tuple[int, int]]:
    return {g.name: (g.total, g.on_target) for g in summary.groups}


def _assert_thread_once(stub: SlackStub, store: Store, watch_id: int, card_ts: str) -> list[str]:
    lines = milestone_lines_once(_thread(stub, card_ts))
    refs = store.messages(subject(watch_id))
    assert all(r.ts for r in refs.values()), [r.key for r in refs.values() if not r.ts]
    return lines


def test_watch_follows_the_eks_upgrade_card_equals_truth_and_each_milestone_once(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    harness = Harness(store, slack_stub, kubeconfig)
    # A target that cannot settle during the test: the watch runs until `unwatch`.
    target = Target(nodegroups=UPGRADED, kubelet_version="1.25.16", settle=timedelta(hours=2))
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", target=target)
    try:
        assert harness.runner.scan() == [row.id]
        card = _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        driver = harness.runner.drivers[row.id]
        sim_eks.control.run_upgrade()
        _step(sim_eks, 60, steps=150, driver=driver)
        truth = _truth(kubeconfig)
        assert all(on == total for g, (total, on) in truth.items() if g != "fargate"), truth
        # The card catches up within its trailing edge, then `unwatch` ends it with a final summary.
        with contextlib.suppress(AssertionError):
            _wait(lambda: _figures(_published(store, row.id)) == truth, timeout=15)
        assert _figures(_published(store, row.id)) == truth
        harness.service.request_end(row.id, by="U0ALICE")
        ended = _wait(lambda: (w := store.watch(row.id)) and w.state == "ended" and w, timeout=15)
        assert ended.end_reason == "unwatched by <@U0ALICE>"
        harness.runner.drivers[row.id].thread.join(timeout=15)  # its last posts are made after the commit
        final = _published(store, row.id)
        assert _figures(final) == truth
        lines = _assert_thread_once(slack_stub, store, row.id, card)
        cards = [c for c in slack_stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]
        assert len(cards) == 1
        # Every node that left or joined is in the thread, once (new ones by name).
        joined = [line for line in lines if "joined and is Ready" in line]
        removed = [line for line in lines if "drained and removed" in line]
        assert len(joined) == len(removed) == sum(t for g, (t, _) in truth.items() if g != "fargate")
        assert lines[-1].startswith(":checkered_flag: Watch ended — unwatched by")
    finally:
        harness.runner.shutdown()


def test_dropped_streams_5xx_and_a_forced_410_mid_upgrade_lose_no_transition(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    harness = Harness(store, slack_stub, kubeconfig)
    target = Target(nodegroups=UPGRADED, kubelet_version="1.25.16", settle=timedelta(hours=2))
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", target=target)
    try:
        harness.runner.scan()
        card = _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        driver = harness.runner.drivers[row.id]
        sim_eks.control.run_upgrade()
        _step(sim_eks, 60, steps=20, driver=driver)
        # Every stream cut, and every reconnection refused with 503 for a while: meanwhile the
        # upgrade goes on and the history the streams would resume from is compacted away.
        sim_eks.control.set_transport(error_rate=1.0, error_status=503, path_prefix="/api")
        sim_eks.control.drop_watches()
        _wait(lambda: sum(s.restarts for s in driver.streams) >= len(driver.streams), timeout=20)
        # Blind meanwhile, and it says so: what it shows is from before (it once said nothing).
        blind = _wait(lambda: (w := _published(store, row.id)).blind_since is not None and w, timeout=20)
        assert "503" in blind.blind
        _step(sim_eks, 60, steps=15, driver=None)  # nothing to read meanwhile
        sim_eks.control.compact()
        sim_eks.control.set_transport()
        _wait(lambda: all(s.syncs >= 2 for s in driver.streams), timeout=30)  # 410 → listed again
        seen = _wait(lambda: (w := _published(store, row.id)).blind_since is None and w, timeout=20)
        assert seen.seen_again_at is not None
        _step(sim_eks, 60, steps=10, driver=driver)
        sim_eks.control.drop_watches()  # a plain drop: resumed from the last version, no list
        _step(sim_eks, 60, steps=100, driver=driver)
        truth = _truth(kubeconfig)
        with contextlib.suppress(AssertionError):
            _wait(lambda: _figures(_published(store, row.id)) == truth, timeout=15)
        assert _figures(_published(store, row.id)) == truth
        lines = _assert_thread_once(slack_stub, store, row.id, card)
        joined = [line for line in lines if "joined and is Ready" in line]
        removed = [line for line in lines if "drained and removed" in line]
        assert len(joined) == len(removed) == sum(t for g, (t, _) in truth.items() if g != "fargate")
    finally:
        harness.runner.shutdown()


def test_unwatch_ends_a_watch_whose_cluster_cannot_be_read(
    sim_small: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    kubeconfig = sim_small.write_kubeconfig(tmp_path / "kubeconfig")
    sim_small.stop()  # nothing answers there any more
    harness = Harness(store, slack_stub, kubeconfig)
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE")
    try:
        harness.runner.scan()
        driver = harness.runner.drivers[row.id]
        # Every stream has tried the cluster and failed at least once.
        _wait(lambda: driver.streams and all(s.restarts >= 1 for s in driver.streams), timeout=15)
        harness.service.request_end(row.id, by="U0BOB")
        ended = _wait(lambda: (w := store.watch(row.id)) and w.state == "ended" and w, timeout=15)
        # Why it could not be read, as the API (here: nothing listening) said it.
        assert ended.end_reason.startswith(
            "unwatched by <@U0BOB> (the cluster could not be read: cluster sim "
        )
        assert "refused the connection at http://127.0.0.1:" in ended.end_reason
        assert ended.summary == ""  # nothing was ever listed, so nothing is claimed about the cluster
    finally:
        harness.runner.shutdown()


def test_a_deleted_watch_card_is_posted_again_once_and_its_thread_stays(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    harness = Harness(store, slack_stub, kubeconfig)
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE")
    try:
        assert harness.runner.scan() == [row.id]
        first = _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        slack_stub.delete_message(CHANNEL, first)
        driver = harness.runner.drivers[row.id]
        sim_eks.control.run_upgrade()
        _step(sim_eks, 60, steps=40, driver=driver)  # the card changes: its edit finds it deleted
        new = _wait(
            lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts != first and ref.ts
        )
        _step(sim_eks, 60, steps=20, driver=driver)
        harness.service.request_end(row.id, by="U0ALICE")
        _wait(lambda: (w := store.watch(row.id)) and w.state == "ended", timeout=15)
        harness.runner.drivers[row.id].thread.join(timeout=15)
        tops = [c.params for c in slack_stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]
        assert len(tops) == 2  # the first card and its one re-post, not one per edit
        links = [m for m in slack_stub.posted(CHANNEL) if "posted again" in m["text"]]
        assert len(links) == 1
        assert links[0]["thread_ts"] == first
        assert f"p{new.replace('.', '')}" in links[0]["text"]
        # Milestones after the re-post still go to the first card's thread.
        final = [m for m in slack_stub.posted(CHANNEL) if "Watch ended" in m["text"]]
        assert len(final) == 1
        assert final[0]["thread_ts"] == first
        _assert_thread_once(slack_stub, store, row.id, first)
    finally:
        harness.runner.shutdown()
