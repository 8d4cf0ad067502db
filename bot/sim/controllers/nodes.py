"""Node lifecycle: kubelet liveness, the node controller's taints, Leases, and pod garbage collection.

A node's kubelet can be stopped (`kill`) and started again (`revive`). 40 simulated seconds after
its last heartbeat the node controller marks it NotReady (conditions Unknown, "Kubelet stopped
posting node status."), taints it `node.kubernetes.io/unreachable` (NoSchedule and NoExecute) and
marks its pods not Ready; pods whose toleration of that taint runs out (300 s by default) are
deleted and then stay Terminating, because no kubelet confirms it — exactly the state that leaves
StatefulSet replicas stuck and volumes Multi-Attached. Cordoning adds the
`node.kubernetes.io/unschedulable:NoSchedule` taint. Pods bound to nodes that no longer exist are
removed by the pod GC after 40 s.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from bot.sim.apiserver.api import DeleteOptions
from bot.sim.apiserver.clock import rfc3339, rfc3339_micro
from bot.sim.apiserver.objects import mark_disruption_target, set_condition
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.apiserver.store import DELETED, Record
from bot.sim.controllers.behaviour import NO_NODE, NodeFacts
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder

Obj = dict[str, Any]

NODE_MONITOR_GRACE = 40.0
#: The kubelet's nodeStatusReportFrequency: an unchanged node status is still posted this often.
STATUS_REPORT_SECONDS = 300.0
POD_GC_QUARANTINE = 40.0
LEASES = KINDS_BY_KEY["leases.coordination.k8s.io"]
NODES = KINDS_BY_KEY["nodes"]
#: The label a node names its group with: EKS's managed node groups' (the default, and a generic
#: cluster's), or, as the cloud writes it, an AKS agent pool's or a GKE node pool's.
NODE_GROUP_LABEL = "eks.amazonaws.com/nodegroup"
GROUP_LABELS = {"aks": "kubernetes.azure.com/agentpool", "gke": "cloud.google.com/gke-nodepool"}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def group_label(platform: str) -> str:
    """The label the platform's nodes name their group with."""
    return GROUP_LABELS.get(platform, NODE_GROUP_LABEL)


def group_of(labels: Mapping[str, str]) -> str:
    """The group a node's labels name, whichever platform wrote them ("" for none)."""
    for key in (NODE_GROUP_LABEL, *GROUP_LABELS.values()):
        if key in labels:
            return str(labels[key])
    return ""


_PRESSURE = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)


def node_conditions(now: float, ready: bool, reason: str = "", message: str = "") -> list[Obj]:
    stamp = rfc3339(now)
    out = [
        {
            "type": t,
            "status": "False",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
            "reason": r,
            "message": m,
        }
        for t, r, m in _PRESSURE
    ]
    out.append(
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
            "reason": reason or ("KubeletReady" if ready else "KubeletNotReady"),
            "message": message
            or (
                "kubelet is posting ready status"
                if ready
                else "container runtime network not ready: NetworkReady=false "
                "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
            ),
        }
    )
    return out


def node_ready_event(events: Recorder, node: Obj, name: str) -> None:
    """The kubelet's event when its node turns Ready (a new node's first time, or one back)."""
    events.emit(
        node,
        "Node",
        "Normal",
        "NodeReady",
        f"Node {name} status is now: NodeReady",
        component="kubelet",
        host=name,
    )


class NodeLifecycle:
    name = "node-lifecycle"

    def __init__(self, engine: Engine, events: Recorder, *, lease_seconds: float = 10.0) -> None:
        self.engine = engine
        self.api = engine.api
        self.events = events
        self.dead: set[str] = set()
        self.lease_seconds = lease_seconds
        self._facts: dict[str, tuple[int, NodeFacts]] = {}
        self._posted: dict[str, float] = {}
        #: True while the scenario's warm-up is played at start: no lease is renewed then (each node
        #: renews once when it ends, on the present's clock). Nobody reads a lease before the cluster
        #: is served, and at 5,000 nodes a 2-minute warm-up was 60,000 writes of leases.
        self.warming = False
        engine.add(self)

    def alive(self, node: str) -> bool:
        return node not in self.dead and self.api.store.entry("nodes", "", node) is not None

    def facts(self, node: str) -> NodeFacts:
        e = self.api.store.entry("nodes", "", node)
        if e is None:
            return NO_NODE
        cached = self._facts.get(node)
        if cached is not None and cached[0] == e.rv:
            return cached[1]
        info = (e.obj().get("status") or {}).get("nodeInfo") or {}
        facts = NodeFacts(
            group=group_of(e.labels),
            kubelet=str(info.get("kubeletVersion", "")),
            fargate=e.labels.get("eks.amazonaws.com/compute-type") == "fargate",
        )
        self._facts[node] = (e.rv, facts)
        return facts

    def node_ip(self, node: str) -> str:
        e = self.api.store.entry("nodes", "", node)
        if e is None:
            return ""
        for a in (e.obj().get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP":
                return str(a.get("address", ""))
        return ""

    # ---- controller protocol ------------------------------------------------------------------

    def on_change(self, record: Record) -> None:
        if record.entry.kind.key == "nodes":
            if record.type == DELETED:
                name = record.entry.name
                self.dead.discard(name)
                self.engine.cancel(("lease", name))
                lease = self.api.store.entry(LEASES.key, "kube-node-lease", name)
                if lease is not None:
                    self.api.remove_now(LEASES.key, "kube-node-lease", name)
                self.engine.after(POD_GC_QUARANTINE, lambda: self._pod_gc(name), key=("podgc", name))
                return
            if record.prev is None:
                self._joined(record.entry.name)
            if not record.heartbeat_only:  # spec.unschedulable is what the sync keeps in step
                self.engine.enqueue(self.name, record.entry.name)

    def sync(self, name: str) -> None:
        """Keep the unschedulable taint in step with spec.unschedulable (TaintNodesByCondition)."""
        entry = self.api.store.entry("nodes", "", name)
        if entry is None:
            return
        node = entry.obj()
        spec = node.setdefault("spec", {})
        taints = list(spec.get("taints") or [])
        has = any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints)
        want = bool(spec.get("unschedulable"))
        if want == has:
            return
        if want:
            taints.append(
                {
                    "key": UNSCHEDULABLE_TAINT,
                    "effect": "NoSchedule",
                    "timeAdded": rfc3339(self.engine.clock.now()),
                }
            )
            self.events.emit(
                node,
                "Node",
                "Normal",
                "NodeNotSchedulable",
                f"Node {name} status is now: NodeNotSchedulable",
                component="kubelet",
                host=name,
            )
        else:
            taints = [t for t in taints if t.get("key") != UNSCHEDULABLE_TAINT]
            self.events.emit(
                node,
                "Node",
                "Normal",
                "NodeSchedulable",
                f"Node {name} status is now: NodeSchedulable",
                component="kubelet",
                host=name,
            )
        spec["taints"] = taints
        if not taints:
            del spec["taints"]
        self.api.write("nodes", node)

    # ---- leases ---------------------------------------------------------------------------------

    def _joined(self, name: str) -> None:
        now = self.engine.clock.now()
        node = self.api.store.get("nodes", "", name)
        if node is None:
            return
        if self.api.store.entry(LEASES.key, "kube-node-lease", name) is None and self.api.store.entry(
            "namespaces", "", "kube-node-lease"
        ):
            self.api.create(
                LEASES,
                "kube-node-lease",
                {
                    "metadata": {
                        "name": name,
                        "namespace": "kube-node-lease",
                        "ownerReferences": [
                            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
                        ],
                    },
                    "spec": {
                        "holderIdentity": name,
                        "leaseDurationSeconds": 40,
                        "renewTime": rfc3339_micro(now),
                    },
                },
            )
        if self.lease_seconds > 0:
            self.engine.every(
                self.lease_seconds, lambda: self._renew(name), key=("lease", name), catch_up_once=True
            )

    def _renew(self, name: str) -> None:
        if name in self.dead or self.warming:
            return
        entry = self.api.store.entry(LEASES.key, "kube-node-lease", name)
        if entry is None:
            return
        now = self.engine.clock.now()
        # The renewal is the sim's most frequent write by far (every node, every 10 s of simulated
        # time: 60 a real second per node at a rehearsal's 600x, 95% of an idle cluster's writes).
        # It is the kubelet's own well-formed Lease with one field changed, so it goes to the store
        # as the API server would leave it (nothing to default, validate or re-order), built on
        # the stored version's shared view with only the changed parts copied, and handed over as
        # the new version's view: no decoding at all.
        current = entry.view()
        lease = {
            **current,
            "metadata": dict(current["metadata"]),
            "spec": {**(current.get("spec") or {}), "renewTime": rfc3339_micro(now)},
        }
        self.api.store.update(LEASES, lease, entry, handover=True)
        if now - self._posted.get(name, 0.0) >= STATUS_REPORT_SECONDS:
            # Without changes the kubelet still posts its node status every 5 minutes.
            self._posted[name] = now
            node_entry = self.api.store.entry("nodes", "", name)
            if node_entry is not None:
                # Likewise straight to the store: the API server's status write copied the whole
                # node (images, addresses, capacity) to move one timestamp per condition.
                node = node_entry.view()
                status = node.get("status") or {}
                beat = rfc3339(now)
                fresh = {
                    **node,
                    "metadata": dict(node["metadata"]),
                    "status": {
                        **status,
                        "conditions": [
                            {**c, "lastHeartbeatTime": beat} for c in status.get("conditions") or []
                        ],
                    },
                }
                self.api.store.update(NODES, fresh, node_entry, handover=True)

    # ---- kubelet liveness -----------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """The node's kubelet stops (instance failure, network partition)."""
        self.dead.add(name)
        self.engine.after(NODE_MONITOR_GRACE, lambda: self._mark_unknown(name), key=("node-monitor", name))

    def revive(self, name: str) -> None:
        self.dead.discard(name)
        self.engine.cancel(("node-monitor", name))
        entry = self.api.store.entry("nodes", "", name)
        if entry is None:
            return
        node = entry.obj()
        now = self.engine.clock.now()
        node["status"]["conditions"] = node_conditions(now, True)
        spec = node.setdefault("spec", {})
        spec["taints"] = [
            t for t in spec.get("taints") or [] if t.get("key") not in (UNREACHABLE_TAINT, NOT_READY_TAINT)
        ]
        if not spec["taints"]:
            del spec["taints"]
        self.api.write_full("nodes", node)
        node_ready_event(self.events, node, name)
        for e in self.api.store.by_index("pods", name):
            self.engine.enqueue("kubelet", e.key)
        if self.lease_seconds > 0:
            self.engine.every(
                self.lease_seconds, lambda: self._renew(name), key=("lease", name), catch_up_once=True
            )

    def _mark_unknown(self, name: str) -> None:
        entry = self.api.store.entry("nodes", "", name)
        if entry is None or name not in self.dead:
            return
        node = entry.obj()
        now = self.engine.clock.now()
        stamp = rfc3339(now)
        conditions = []
        for c in node["status"].get("conditions") or []:
            c = dict(c)
            c.update(
                status="Unknown",
                lastTransitionTime=stamp,
                reason="NodeStatusUnknown",
                message="Kubelet stopped posting node status.",
            )
            conditions.append(c)
        node["status"]["conditions"] = conditions
        spec = node.setdefault("spec", {})
        taints = [
            t for t in spec.get("taints") or [] if t.get("key") not in (UNREACHABLE_TAINT, NOT_READY_TAINT)
        ]
        taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": stamp})
        taints.append({"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": stamp})
        spec["taints"] = taints
        self.api.write_full("nodes", node)
        self.events.emit(
            node,
            "Node",
            "Normal",
            "NodeNotReady",
            f"Node {name} status is now: NodeNotReady",
            component="node-controller",
        )
        for e in self.api.store.by_index("pods", name):
            pod = e.obj()
            status = pod.setdefault("status", {})
            for kind in ("Ready", "ContainersReady"):
                set_condition(status, {"type": kind, "status": "False", "lastProbeTime": None}, now)
            self.api.write("pods", pod, status=True)
            self.events.emit(
                pod, "Pod", "Warning", "NodeNotReady", "Node is not ready", component="node-controller"
            )
            wait = self._toleration_seconds(pod)
            if wait is not None:
                key = e.key
                self.engine.after(
                    wait,
                    functools.partial(self._taint_evict, name, key, e.uid),
                    key=("taint-evict", e.uid),
                )

    @staticmethod
    def _toleration_seconds(pod: Obj) -> float | None:
        """How long a pod may stay on an unreachable node (None = forever)."""
        for t in (pod.get("spec") or {}).get("tolerations") or []:
            if t.get("effect") not in ("NoExecute", None, ""):
                continue
            if t.get("operator") == "Exists" and t.get("key") in (None, "", UNREACHABLE_TAINT):
                seconds = t.get("tolerationSeconds")
                return None if seconds is None else float(seconds)
            if t.get("key") == UNREACHABLE_TAINT:
                seconds = t.get("tolerationSeconds")
                return None if seconds is None else float(seconds)
        return 0.0

    def _taint_evict(self, node: str, key: tuple[str, str], uid: str) -> None:
        if node not in self.dead:
            return
        entry = self.api.store.entry("pods", *key)
        if entry is None or entry.uid != uid or entry.obj()["metadata"].get("deletionTimestamp"):
            return
        pod = entry.obj()
        mark_disruption_target(
            pod,
            "DeletionByTaintManager",
            "Taint manager: deleting due to NoExecute taint",
            self.engine.clock.now(),
        )
        self.api.write("pods", pod, status=True)
        self.events.emit(
            pod,
            "Pod",
            "Normal",
            "TaintManagerEviction",
            f"Marking for deletion Pod {key[0]}/{key[1]}",
            component="taint-eviction-controller",
        )
        self.api.delete(KINDS_BY_KEY["pods"], key[0], key[1], DeleteOptions())

    def _pod_gc(self, node: str) -> None:
        if self.api.store.entry("nodes", "", node) is not None:
            return
        for e in self.api.store.by_index("pods", node):
            pod = e.obj()
            status = mark_disruption_target(
                pod, "DeletionByPodGC", "PodGC: node no longer exists", self.engine.clock.now()
            )
            status["phase"] = "Failed"
            self.api.write("pods", copy.deepcopy(pod), status=True)
            self.api.remove_now("pods", *e.key)
