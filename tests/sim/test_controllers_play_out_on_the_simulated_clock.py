"""Controllers, scheduler and kubelets behave like the real ones, stepped on a frozen clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.sim import SimCluster
from bot.sim.apiserver.objects import pod_ready
from tests.support.sim_clock import play_seconds, stamp_seconds

Obj = dict[str, Any]


def _pods(sim: SimCluster, namespace: str, **labels: str) -> list[Obj]:
    return [
        e.obj()
        for e in sim.core.store.entries("pods", namespace)
        if all(e.labels.get(k) == v for k, v in labels.items())
    ]


def _frozen(sim_factory: Callable[..., SimCluster], scenario: str = "small") -> SimCluster:
    return sim_factory(scenario, speed=0, seed=7)


def test_a_rolling_update_never_exceeds_max_surge_nor_drops_below_max_unavailable(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    sim.control.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "roll", "namespace": "default"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "roll"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
                "template": {
                    "metadata": {"labels": {"app": "roll"}},
                    "spec": {"containers": [{"name": "c", "image": "app:1"}]},
                },
            },
        }
    )
    sim.control.advance(60)
    store = sim.core.store
    deployment = store.get("deployments.apps", "default", "roll")
    assert deployment is not None
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "app:2"
    sim.core.api.write("deployments.apps", deployment)
    seen_total, seen_ready = [], []
    for _ in range(40):
        sim.control.advance(1)
        live = [p for p in _pods(sim, "default", app="roll") if not p["metadata"].get("deletionTimestamp")]
        seen_total.append(len(live))
        seen_ready.append(sum(1 for p in live if pod_ready(p)))
    assert max(seen_total) <= 5
    assert min(seen_ready) >= 3
    final = store.get("deployments.apps", "default", "roll")
    assert final is not None
    status = final["status"]
    assert (status["replicas"], status["updatedReplicas"], status["availableReplicas"]) == (4, 4, 4)
    assert status["observedGeneration"] == final["metadata"]["generation"] == 2
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"
    images = {c["image"] for p in _pods(sim, "default", app="roll") for c in p["spec"]["containers"]}
    assert images == {"app:2"}


def test_a_daemonset_keeps_one_pod_per_node_even_on_cordoned_nodes(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    node = sorted(sim.control.status()["nodeGroups"]["workers"]["nodes"])[0]
    node_obj = sim.core.store.get("nodes", "", node)
    assert node_obj is not None
    node_obj["spec"]["unschedulable"] = True
    sim.core.api.write("nodes", node_obj)
    new = sim.control.add_node("workers")
    sim.control.advance(30)
    proxies = _pods(sim, "kube-system", **{"k8s-app": "kube-proxy"})
    nodes = sorted(p["spec"]["nodeName"] for p in proxies)
    assert nodes == sorted(e.name for e in sim.core.store.entries("nodes"))
    assert new in nodes
    assert node in nodes
    ds = sim.core.store.get("daemonsets.apps", "kube-system", "kube-proxy")
    assert ds is not None
    assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == 5


def test_a_statefulset_creates_its_ordinals_one_after_the_other(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    sts = sim.core.store.get("statefulsets.apps", "shop", "db")
    assert sts is not None
    sts["spec"]["replicas"] = 4
    sim.core.api.write("statefulsets.apps", sts)
    sim.control.advance(0)
    names = {p["metadata"]["name"] for p in _pods(sim, "shop", app="db")}
    assert names == {"db-0", "db-1", "db-2"}, "db-3 waits until db-2 is Ready"
    sim.control.advance(30)
    assert {p["metadata"]["name"] for p in _pods(sim, "shop", app="db")} == {"db-0", "db-1", "db-2", "db-3"}
    claims = {e.name for e in sim.core.store.entries("persistentvolumeclaims", "shop")}
    assert claims == {"data-db-0", "data-db-1", "data-db-2", "data-db-3"}


def test_an_unschedulable_pod_gets_the_real_failed_scheduling_event(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    sim.control.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "greedy", "namespace": "default"},
            "spec": {
                "nodeSelector": {"role": "workers"},
                "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "64"}}}],
            },
        }
    )
    pod = sim.core.store.get("pods", "default", "greedy")
    assert pod is not None
    assert not pod["spec"].get("nodeName")
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert scheduled["message"] == (
        "0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 Insufficient cpu. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    events = [e.obj() for e in sim.core.store.entries("events", "default")]
    assert any(e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "greedy" for e in events)


def test_a_crash_loop_counts_restarts_and_backs_off(sim_factory: Callable[..., SimCluster]) -> None:
    sim = _frozen(sim_factory)
    sim.control.inject_fault(
        {
            "type": "crash_loop",
            "match": {"namespace": "shop", "labels": {"app": "api"}},
            "crash_after": "5s",
            "crash_logs": ["panic: cannot reach database"],
        }
    )
    sim.control.advance(120)
    pod = _pods(sim, "shop", app="api")[0]
    status = pod["status"]["containerStatuses"][0]
    # Crashes after 5 s, then waits 10 s, 20 s, 40 s, 80 s before each restart.
    assert status["restartCount"] == 4
    assert status["lastState"]["terminated"]["exitCode"] == 1
    waiting = status["state"].get("waiting") or {}
    running = "running" in status["state"]
    assert running or waiting.get("reason") == "CrashLoopBackOff"
    from bot.sim.apiserver.tables import pod_status_reason

    assert pod_status_reason(pod) in ("CrashLoopBackOff", "Running")
    logs = sim.core.kubelets.logs(pod, "api", previous=True)
    assert logs == ["panic: cannot reach database"]


def test_an_image_that_cannot_be_pulled_cycles_err_image_pull_and_back_off(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    sim.control.inject_fault(
        {"type": "image_pull_error", "match": {"image": "nginx:*"}, "pull_error": "not found"}
    )
    sim.control.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "pull", "namespace": "default"},
            "spec": {"containers": [{"name": "web", "image": "nginx:9.9"}]},
        }
    )
    sim.control.advance(4)
    reasons = []
    for _ in range(6):
        pod = sim.core.store.get("pods", "default", "pull")
        assert pod is not None
        reasons.append(pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"])
        sim.control.advance(5)
    assert set(reasons) == {"ErrImagePull", "ImagePullBackOff"}
    events = {e.obj()["message"] for e in sim.core.store.entries("events", "default")}
    assert 'Back-off pulling image "nginx:9.9"' in events


def test_a_node_going_not_ready_leaves_its_evicted_pods_terminating(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    store = sim.core.store
    db_node = next(
        p["spec"]["nodeName"] for p in _pods(sim, "shop", app="db") if p["metadata"]["name"] == "db-0"
    )
    sim.control.inject_fault({"type": "node_not_ready", "node": db_node})
    sim.control.advance(45)
    node = store.get("nodes", "", db_node)
    assert node is not None
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["message"]) == ("Unknown", "Kubelet stopped posting node status.")
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} >= {
        ("node.kubernetes.io/unreachable", "NoExecute")
    }
    sim.control.advance(300)
    db0 = store.get("pods", "shop", "db-0")
    assert db0 is not None
    assert db0["metadata"].get("deletionTimestamp"), "the taint manager deleted it after 300 s"
    sim.control.advance(600)
    db0 = store.get("pods", "shop", "db-0")
    assert db0 is not None, "no kubelet confirms the deletion: it stays Terminating"
    from bot.sim.apiserver.tables import pod_status_reason

    assert pod_status_reason(db0) == "Terminating"


def test_a_replacement_pod_on_another_node_reports_multi_attach_until_the_volume_is_released(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = _frozen(sim_factory)
    store = sim.core.store
    db_node = next(
        p["spec"]["nodeName"] for p in _pods(sim, "shop", app="db") if p["metadata"]["name"] == "db-0"
    )
    node = store.get("nodes", "", db_node)
    assert node is not None
    zone = node["metadata"]["labels"]["topology.kubernetes.io/zone"]
    claim = store.get("persistentvolumeclaims", "shop", "data-db-0")
    assert claim is not None
    assert claim["metadata"]["labels"]["topology.kubernetes.io/zone"] == zone
    node["spec"]["unschedulable"] = True
    sim.core.api.write("nodes", node)
    from bot.sim.apiserver.api import DeleteOptions
    from bot.sim.apiserver.resources import KINDS_BY_KEY

    sim.core.api.delete(KINDS_BY_KEY["pods"], "shop", "db-0", DeleteOptions())
    sim.control.advance(8)
    db0 = store.get("pods", "shop", "db-0")
    assert db0 is not None
    assert not db0["spec"].get("nodeName"), "no other worker is in the volume's zone"
    assert "node(s) had volume node affinity conflict" in next(
        c["message"] for c in db0["status"]["conditions"] if c["type"] == "PodScheduled"
    )
    # Nodes join round-robin across the zones: three new workers cover the volume's zone.
    for _ in range(3):
        sim.control.add_node("workers")
    sim.control.advance(8)
    db0 = store.get("pods", "shop", "db-0")
    assert db0 is not None
    assert db0["spec"].get("nodeName") not in (None, db_node)
    messages = [
        e.obj()["message"]
        for e in store.entries("events", "shop")
        if e.obj()["involvedObject"]["name"] == "db-0"
    ]
    assert any(m.startswith('Multi-Attach error for volume "pvc-') for m in messages)
    sim.control.advance(40)
    db0 = store.get("pods", "shop", "db-0")
    assert db0 is not None
    assert pod_ready(db0)


def test_the_same_seed_builds_the_same_cluster(sim_factory: Callable[..., SimCluster]) -> None:
    def names(sim: SimCluster) -> list[tuple[str, str, str]]:
        return sorted((e.namespace, e.name, e.uid) for e in sim.core.store.entries("pods"))

    first = sim_factory("small", speed=0, seed=42)
    second = sim_factory("small", speed=0, seed=42)
    third = sim_factory("small", speed=0, seed=43)
    assert names(first) == names(second)
    assert names(first) != names(third)


def _probe_failures(sim: SimCluster) -> dict[tuple[str, str], tuple[int, str]]:
    """Each failing container's Unhealthy Event: its count and when it last happened."""
    return {
        (e["involvedObject"]["name"], e["involvedObject"]["fieldPath"]): (e["count"], e["lastTimestamp"])
        for e in (x.obj() for x in sim.core.store.entries("events", "shop"))
        if e["reason"] == "Unhealthy"
    }


def test_a_failing_readiness_probe_caught_up_at_once_counts_every_probe_in_one_write(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # A rehearsal's idle sim is brought forward hours at once (`advance`): writing a failing
    # probe's Event every 30 s on the way was a twentieth of a fleet rehearsal's CPU, and nothing
    # reads it but its last count and time — which are what the probes one by one leave.
    fault = {"type": "not_ready", "match": {"namespace": "shop", "labels": {"app": "api"}}}
    stepped, jumped = _frozen(sim_factory), _frozen(sim_factory)
    for sim in (stepped, jumped):
        sim.control.inject_fault(fault)
        sim.control.advance(5)
    # One sim as its running engine plays time: a second at a time, every timer due by then fired.
    start = stepped.core.clock.now()
    play_seconds(stepped, 600)
    writes: list[str] = []
    jumped.core.store.listeners.append(
        lambda record: writes.append(record.entry.name) if record.entry.kind.key == "events" else None
    )
    jumped_start = jumped.core.clock.now()
    jumped.core.engine.advance(600)
    failing = _probe_failures(jumped)
    assert failing
    assert all(count == 21 for count, _ in failing.values())  # the first and 20 repeats
    # The same Events, last seen at the same point of each sim's own ten minutes: the two sims
    # started a moment apart, so their whole-second timestamps may be a second apart too.
    one_by_one = _probe_failures(stepped)
    assert failing.keys() == one_by_one.keys()
    for key, (count, last) in failing.items():
        other_count, other_last = one_by_one[key]
        assert count == other_count
        offset, other_offset = stamp_seconds(last) - jumped_start, stamp_seconds(other_last) - start
        assert abs(offset - other_offset) <= 1, (last, other_last)
    unhealthy = {
        e.name for e in jumped.core.store.entries("events", "shop") if e.obj()["reason"] == "Unhealthy"
    }
    assert sorted(w for w in writes if w in unhealthy) == sorted(unhealthy)  # once each, not twenty times
    # Running on, the probe fails (and is counted) every 30 s again.
    jumped.core.engine.advance(30)
    assert all(count == 22 for count, _ in _probe_failures(jumped).values())


def test_a_log_tail_is_the_last_lines_of_the_whole_log_however_it_is_read(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # The kubelet makes only the lines a tail can answer: the same as cutting the whole log.
    sim = _frozen(sim_factory)
    sim.control.inject_fault(
        {
            "type": "logs",
            "match": {"namespace": "shop", "labels": {"app": "api"}},
            "logs": [
                {"lines": ["{time} tick {pod}", "tock on {node}"], "every": "1s"},
                {"lines": ["slow"], "every": "7s", "after": "3s"},
                "once",
            ],
        }
    )
    sim.control.advance(3000)
    pod = _pods(sim, "shop", app="api")[0]
    logs = sim.core.kubelets.logs
    whole = logs(pod, "api")
    assert len(whole) == 5000  # the kubelet's cap: the log is longer
    assert "once" not in whole
    assert whole.count("slow") > 300
    for tail in (0, 1, 2, 3, 50, 999, 5000, 7000):
        assert logs(pod, "api", tail_lines=tail) == (whole[-tail:] if tail else [])
    stamped = logs(pod, "api", timestamps=True)
    assert logs(pod, "api", tail_lines=40, timestamps=True) == stamped[-40:]
    assert logs(pod, "api", tail_lines=40, since_seconds=10) == logs(pod, "api", since_seconds=10)[-40:]
