"""The sim's kept indexes (pod views, the scheduler's per-node usage, owners' dependents in key
order) agree with a recomputation from the stored objects, across creates, deletes, owner changes
and a whole node-group replacement."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bot.sim import SimCluster
from bot.sim.apiserver.objects import PodView
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.controllers.scheduler import _nano, requests_of

Obj = dict[str, Any]


def _view(view: PodView) -> dict[str, Any]:
    return {name: getattr(view, name) for name in PodView.__slots__}


def _check(sim: SimCluster) -> None:
    core = sim.core
    store = core.store
    with store.lock:
        pods = store.entries("pods")
        # Every pod's kept view is the view of its stored body.
        for e in pods:
            assert _view(e.pod()) == _view(PodView(e.obj())), e.key
        # The scheduler's running per-node usage equals the sum over the pods bound to each node.
        want: dict[str, list[int]] = {}
        for e in pods:
            node = e.fields.get("spec.nodeName", "")
            if not node or e.fields.get("status.phase") in ("Succeeded", "Failed"):
                continue
            cpu, mem = requests_of(e.obj())
            used = want.setdefault(node, [0, 0, 0])
            used[0] += 1
            used[1] += _nano(cpu)
            used[2] += round(mem)
        nodes = {e.name for e in store.entries("nodes")} | set(want)
        for node in nodes:
            assert core.scheduler._used_on(node) == want.get(node, [0, 0, 0]), node
        # The nodes by load: every node of the store once, at its count, each level in name order.
        levels = core.scheduler._levels
        expect: dict[int, list[str]] = {}
        for e in store.entries("nodes"):
            expect.setdefault(want.get(e.name, [0])[0], []).append(e.name)
        assert levels == expect
        # dependents_of: every object naming the owner, in key order, whatever was cached before.
        owners: dict[str, list[tuple[str, tuple[str, str]]]] = {}
        for bucket in store.buckets.values():
            for key in bucket.keys:
                for uid in bucket.entries[key].owners:
                    owners.setdefault(uid, []).append((bucket.kind.key, key))
        for uid, deps in owners.items():
            assert [(e.kind.key, e.key) for e in store.dependents_of(uid)] == sorted(deps), uid


def _deployment(name: str, replicas: int) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "app:1",
                            "resources": {"requests": {"cpu": "150m", "memory": "96Mi"}},
                        }
                    ]
                },
            },
        },
    }


def test_indexes_stay_right_across_creates_deletes_and_owner_changes(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=3)
    _check(sim)  # built from the scenario's objects
    sim.control.apply(_deployment("grow", 6))
    sim.control.advance(30)
    _check(sim)
    api, store = sim.core.api, sim.core.store
    # Scale down (the ReplicaSet deletes pods), then up again: the usage and dependents follow.
    for replicas in (2, 9):
        d = store.get("deployments.apps", "default", "grow")
        assert d is not None
        d["spec"]["replicas"] = replicas
        api.write("deployments.apps", d)
        sim.control.advance(40)
        _check(sim)
        live = [e for e in store.entries("pods", "default") if e.labels.get("app") == "grow"]
        assert len([e for e in live if not e.pod().deleting]) == replicas
    # A pod set free of its ReplicaSet (ownerReferences removed): it leaves the RS's dependents,
    # and the ReplicaSet makes a replacement.
    pod = next(e for e in store.entries("pods", "default") if e.labels.get("app") == "grow")
    rs_uid = pod.controller
    obj = pod.obj()
    del obj["metadata"]["ownerReferences"]
    api.write("pods", obj)
    assert pod.key not in [e.key for e in store.dependents_of(rs_uid)]
    sim.control.advance(30)
    _check(sim)
    # A pod that finishes (Succeeded) stops counting against its node.
    done = store.get("pods", *pod.key)
    assert done is not None
    assert done["spec"].get("nodeName")
    done["status"]["phase"] = "Succeeded"
    api.write("pods", done, status=True)
    _check(sim)
    api.delete(KINDS_BY_KEY["pods"], "default", pod.key[1])
    sim.control.advance(60)
    _check(sim)


def test_indexes_stay_right_through_a_node_group_replacement(sim_factory: Callable[..., SimCluster]) -> None:
    sim = sim_factory("small", speed=0, seed=5)
    sim.control.apply(_deployment("spread", 8))
    sim.control.advance(30)
    op = sim.control.replace_node_group("workers", "1.30.2")
    for _ in range(80):
        sim.control.advance(15)
        _check(sim)
        if sim.control.operation(op["id"])["state"] != "InProgress":
            break
    final = sim.control.operation(op["id"])
    assert final["state"] == "Successful", final
    # The DaemonSets cover exactly the new nodes (their eligibility answers were per node version).
    nodes = {e.name for e in sim.core.store.entries("nodes")}
    for ds in sim.core.store.objects("daemonsets.apps"):
        status = ds["status"]
        assert status["desiredNumberScheduled"] == status["currentNumberScheduled"] == len(nodes)
        assert status["numberMisscheduled"] == 0


def test_a_pod_pinned_to_a_node_that_cannot_take_it_is_told_about_every_node(
    sim_factory: Callable[..., SimCluster],
) -> None:
    """The scheduler looks only at the pinned nodes to place a pod pinned by name, but words the
    FailedScheduling message over all nodes, as the real one does."""
    sim = sim_factory("small", speed=0, seed=4)
    store, api = sim.core.store, sim.core.api
    names = [e.name for e in store.entries("nodes")]
    target = names[0]
    node = store.get("nodes", "", target)
    assert node is not None
    node["spec"]["unschedulable"] = True
    api.write("nodes", node)
    pinned = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pinned", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "app:1"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target]}]}
                        ]
                    }
                }
            },
        },
    }
    sim.control.apply(pinned)
    sim.control.advance(1)
    pod = store.get("pods", "default", "pinned")
    assert pod is not None
    assert not pod["spec"].get("nodeName")
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    n = len(names)
    assert scheduled["message"].startswith(
        f"0/{n} nodes are available: 1 node(s) were unschedulable, "
        f"{n - 1} node(s) didn't match Pod's node affinity/selector."
    ), scheduled["message"]
    # Uncordoned, it lands on its node.
    node = store.get("nodes", "", target)
    assert node is not None
    node["spec"]["unschedulable"] = False
    api.write("nodes", node)
    sim.control.advance(1)
    pod = store.get("pods", "default", "pinned")
    assert pod is not None
    assert pod["spec"]["nodeName"] == target


def test_pods_selecting_nodes_by_label_follow_the_labels_as_they_change(
    sim_factory: Callable[..., SimCluster],
) -> None:
    """The scheduler keeps the nodes each nodeSelector matches; a node labelled, unlabelled or
    relabelled changes where the next pods go (and a pending pod lands when a node gets the label)."""
    sim = sim_factory("small", speed=0, seed=6)
    store, api = sim.core.store, sim.core.api
    names = sorted(e.name for e in store.entries("nodes"))
    first, second = names[0], names[-1]

    def pod(name: str) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "app:1"}], "nodeSelector": {"tier": "special"}},
        }

    def label(node_name: str, value: str | None) -> None:
        node = store.get("nodes", "", node_name)
        assert node is not None
        labels = node["metadata"].setdefault("labels", {})
        if value is None:
            labels.pop("tier", None)
        else:
            labels["tier"] = value
        api.write("nodes", node)

    def node_of(name: str) -> str:
        got = store.get("pods", "default", name)
        assert got is not None
        return str(got["spec"].get("nodeName") or "")

    sim.control.apply(pod("a"))
    sim.control.advance(1)
    assert node_of("a") == ""  # no node has the label yet
    label(first, "special")
    sim.control.advance(1)
    assert node_of("a") == first
    sim.control.apply(pod("b"))
    sim.control.advance(1)
    assert node_of("b") == first
    label(first, "ordinary")  # relabelled: the selector no longer matches it
    label(second, "special")
    sim.control.apply(pod("c"))
    sim.control.advance(1)
    assert node_of("c") == second
    label(second, None)
    sim.control.apply(pod("d"))
    sim.control.advance(1)
    assert node_of("d") == ""
    _check(sim)


def test_pods_waiting_for_nodes_that_turn_ready_together_are_spread_over_all_of_them(
    sim_factory: Callable[..., SimCluster], tmp_path: Path
) -> None:
    """A scenario's pods are created before its nodes are Ready; the nodes turn Ready at one
    simulated instant. The scheduler places the waiting pods once, after the instant's last node
    (not once per node, piling them onto the first one Ready, a retry of every pending pod per node
    that costs nodes × pods decisions at 5,000 nodes), so they spread over the group."""
    nodes = 12
    scenario = tmp_path / "spread.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "spread",
                "cluster": {"version": "1.29.4", "warmup": "2m"},
                "node_groups": [{"name": "workers", "count": nodes}],
                "objects": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": "web", "namespace": "default"},
                        "spec": {
                            "replicas": nodes,
                            "selector": {"matchLabels": {"app": "web"}},
                            "template": {
                                "metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "app", "image": "web:1"}]},
                            },
                        },
                    }
                ],
            }
        )
    )
    sim = sim_factory(scenario, speed=0, seed=7)
    pods = [e for e in sim.core.store.entries("pods", "default") if e.labels.get("app") == "web"]
    assert len(pods) == nodes
    placed = Counter(str(e.fields.get("spec.nodeName", "")) for e in pods)
    assert "" not in placed
    assert len(placed) == nodes, placed
    _check(sim)
