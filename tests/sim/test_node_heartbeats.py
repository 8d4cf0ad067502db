"""The kubelet's periodic writes on the simulated clock: each node's Lease renewed every
`lease_renew_seconds`, its status posted every 5 minutes (`lastHeartbeatTime`), both written
straight to the store, and a heartbeat that moves nothing else wakes no controller."""

from __future__ import annotations

from collections import Counter

from bot.sim import SimCluster
from bot.sim.apiserver.store import Record
from tests.support.sim_clock import play_seconds, stamp_seconds


def test_leases_are_renewed_and_heartbeats_posted_on_the_simulated_clock_and_wake_no_controller() -> None:
    with SimCluster("small", speed=0.0, seed=1) as sim:
        core = sim.core
        store = core.store
        nodes = [e.name for e in store.entries("nodes")]
        changes: list[Record] = []
        store.listeners.append(changes.append)
        start = core.clock.now()
        play_seconds(sim, 600)
        now = core.clock.now()
        by_kind = Counter(r.entry.kind.key for r in changes)
        # A Lease renewal per node every 10 s, a node status post per node every 5 minutes; no
        # workload is touched by either.
        assert not {"pods", "daemonsets.apps", "deployments.apps", "replicasets.apps"} & set(by_kind)
        assert by_kind["leases.coordination.k8s.io"] == len(nodes) * 60
        assert by_kind["nodes"] == len(nodes) * 2
        for name in nodes:
            lease = store.get("leases.coordination.k8s.io", "kube-node-lease", name)
            assert lease is not None
            assert (
                now - 10 <= stamp_seconds(lease["spec"]["renewTime"]) <= now + 1e-3
            )  # microseconds, rounded
            assert lease["spec"]["holderIdentity"] == name
            node = store.get("nodes", "", name)
            assert node is not None
            beats = {c["lastHeartbeatTime"] for c in node["status"]["conditions"]}
            assert len(beats) == 1
            assert start + 300 <= stamp_seconds(beats.pop()) <= now
        assert all(r.heartbeat_only for r in changes if r.entry.kind.key == "nodes")
        # Each stored version's view is its bytes, decoded (the renewals hand theirs over).
        for r in changes:
            assert r.entry.view() == r.entry.obj()
        # A heartbeat queues no controller's work; a node change that is more than one does.
        queues = core.engine._queues
        with store.lock:
            core.clock.jump_to(now + 5)  # past the last post's second, so this one moves it
            core.lifecycle._posted[nodes[0]] = 0.0
            seen = len(changes)
            core.lifecycle._renew(nodes[0])
            beat = changes[seen + 1]  # after the Lease's renewal
            assert (beat.entry.kind.key, beat.entry.name, beat.heartbeat_only) == ("nodes", nodes[0], True)
            assert {name: list(q) for name, q in queues.items() if q} == {}
            node = store.get("nodes", "", nodes[0])
            assert node is not None
            node["metadata"]["labels"]["team"] = "web"
            entry = core.api.write("nodes", node)
            assert changes[-1].entry is entry
            assert not changes[-1].heartbeat_only
            assert queues["daemonset"]
            assert queues["kubelet"]


def test_time_moved_on_at_once_renews_each_lease_once_at_its_last_due_time() -> None:
    # A rehearsal's idle sim stands still for hours and is then brought up to the bot's clock at
    # once (`advance`): renewing each Lease every 10 s on the way was most of the catching up (a
    # fleet rehearsal's CPU), and nothing reads a renewal but the last.
    with SimCluster("small", speed=0.0, seed=1) as sim:
        core = sim.core
        store = core.store
        nodes = [e.name for e in store.entries("nodes")]
        changes: list[Record] = []
        store.listeners.append(changes.append)
        core.engine.advance(3600 + 5)
        now = core.clock.now()
        by_kind = Counter(r.entry.kind.key for r in changes)
        assert by_kind["leases.coordination.k8s.io"] == len(nodes)
        assert by_kind["nodes"] == len(nodes)  # the status posted once too, with that renewal
        for name in nodes:
            lease = store.get("leases.coordination.k8s.io", "kube-node-lease", name)
            assert lease is not None
            assert now - 10 <= stamp_seconds(lease["spec"]["renewTime"]) <= now - 5 + 1e-3
            node = store.get("nodes", "", name)
            assert node is not None
            assert {stamp_seconds(c["lastHeartbeatTime"]) for c in node["status"]["conditions"]} == {
                stamp_seconds(lease["spec"]["renewTime"]) // 1
            }
        # Running on, each Lease is renewed every 10 s again.
        changes.clear()
        play_seconds(sim, 60)
        assert Counter(r.entry.kind.key for r in changes)["leases.coordination.k8s.io"] == len(nodes) * 6
