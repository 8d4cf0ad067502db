"""A scenario with `settled: true` (a twin's) is built in the state its controllers would reach:
the same cluster as played through them, without the play — and it lives on like any other."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sim import SimCluster
from bot.sim.apiserver.api import DeleteOptions
from bot.sim.apiserver.objects import pod_ready
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.world.scenario import Scenario, ScenarioError, load_scenario

SCENARIO = """\
name: settled-shop
cluster: {version: "1.29.4", platform: eks, warmup: 2m}
node_groups:
  - {name: apps, count: 4, capacity: {cpu: "4", memory: 16Gi, pods: "20"}}
  - {name: system, count: 2, taints: [{key: CriticalAddonsOnly, value: "true", effect: NoSchedule}]}
fargate_profiles: [{name: coredns, namespace: kube-system, labels: {app: coredns}}]
namespaces: [shop]
containers:
  - {match: {namespace: shop, labels: {app: flaky}}, never_ready: "HTTP probe failed with statuscode: 503"}
objects:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      replicas: 10
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          nodeSelector: {eks.amazonaws.com/nodegroup: apps}
          containers:
            - {name: web, image: registry.example.com/shop/web:2.0.1,
               resources: {requests: {cpu: 250m, memory: 256Mi}}}
            - {name: istio-proxy, image: docker.io/istio/proxyv2:1.16.1}
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: shop}
    spec: {minAvailable: 8, selector: {matchLabels: {app: web}}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: karpenter, namespace: kube-system}
    spec:
      replicas: 2
      selector: {matchLabels: {app: karpenter}}
      template:
        metadata: {labels: {app: karpenter}}
        spec:
          nodeSelector: {eks.amazonaws.com/nodegroup: system}
          tolerations: [{key: CriticalAddonsOnly, operator: Equal, value: "true", effect: NoSchedule}]
          containers: [{name: controller, image: public.ecr.aws/karpenter/controller:0.37.0}]
  - apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: kube-proxy, namespace: kube-system}
    spec:
      selector: {matchLabels: {app: kube-proxy}}
      template:
        metadata: {labels: {app: kube-proxy}}
        spec:
          tolerations: [{operator: Exists}]
          containers: [{name: kube-proxy, image: registry.k8s.io/kube-proxy:v1.29.4}]
  - apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: cache, namespace: shop}
    spec:
      replicas: 3
      serviceName: cache
      selector: {matchLabels: {app: cache}}
      template:
        metadata: {labels: {app: cache}}
        spec:
          nodeSelector: {eks.amazonaws.com/nodegroup: apps}
          containers: [{name: redis, image: redis:7.2}]
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: coredns, namespace: kube-system}
    spec:
      replicas: 2
      selector: {matchLabels: {app: coredns}}
      template:
        metadata: {labels: {app: coredns}}
        spec: {containers: [{name: coredns, image: registry.k8s.io/coredns/coredns:v1.11.1}]}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: flaky, namespace: shop}
    spec:
      replicas: 1
      selector: {matchLabels: {app: flaky}}
      template:
        metadata: {labels: {app: flaky}}
        spec:
          nodeSelector: {eks.amazonaws.com/nodegroup: apps}
          containers: [{name: flaky, image: registry.example.com/shop/flaky:1.0.0}]
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: huge, namespace: shop}
    spec:
      replicas: 5
      selector: {matchLabels: {app: huge}}
      template:
        metadata: {labels: {app: huge}}
        spec:
          nodeSelector: {eks.amazonaws.com/nodegroup: apps}
          containers: [{name: huge, image: registry.example.com/shop/huge:1.0.0,
                        resources: {requests: {cpu: "3"}}}]
"""

WORKLOADS = ("deployments.apps", "replicasets.apps", "daemonsets.apps", "statefulsets.apps")
#: What differs between two builds of the same cluster anyway: names drawn at random, times.
_VOLATILE = {"lastUpdateTime", "lastTransitionTime", "message"}


def _scenario(settled: bool) -> Scenario:
    data = yaml.safe_load(SCENARIO)
    data["settled"] = settled
    return Scenario.from_dict(data, "settled-shop.yaml")


def _statuses(sim: SimCluster) -> dict[tuple[str, str, str], Any]:
    """Every workload's and budget's status, without what two builds may not share."""
    out = {}
    for kind in (*WORKLOADS, "poddisruptionbudgets.policy"):
        for obj in sim.core.store.objects(kind):
            status = json.loads(json.dumps(obj.get("status") or {}))
            for c in status.get("conditions") or []:
                for key in _VOLATILE:
                    c.pop(key, None)
            name = obj["metadata"]["name"]
            if kind == "replicasets.apps":
                name = name.rsplit("-", 1)[0]  # the template's hash is the same in both builds
            out[(kind, obj["metadata"]["namespace"], name)] = status
    return out


def _pods(sim: SimCluster) -> Counter[tuple[str, str, str, bool]]:
    """(namespace, workload, phase, Ready) of every pod."""
    counts: Counter[tuple[str, str, str, bool]] = Counter()
    for e in sim.core.store.entries("pods"):
        pod = e.obj()
        owner = (pod["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
        workload = owner.rsplit("-", 1)[0] if owner.count("-") and e.namespace == "shop" else owner
        counts[(e.namespace, workload, pod["status"].get("phase", ""), pod_ready(pod))] += 1
    return counts


def _scheduled_events(sim: SimCluster, prefix: str, *, fargate: bool = False) -> int:
    """Pods `prefix`* the scheduler bound to the scenario's node groups (or to the Fargate nodes
    the warm-up adds, which the DaemonSet controller also reaches there in either build)."""
    return sum(
        1
        for ev in sim.core.store.objects("events")
        if ev.get("reason") == "Scheduled"
        and ev["involvedObject"]["name"].startswith(prefix)
        and (" to fargate-" in ev["message"]) == fargate
    )


def test_a_settled_build_is_the_cluster_its_controllers_would_have_settled_to(
    sim_factory: Callable[..., SimCluster],
) -> None:
    played = sim_factory(_scenario(False), speed=0.0, seed=4)
    settled = sim_factory(_scenario(True), speed=0.0, seed=4)
    assert _statuses(settled) == _statuses(played)
    assert _pods(settled) == _pods(played)
    store = settled.core.store
    web = store.get("deployments.apps", "shop", "web")
    assert web is not None
    assert web["status"]["availableReplicas"] == 10
    assert {c["type"]: c["reason"] for c in web["status"]["conditions"]} == {
        "Available": "MinimumReplicasAvailable",
        "Progressing": "NewReplicaSetAvailable",
    }
    pdb = store.get("poddisruptionbudgets.policy", "shop", "web")
    assert pdb is not None
    assert pdb["status"]["currentHealthy"] == 10
    assert pdb["status"]["disruptionsAllowed"] == 2

    # Written settled: never scheduled nor started by the controllers …
    for prefix in ("web-", "karpenter-", "cache-", "kube-proxy-"):
        assert _scheduled_events(settled, prefix) == 0, prefix
        assert _scheduled_events(played, prefix) > 0, prefix
    # … except what would not simply start: Fargate, a behaviour that matches, no room for all.
    assert _scheduled_events(settled, "coredns-", fargate=True) == 2
    assert _scheduled_events(settled, "flaky-") == 1
    huge = [e.obj() for e in store.entries("pods", "shop") if e.name.startswith("huge-")]
    assert sorted(bool(p["spec"].get("nodeName")) for p in huge) == [False, True, True, True, True]
    assert _scheduled_events(settled, "huge-") == 4

    # Spread as the scheduler would: the least loaded node of the group that fits, every time.
    apps = sorted(
        n.name for n in store.entries("nodes") if n.labels.get("eks.amazonaws.com/nodegroup") == "apps"
    )
    per_node = Counter(
        e.fields["spec.nodeName"]
        for e in store.entries("pods", "shop")
        if e.name.startswith(("web-", "cache-"))
    )
    assert sorted(per_node) == apps
    assert max(per_node.values()) - min(per_node.values()) <= 1
    for e in store.entries("pods", "shop"):
        if e.name.startswith(("web-", "cache-")):
            pod = e.obj()
            assert pod["status"]["hostIP"]
            assert pod["status"]["podIP"]
            assert [c["type"] for c in pod["status"]["conditions"]][-1] == "PodScheduled"
            assert all(c["ready"] and "running" in c["state"] for c in pod["status"]["containerStatuses"])
    tokens = {
        v["name"]
        for e in store.entries("pods", "shop")
        for v in e.obj()["spec"]["volumes"]
        if e.name.startswith("web-")
    }
    assert len(tokens) == 10, "each pod has its own service-account token volume"
    cache = sorted(e.name for e in store.entries("pods", "shop") if e.name.startswith("cache-"))
    assert cache == ["cache-0", "cache-1", "cache-2"]
    sts = store.get("statefulsets.apps", "shop", "cache")
    assert sts is not None
    assert {
        e.obj()["metadata"]["labels"]["controller-revision-hash"]
        for e in store.entries("pods", "shop")
        if e.name.startswith("cache-")
    } == {sts["status"]["updateRevision"]}
    assert store.get("controllerrevisions.apps", "shop", sts["status"]["updateRevision"]) is not None


def test_a_settled_cluster_rolls_drains_and_takes_faults_like_any_other(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory(_scenario(True), speed=0.0, seed=7)
    store, api = sim.core.store, sim.core.api
    before = {e.key for e in store.entries("pods", "shop") if e.name.startswith("web-")}

    # A rollout restart replaces every pod through a new ReplicaSet.
    api.patch(
        KINDS_BY_KEY["deployments.apps"],
        "shop",
        "web",
        "application/strategic-merge-patch+json",
        json.dumps(
            {
                "spec": {
                    "template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}
                }
            }
        ).encode(),
    )
    sim.control.advance(300)
    web = store.get("deployments.apps", "shop", "web")
    assert web is not None
    assert web["status"]["updatedReplicas"] == web["status"]["availableReplicas"] == 10
    after = {e.key for e in store.entries("pods", "shop") if e.name.startswith("web-")}
    assert len(after) == 10
    assert not after & before

    # A deleted DaemonSet pod is replaced on its node.
    victim = next(e for e in store.entries("pods", "kube-system") if e.name.startswith("kube-proxy-"))
    node = victim.fields["spec.nodeName"]
    api.delete(KINDS_BY_KEY["pods"], victim.namespace, victim.name, DeleteOptions())
    sim.control.advance(60)
    on_node = [e for e in store.by_index("pods", node) if e.name.startswith("kube-proxy-")]
    assert [e.name for e in on_node] != [victim.name]
    assert len(on_node) == 1
    assert pod_ready(on_node[0].obj())

    # A fault reaches the settled pods the kubelets never had to act on yet.
    sim.control.inject_fault({"type": "not_ready", "match": {"namespace": "shop", "name_prefix": "cache-"}})
    sim.control.advance(30)
    cache = [e.obj() for e in store.entries("pods", "shop") if e.name.startswith("cache-")]
    assert len(cache) == 3
    assert not any(pod_ready(p) for p in cache)

    # The cloud drains the system group onto new nodes: the settled karpenter pods are evicted and
    # rescheduled there.
    old = {n.name for n in store.entries("nodes") if n.labels.get("eks.amazonaws.com/nodegroup") == "system"}
    op = sim.control.replace_node_group("system", "1.30.2")
    sim.control.advance(3600)
    assert sim.control.operation(op["id"])["state"] == "Successful"
    karpenter = [e for e in store.entries("pods", "kube-system") if e.name.startswith("karpenter-")]
    assert len(karpenter) == 2
    assert all(pod_ready(e.obj()) for e in karpenter)
    assert not {e.fields["spec.nodeName"] for e in karpenter} & old
    assert any(ev["name"].startswith("karpenter-") for ev in sim.control.evictions())


def test_settled_must_be_true_or_false(tmp_path: Path) -> None:
    path = tmp_path / "twin.yaml"
    path.write_text("name: twin\nnode_groups: [{name: a}]\nsettled: 'yes'\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}:3: settled: expected true or false, not 'yes'"


def test_a_scenario_not_utf8_or_with_a_section_of_the_wrong_shape_is_one_line_with_its_place(
    tmp_path: Path,
) -> None:
    """Both were tracebacks (`UnicodeDecodeError`, "'int' object is not iterable") from `sim serve`
    and `rehearse --scenario`."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: x\n# caf\xe9\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(latin)
    assert str(err.value) == f"{latin}:2: the scenario is not UTF-8 text (byte 13)"
    five = tmp_path / "five.yaml"
    five.write_text("name: x\nnode_groups: 5\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as err:
        load_scenario(five)
    assert str(err.value) == f"{five}:2: node_groups: expected a list, not 5"
