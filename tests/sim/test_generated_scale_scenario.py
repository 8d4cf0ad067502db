"""The `large` generator builds a settled, consistent cluster (tested on a smaller variant)."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import Callable

from bot.sim import SimCluster, load_scenario
from bot.sim.apiserver.api import DeleteOptions
from bot.sim.apiserver.objects import pod_ready
from bot.sim.apiserver.resources import KINDS_BY_KEY


def test_a_generated_cluster_is_settled_consistent_and_served_in_pages(
    sim_factory: Callable[..., SimCluster],
) -> None:
    scenario = load_scenario("large")
    assert scenario.generate is not None
    assert (scenario.generate["nodes"], scenario.generate["pods"]) == (5000, 150000)
    scenario.generate.update(nodes=100, pods=3000, deployments=70, namespaces=10, node_groups=4)
    sim = sim_factory(scenario, speed=0, seed=5)
    store = sim.core.store
    assert store.count("nodes") == 100
    assert store.count("pods") == 3000
    sizes = [len(e.raw) for e in store.entries("pods")]
    assert 4500 <= sum(sizes) / len(sizes) <= 6000, "pods are shaped like real ~5 KB ones"
    per_node = Counter(e.fields["spec.nodeName"] for e in store.entries("pods"))
    assert set(per_node) == {e.name for e in store.entries("nodes")}
    for d in store.objects("deployments.apps"):
        owned = [
            e.obj()
            for rs in store.dependents_of(d["metadata"]["uid"], "replicasets.apps")
            for e in store.dependents_of(rs.uid, "pods")
        ]
        assert len(owned) == d["spec"]["replicas"] == d["status"]["availableReplicas"]
        assert all(pod_ready(p) for p in owned)
    for ds in store.objects("daemonsets.apps"):
        assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == 100

    names: list[str] = []
    token = ""
    while True:
        query = f"?limit=500&continue={token}" if token else "?limit=500"
        with urllib.request.urlopen(f"{sim.url}/api/v1/pods{query}", timeout=30) as response:
            page = json.loads(response.read())
        names.extend(p["metadata"]["name"] for p in page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert len(names) == len(set(names)) == 3000

    # The generated cluster is live: a deleted pod is replaced and scheduled like any other.
    victim = next(e for e in store.entries("pods") if e.name.startswith("svc-0001-"))
    sim.core.api.delete(KINDS_BY_KEY["pods"], victim.namespace, victim.name, DeleteOptions())
    sim.control.advance(30)
    assert store.entry("pods", victim.namespace, victim.name) is None
    rs_name = victim.obj()["metadata"]["ownerReferences"][0]["name"]
    rs = store.get("replicasets.apps", victim.namespace, rs_name)
    assert rs is not None
    replicas = store.dependents_of(victim.controller, "pods")
    assert len(replicas) == rs["spec"]["replicas"] == rs["status"]["readyReplicas"]
    assert all(pod_ready(e.obj()) for e in replicas)


def test_a_generated_daemonset_does_not_roll_when_its_controller_first_writes_it(
    sim_factory: Callable[..., SimCluster],
) -> None:
    """The generated DaemonSet templates are stored as the API server defaults them: their
    controller's first write (on a new node) keeps the template, its hash and generation, so the
    existing pods stay and only the new node gets one."""
    scenario = load_scenario("large")
    assert scenario.generate is not None
    scenario.generate.update(nodes=20, pods=300, deployments=10, namespaces=3, node_groups=2)
    sim = sim_factory(scenario, speed=0, seed=2)
    store = sim.core.store
    before = {e.key for e in store.entries("pods", "kube-system")}
    new = sim.control.add_node("ng-01")
    sim.control.advance(120)
    for ds in store.objects("daemonsets.apps"):
        assert ds["metadata"]["generation"] == 1
        status = ds["status"]
        assert status["desiredNumberScheduled"] == status["updatedNumberScheduled"] == 21
        assert status["numberAvailable"] == 21
    after = store.entries("pods", "kube-system")
    assert before <= {e.key for e in after}, "no DaemonSet pod was replaced"
    assert sorted(e.pod().daemon_node for e in after if e.key not in before) == [new, new]
