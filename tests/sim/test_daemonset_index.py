"""The DaemonSet controller's kept per-node index (its pods by node, each node's answers and their
running sums) agrees with a full recount from the stored objects, through pod and node changes,
an eligibility change, a template roll with maxUnavailable and minReadySeconds, and a node-group
replacement; and the status the controller writes is that recount."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.sim import SimCluster
from bot.sim.apiserver.clock import rfc3339
from bot.sim.apiserver.objects import (
    daemon_node,
    pod_active,
    pod_available,
    pod_ready,
    pod_terminating,
    template_hash,
)
from bot.sim.controllers.workloads import DaemonSets, daemon_eligible

Obj = dict[str, Any]
KEY = ("default", "agent")


def _controller(sim: SimCluster) -> DaemonSets:
    found = next(c for c in sim.core.engine.controllers if c.name == "daemonset")
    assert isinstance(found, DaemonSets)
    return found


def _recount(sim: SimCluster, key: tuple[str, str], now: float) -> dict[str, Any]:
    """Everything a sync decides from and reports, recomputed from the stored bodies."""
    store = sim.core.store
    entry = store.entry("daemonsets.apps", *key)
    assert entry is not None
    ds = entry.obj()
    template = ds["spec"]["template"]
    current = template_hash(template)
    min_ready = int(ds["spec"].get("minReadySeconds", 0))
    eligible = {
        n.name for n in store.entries("nodes") if daemon_eligible(template.get("spec") or {}, n.obj())
    }
    by_node: dict[str, list[Obj]] = {}
    for e in sorted(store.entries("pods", key[0]), key=lambda e: e.key):
        if e.controller == entry.uid:
            pod = e.obj()
            by_node.setdefault(daemon_node(pod), []).append(pod)
    out: dict[str, Any] = {
        "create": [],
        "unavailable": 0,
        "old_unavailable": {},
        "old_available": {},
        "misscheduled": {},
        "scheduled": 0,
        "ready": 0,
        "available": 0,
        "updated": 0,
        "desired": len(eligible),
    }
    for node in sorted(eligible | set(by_node)):
        here = by_node.get(node, [])
        active = [p for p in here if pod_active(p)]
        if node not in eligible:
            if active:
                out["misscheduled"][node] = [p["metadata"]["name"] for p in active]
            continue
        if not active and not any(pod_terminating(p) for p in here):
            out["create"].append(node)
        if active:
            out["scheduled"] += 1
        for p in active:
            out["ready"] += pod_ready(p)
            out["available"] += pod_available(p, min_ready, now)
            out["updated"] += p["metadata"]["labels"].get("controller-revision-hash") == current
        if not active:
            out["unavailable"] += 1
            continue
        first = active[0]
        old = first["metadata"]["labels"].get("controller-revision-hash") != current
        if not pod_available(first, min_ready, now):
            out["unavailable"] += 1
            if old:
                out["old_unavailable"][node] = first["metadata"]["name"]
        elif old:
            out["old_available"][node] = first["metadata"]["name"]
    return out


def _kept(sim: SimCluster, key: tuple[str, str], now: float) -> dict[str, Any]:
    """The same figures from the controller's index, brought up to date as a sync would."""
    controller = _controller(sim)
    ix = controller.index(key)
    assert ix is not None
    ix.refresh(now, controller._node_entry, controller._node)
    scheduled, ready, available, updated, unavailable = ix.sums
    return {
        "create": sorted(ix.create),
        "unavailable": unavailable,
        "old_unavailable": {n: e.name for n, e in ix.old_unavailable.items()},
        "old_available": {n: e.name for n, e in ix.old_available.items()},
        "misscheduled": {n: [e.name for e in es] for n, es in ix.misscheduled.items()},
        "scheduled": scheduled,
        "ready": ready,
        "available": available,
        "updated": updated,
        "desired": len(ix.eligible),
    }


def _check(sim: SimCluster, key: tuple[str, str] = KEY, *, status: bool = True) -> dict[str, Any]:
    store = sim.core.store
    with store.lock:
        now = sim.core.clock.now()
        want = _recount(sim, key, now)
        assert _kept(sim, key, now) == want
        if status:  # settled: the last sync saw the cluster as it is now
            ds = store.get("daemonsets.apps", *key)
            assert ds is not None
            st = ds["status"]
            assert st["desiredNumberScheduled"] == want["desired"]
            assert st["currentNumberScheduled"] == want["scheduled"]
            assert st["numberMisscheduled"] == len(want["misscheduled"])
            assert st["numberReady"] == want["ready"]
            assert st["updatedNumberScheduled"] == want["updated"]
            assert st.get("numberAvailable", 0) == want["available"]
            assert st.get("numberUnavailable", 0) == max(0, want["desired"] - want["available"])
            assert st["observedGeneration"] == ds["metadata"]["generation"]
        return want


def _agent(max_unavailable: int | str = 2, image: str = "agent:1") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {"agent": "yes"},
                    "containers": [{"name": "a", "image": image, "resources": {"requests": {"cpu": "10m"}}}],
                },
            },
        },
    }


def _label(sim: SimCluster, node: str, value: str | None) -> None:
    obj = sim.core.store.get("nodes", "", node)
    assert obj is not None
    labels = obj["metadata"].setdefault("labels", {})
    if value is None:
        labels.pop("agent", None)
    else:
        labels["agent"] = value
    sim.core.api.write("nodes", obj)


def _agent_pods(sim: SimCluster) -> list[Obj]:
    return [e.obj() for e in sim.core.store.entries("pods", "default") if e.labels.get("app") == "agent"]


def test_the_kept_counts_equal_a_recount_through_pod_and_node_changes(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=11)
    store, api = sim.core.store, sim.core.api
    for _ in range(4):
        sim.control.add_node("workers")
    nodes = sorted(e.name for e in store.entries("nodes"))
    for n in nodes[:-1]:
        _label(sim, n, "yes")
    sim.control.apply(_agent())
    sim.control.advance(0)
    got = _check(sim)
    assert got["create"] == []
    assert got["desired"] == len(nodes) - 1
    sim.control.advance(30)
    got = _check(sim)
    assert got["ready"] == got["desired"] == len(nodes) - 1

    # A pod turns NotReady, then Failed: the counts follow; a failed pod is replaced.
    pod = sorted(_agent_pods(sim), key=lambda p: p["metadata"]["name"])[0]
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    ready["status"] = "False"
    api.write("pods", pod, status=True)
    sim.control.advance(0)
    assert _check(sim)["ready"] == len(nodes) - 2
    failed = store.get("pods", "default", pod["metadata"]["name"])
    assert failed is not None
    failed["status"]["phase"] = "Failed"
    api.write("pods", failed, status=True)
    sim.control.advance(0)
    _check(sim)
    sim.control.advance(30)
    assert _check(sim)["ready"] == len(nodes) - 1

    # A node leaves the selector (its pod is misscheduled and deleted), another joins it.
    _label(sim, nodes[0], None)
    _label(sim, nodes[-1], "yes")
    sim.control.advance(0)
    _check(sim)
    sim.control.advance(60)
    got = _check(sim)
    assert got["misscheduled"] == {}
    assert got["desired"] == len(nodes) - 1
    assert nodes[0] not in {daemon_node(p) for p in _agent_pods(sim) if pod_active(p)}

    # A pod set free of the DaemonSet leaves its index: the node gets a new pod beside it.
    freed = next(p for p in _agent_pods(sim) if daemon_node(p) == nodes[1] and pod_active(p))
    del freed["metadata"]["ownerReferences"]
    api.write("pods", freed)
    sim.control.advance(0)
    _check(sim)
    sim.control.advance(30)
    assert _check(sim)["ready"] == len(nodes) - 1

    # A node goes, another comes (labelled later).
    sim.control.remove_node(nodes[2])
    sim.control.advance(0)
    _check(sim)
    added = sim.control.add_node("workers")
    sim.control.advance(0)
    _check(sim)
    _label(sim, added, "yes")
    sim.control.advance(30)
    got = _check(sim)
    assert got["desired"] == got["ready"] == len(nodes) - 1

    # The template changes: a roll within maxUnavailable 2, checked as it goes.
    ds = store.get("daemonsets.apps", *KEY)
    assert ds is not None
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    api.write("daemonsets.apps", ds)
    sim.control.advance(0)
    seen_old_available = False
    for _ in range(80):
        got = _check(sim)
        seen_old_available = seen_old_available or bool(got["old_available"])
        desired = got["desired"]
        assert got["unavailable"] <= 2, got  # maxUnavailable
        if got["updated"] == desired and got["available"] == desired:
            break
        sim.control.advance(1)
    else:
        raise AssertionError(f"the roll did not finish: {got}")
    assert seen_old_available
    owned = [p for p in _agent_pods(sim) if pod_active(p) and p["metadata"].get("ownerReferences")]
    assert {c["image"] for p in owned for c in p["spec"]["containers"]} == {"agent:2"}


def test_the_kept_counts_equal_a_recount_through_a_node_group_replacement(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=12)
    key = ("kube-system", "kube-proxy")
    sim.control.advance(0)
    _check(sim, key)
    op = sim.control.replace_node_group("workers", "1.30.2")
    for _ in range(80):
        sim.control.advance(7)
        _check(sim, key)
        if sim.control.operation(op["id"])["state"] != "InProgress":
            break
    assert sim.control.operation(op["id"])["state"] == "Successful"
    got = _check(sim, key)
    assert got["desired"] == got["scheduled"] == got["ready"] == len(sim.core.store.entries("nodes"))


def test_a_pod_inside_min_ready_seconds_becomes_available_in_the_kept_counts_as_time_passes(
    sim_factory: Callable[..., SimCluster],
) -> None:
    """No pod change marks the node when a Ready pod passes minReadySeconds: the index re-reads
    such nodes at every sync, so its counts follow the clock as a recount does. (The written status
    is not compared here: nothing syncs the set when minReadySeconds pass, as before the index.)"""
    sim = sim_factory("small", speed=0, seed=13)
    store, api = sim.core.store, sim.core.api
    for n in sorted(e.name for e in store.entries("nodes")):
        _label(sim, n, "yes")
    agent = _agent()
    agent["spec"]["minReadySeconds"] = 7
    sim.control.apply(agent)
    sim.control.advance(60)
    desired = _check(sim, status=False)["desired"]
    assert _check(sim, status=False)["available"] == desired
    pod = sorted(_agent_pods(sim), key=lambda p: p["metadata"]["name"])[0]
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    ready["status"] = "False"
    api.write("pods", pod, status=True)
    sim.control.advance(0)
    assert _check(sim, status=False)["available"] == desired - 1
    # Ready again from now: available only 7 s later, with no write in between.
    back = store.get("pods", "default", pod["metadata"]["name"])
    assert back is not None
    ready = next(c for c in back["status"]["conditions"] if c["type"] == "Ready")
    ready["status"] = "True"
    ready["lastTransitionTime"] = rfc3339(sim.core.clock.now())
    api.write("pods", back, status=True)
    sim.control.advance(0)
    got = _check(sim, status=False)
    assert (got["ready"], got["available"]) == (desired, desired - 1)
    sim.control.advance(3)
    assert _check(sim, status=False)["available"] == desired - 1
    sim.control.advance(5)
    assert _check(sim, status=False)["available"] == desired
