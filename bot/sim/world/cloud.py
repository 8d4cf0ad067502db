"""The outside world: the cloud provider's control plane, managed node groups and Fargate.

What an EKS-style pipeline does on request:
- `upgrade_control_plane(version)`: after a while (15 simulated minutes by default) the API
  server reports the new version on `/version`, and group-versions removed in it stop being served.
- `replace_node_group(name, version)`: new nodes join with the new kubelet version; once they are
  Ready the old nodes are cordoned and drained one at a time through the eviction API — a
  PodDisruptionBudget that allows no disruption blocks the drain, retried every 5 s, until the
  drain timeout fails the update with PodEvictionFailure (unless forced) — and each drained node
  is terminated (its Node object deleted). That is a managed node group (`drain="cloud"`).
- `replace_node_group(name, version, drain="external")`: a self-managed node group, where the
  cloud only launches the new instances and someone else (the runbook's engineer, or the bot's
  own cordon and drain) empties the old ones. Once the new nodes are Ready the operation waits
  (phase `waiting-for-drain`), looking every 5 s, and terminates each old node once it is
  cordoned and holds nothing but DaemonSet and mirror pods (a pod still terminating counts). It
  never cordons, evicts or deletes anything itself, so a PodDisruptionBudget or an uncordon
  simply keeps the old node; only an explicit `drain_timeout` ends the wait (NodesNotDrained).
- Fargate profiles: a pod matching a profile gets `schedulerName: fargate-scheduler`, and a node of
  its own (`fargate-ip-…`) running the control plane's kubelet version at the time it started.
Each long action is an `Operation` with a state, a phase (`PHASES`) and a step log, readable
through the control API, which can also wait for an operation to reach a phase.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from bot.sim.apiserver import eviction
from bot.sim.apiserver.api import STRATEGIC, DeleteOptions
from bot.sim.apiserver.clock import rfc3339
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.metrics import Metrics
from bot.sim.apiserver.objects import is_daemonset_pod, is_mirror_pod, node_ready
from bot.sim.apiserver.resources import KINDS_BY_KEY, KNOWN_DEPRECATED_BY_GV, Catalog, Kind, Served
from bot.sim.apiserver.store import DELETED, Record
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder
from bot.sim.controllers.nodes import (
    GROUP_LABELS,
    NodeLifecycle,
    group_label,
    group_of,
    node_conditions,
    node_ready_event,
)
from bot.sim.controllers.scheduler import Scheduler

Obj = dict[str, Any]

NODES = KINDS_BY_KEY["nodes"]
PODS = KINDS_BY_KEY["pods"]
EVICTION_RETRY = 5.0
#: How often a node-group update waiting for an external drain looks at the old nodes.
DRAIN_POLL = 5.0
WAITING = "waiting for pods to terminate"
#: Who empties the old nodes of a node-group update: the cloud (managed) or someone else.
DRAIN_MODES = ("cloud", "external")
#: What an operation is doing, by kind; every operation ends in FINISHED (Successful or Failed).
LAUNCHING, DRAINING, WAITING_FOR_DRAIN = "launching", "draining", "waiting-for-drain"
UPDATING, RUNNING, FINISHED = "updating", "running", "finished"
PHASES = (LAUNCHING, DRAINING, WAITING_FOR_DRAIN, UPDATING, RUNNING, FINISHED)


def kubelet_version(version: str, platform: str) -> str:
    v = version if version.startswith("v") else f"v{version}"
    if platform == "eks" and "-eks-" not in v:
        return f"{v}-eks-{hashlib.sha1(v.encode()).hexdigest()[:7]}"
    return v


@dataclass(frozen=True)
class PlatformNodes:
    """What a platform's nodes report they run (`status.nodeInfo`: OS image, kernel, container
    runtime), and the zones a node group spans when its scenario names none. A node's zone label
    is the region, `joiner` and the group's zone: EKS's `ap-northeast-1a`, AKS's `westeurope-1`
    (an agent pool's `availabilityZones` are `1`, `2`, `3`), GKE's `europe-west1-b`."""

    os_image: str
    kernel: str
    runtime: str
    zones: tuple[str, ...]
    joiner: str = ""


#: By platform; a generic cluster's nodes are EKS's (Amazon Linux 2), as they always were.
PLATFORM_NODES = {
    "eks": PlatformNodes(
        "Amazon Linux 2", "5.10.219-208.866.amzn2.x86_64", "containerd://1.7.11", ("a", "b", "c")
    ),
    "aks": PlatformNodes(
        "Ubuntu 22.04.4 LTS", "5.15.0-1064-azure", "containerd://1.7.15-1", ("1", "2", "3"), "-"
    ),
    "gke": PlatformNodes(
        "Container-Optimized OS from Google", "6.1.85+", "containerd://1.7.15", ("b", "c", "d"), "-"
    ),
}


def platform_nodes(platform: str) -> PlatformNodes:
    return PLATFORM_NODES.get(platform, PLATFORM_NODES["eks"])


@dataclass
class NodeGroupSpec:
    name: str
    count: int
    version: str
    instance_type: str = "m5.xlarge"
    capacity: dict[str, str] = field(default_factory=lambda: {"cpu": "4", "memory": "16Gi", "pods": "58"})
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Obj] = field(default_factory=list)
    #: Empty: the platform's (`PlatformNodes`), as are the OS image, kernel and runtime.
    zones: list[str] = field(default_factory=list)
    os_image: str = ""
    kernel: str = ""
    runtime: str = ""
    max_unavailable: int = 1
    ami: str = ""


@dataclass
class FargateProfile:
    name: str
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)

    def matches(self, pod: Obj) -> bool:
        m = pod.get("metadata") or {}
        if m.get("namespace") != self.namespace:
            return False
        labels = m.get("labels") or {}
        return all(labels.get(k) == v for k, v in self.labels.items())


@dataclass
class DeprecatedCaller:
    """A client in the cluster that keeps calling an API (counted on /metrics as real requests)."""

    group_version: str
    resource: str
    every: float
    user_agent: str = "helm/v3.8.2"
    verb: str = "LIST"


@dataclass
class Operation:
    id: str
    kind: str  # ControlPlaneUpgrade | NodeGroupUpdate | Upgrade
    target: str
    version: str
    state: str = "InProgress"  # InProgress | Successful | Failed
    started: float = 0.0
    finished: float | None = None
    error: str = ""
    steps: list[str] = field(default_factory=list)
    #: ControlPlaneUpgrade: updating; NodeGroupUpdate: launching, then draining (the cloud
    #: drains) or waiting-for-drain (someone else does); Upgrade: running; all end in finished.
    phase: str = ""
    #: Every phase entered so far, so a wait for one is answered even after the op moved past it.
    reached: list[str] = field(default_factory=list)

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.reached.append(phase)

    def as_dict(self) -> Obj:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "version": self.version,
            "state": self.state,
            "phase": self.phase,
            "started": rfc3339(self.started),
            "finished": rfc3339(self.finished) if self.finished else None,
            "error": self.error,
            "steps": list(self.steps),
        }


#: The number of the first node made (its address 10.0.0.12); each node after takes the next.
FIRST_HOST = 10


class Cloud:
    name = "cloud"

    def __init__(
        self,
        engine: Engine,
        events: Recorder,
        lifecycle: NodeLifecycle,
        scheduler: Scheduler,
        catalog: Catalog,
        metrics: Metrics,
        *,
        platform: str = "eks",
        region: str = "ap-northeast-1",
        cluster: str = "cluster",
    ) -> None:
        self.engine = engine
        self.api = engine.api
        self.events = events
        self.lifecycle = lifecycle
        self.catalog = catalog
        self.metrics = metrics
        self.platform = platform
        self.region = region
        #: The cluster's name as its cloud knows it (a GKE node's name carries it).
        self.cluster = cluster
        #: Each pool's next instance number (an AKS scale set's VMs count up, never reused).
        self._instances: dict[str, itertools.count[int]] = {}
        self.groups: dict[str, NodeGroupSpec] = {}
        self.fargate: list[FargateProfile] = []
        self.operations: list[Operation] = []
        self._ops = itertools.count(1)
        self._hosts = itertools.count(FIRST_HOST)
        self._fargate_nodes: dict[str, str] = {}  # pod uid → node
        self.join_seconds = 60.0
        self.ready_seconds = 20.0
        self.fargate_seconds = 45.0
        self.control_plane_seconds = 900.0
        self.drain_timeout = 900.0
        self.api.admission.append(self._fargate_admission)
        scheduler.fargate_hook = self._fargate_place
        engine.add(self)

    # ---- versions -------------------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self.catalog.version

    def git_version(self) -> str:
        return kubelet_version(self.catalog.version, self.platform)

    def version_info(self) -> Obj:
        """What `/version` answers: the control plane's version as this platform spells it."""
        git = self.git_version()
        core = git.lstrip("v").split("-")[0].split(".")
        return {
            "major": core[0],
            "minor": core[1] + ("+" if self.platform == "eks" else ""),
            "emulationMajor": core[0],
            "emulationMinor": core[1],
            "gitVersion": git,
            "gitCommit": hashlib.sha1(git.encode()).hexdigest(),
            "gitTreeState": "clean",
            "buildDate": "2024-01-01T00:00:00Z",
            "goVersion": "go1.22.5",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    # ---- nodes ----------------------------------------------------------------------------------

    def zones_of(self, group: NodeGroupSpec) -> list[str]:
        """The group's zones as its scenario names them: `a` (EKS), `1` (AKS: an agent pool's
        `availabilityZones`), `b` (GKE)."""
        return list(group.zones or platform_nodes(self.platform).zones)

    def zone_name(self, zone: str) -> str:
        """A group's zone as its nodes' zone label names it (`ap-northeast-1a`, `westeurope-1`)."""
        return f"{self.region}{platform_nodes(self.platform).joiner}{zone}"

    def node_object(
        self, group: NodeGroupSpec, *, ready: bool, now: float, version: str | None = None
    ) -> Obj:
        n = next(self._hosts)
        zones = self.zones_of(group)
        zone = self.zone_name(zones[n % len(zones)])
        image = platform_nodes(self.platform)
        ip = f"10.0.{(n // 250) % 250}.{n % 250 + 2}"
        ids = self.engine.ids
        name, own, provider_id = self._as_cloud_names(group, ip=ip, zone=zone, version=version)
        labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": group.instance_type,
            "beta.kubernetes.io/os": "linux",
            **own,
            "failure-domain.beta.kubernetes.io/region": self.region,
            "failure-domain.beta.kubernetes.io/zone": zone,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": group.instance_type,
            "topology.kubernetes.io/region": self.region,
            "topology.kubernetes.io/zone": zone,
            **group.labels,
        }
        capacity = {
            "cpu": group.capacity.get("cpu", "4"),
            "ephemeral-storage": "83873772Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": group.capacity.get("memory", "16Gi"),
            "pods": str(group.capacity.get("pods", "58")),
        }
        allocatable = dict(capacity, **{"ephemeral-storage": "76224326324"})
        spec: Obj = {"providerID": provider_id}
        if group.taints:
            spec["taints"] = [dict(t) for t in group.taints]
        return {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "alpha.kubernetes.io/provided-node-ip": ip,
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": spec,
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": node_conditions(now, ready),
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    # EC2's private DNS name; AKS and GKE nodes have none.
                    *([] if self.platform in GROUP_LABELS else [{"type": "InternalDNS", "address": name}]),
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": ids.hex(32),
                    "systemUUID": ids.hex(32).upper(),
                    "bootID": ids.uid(),
                    "kernelVersion": group.kernel or image.kernel,
                    "osImage": group.os_image or image.os_image,
                    "containerRuntimeVersion": group.runtime or image.runtime,
                    "kubeletVersion": kubelet_version(version or group.version, self.platform),
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }

    def _as_cloud_names(
        self, group: NodeGroupSpec, *, ip: str, zone: str, version: str | None
    ) -> tuple[str, dict[str, str], str]:
        """A new node's name, the labels its cloud writes (its group's among them) and its
        providerID, as the platform's nodes have them: EKS's (and a generic cluster's)
        `ip-10-0-0-12.REGION.compute.internal`; an AKS scale set's `aks-POOL-12345678-vmss00000a`;
        a GKE instance group's `gke-CLUSTER-POOL-1a2b3c4d-x7k2`."""
        ids = self.engine.ids
        label = {group_label(self.platform): group.name}
        if self.platform == "aks":
            digits = str(int(hashlib.sha1(f"{self.cluster}/{group.name}".encode()).hexdigest(), 16))[:8]
            count = self._instances.setdefault(group.name, itertools.count())
            name = f"aks-{group.name}-{digits}-vmss{_base36(next(count)):0>6}"
            label["agentpool"] = group.name
            label["kubernetes.azure.com/cluster"] = f"MC_{self.cluster}_{self.region}"
            return name, label, f"azure:///virtualMachineScaleSets/aks-{group.name}-{digits}-vmss/{name}"
        if self.platform == "gke":
            digits = hashlib.sha1(f"{self.cluster}/{group.name}/{zone}".encode()).hexdigest()[:8]
            name = f"gke-{self.cluster[:20]}-{group.name[:20]}-{digits}-{ids.hex(4)}"
            return name, label, f"gce://{self.cluster}/{zone}/{name}"
        ami = (
            group.ami
            or f"ami-0{hashlib.sha1((group.name + (version or group.version)).encode()).hexdigest()[:16]}"
        )
        label.update(
            {
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup-image": ami,
                "k8s.io/cloud-provider-aws": hashlib.sha1(self.region.encode()).hexdigest()[:32],
                "topology.ebs.csi.aws.com/zone": zone,
            }
        )
        name = f"ip-{ip.replace('.', '-')}.{self.region}.compute.internal"
        return name, label, f"aws:///{zone}/i-0{ids.hex(16)}"

    def add_node(self, group: str, *, ready: bool = True, version: str | None = None) -> str:
        spec = self.groups[group]
        now = self.engine.clock.now()
        entry = self.api.create(NODES, "", self.node_object(spec, ready=ready, now=now, version=version))
        self.events.emit(
            entry.obj(),
            "Node",
            "Normal",
            "Starting",
            "Starting kubelet.",
            component="kubelet",
            host=entry.name,
        )
        if not ready:
            self.engine.after(
                self.ready_seconds, lambda: self._node_ready(entry.name), key=("node-ready", entry.name)
            )
        return entry.name

    def _node_ready(self, name: str) -> None:
        node = self.api.store.get("nodes", "", name)
        if node is None or node_ready(node):
            return
        node["status"]["conditions"] = node_conditions(self.engine.clock.now(), True)
        self.api.write("nodes", node, status=True)
        node_ready_event(self.events, node, name)

    def nodes_of(self, group: str) -> list[Obj]:
        return [e.obj() for e in self.api.store.entries("nodes") if group_of(e.labels) == group]

    def terminate(self, name: str) -> None:
        """The instance goes away: its Node object is deleted (pods on it are collected by the pod GC)."""
        if self.api.store.entry("nodes", "", name) is not None:
            self.api.delete(NODES, "", name)

    # ---- operations -----------------------------------------------------------------------------

    def _op(self, kind: str, target: str, version: str, phase: str = RUNNING) -> Operation:
        op = Operation(f"op-{next(self._ops)}", kind, target, version, started=self.engine.clock.now())
        op.enter(phase)
        self.operations.append(op)
        return op

    def _log(self, op: Operation, text: str) -> None:
        op.steps.append(f"{rfc3339(self.engine.clock.now())} {text}")

    def _finish(self, op: Operation, error: str = "") -> None:
        op.finished = self.engine.clock.now()
        op.state = "Failed" if error else "Successful"
        op.error = error
        op.enter(FINISHED)
        self._log(op, f"{op.state}{': ' + error if error else ''}")

    def operation(self, op_id: str) -> Operation:
        for op in self.operations:
            if op.id == op_id:
                return op
        raise KeyError(op_id)

    def upgrade_control_plane(self, version: str, *, duration: float | None = None) -> Operation:
        op = self._op("ControlPlaneUpgrade", "control-plane", version, UPDATING)
        self._log(op, f"updating the control plane from {self.catalog.version} to {version}")

        def done() -> None:
            removed = [s.group_version for s in self.catalog.served if s.deprecation]
            self.catalog.set_version(version)
            self.metrics.restart()  # the new version's apiservers count from nothing
            still = {s.group_version for s in self.catalog.served if s.deprecation}
            for gv in sorted(set(removed) - still):
                self._log(op, f"{gv} is no longer served")
            self._finish(op)

        self.engine.after(
            self.control_plane_seconds if duration is None else duration, done, key=("op", op.id)
        )
        return op

    def fail_control_plane_upgrade(
        self, version: str, error: str, timer: str, timer_id: str = ""
    ) -> Operation:
        """A control plane upgrade the scenario planted to fail: it ends Failed with `error` halfway
        through. Its timer is keyed (`timer`, `timer_id` or the operation's id)."""
        op = self._op("ControlPlaneUpgrade", "control-plane", version, UPDATING)
        self.engine.after(
            self.control_plane_seconds / 2, lambda: self._finish(op, error), key=(timer, timer_id or op.id)
        )
        return op

    def fail_node_group_update(
        self, name: str, version: str, error: str, timer: str, timer_id: str = ""
    ) -> Operation:
        """A node group update the scenario planted to fail: it ends Failed with `error` when the new
        nodes would have joined. Its timer is keyed (`timer`, `timer_id` or the operation's id)."""
        op = self._op("NodeGroupUpdate", name, version, LAUNCHING)
        self.engine.after(self.join_seconds, lambda: self._finish(op, error), key=(timer, timer_id or op.id))
        return op

    def replace_node_group(
        self,
        name: str,
        version: str,
        *,
        force: bool = False,
        max_unavailable: int | None = None,
        drain_timeout: float | None = None,
        drain: str = "cloud",
    ) -> Operation:
        """Replace a node group's nodes with new ones at `version` (see the module docstring).

        `drain="cloud"` (a managed node group): the cloud cordons, drains and terminates the old
        nodes. `drain="external"` (self-managed): it only terminates each old node once someone
        else has cordoned and drained it; `force` and `max_unavailable` are about the cloud's
        drain and are refused here, and `drain_timeout` applies only when given.
        """
        if name not in self.groups:
            raise KeyError(f"no node group {name!r}; known: {', '.join(sorted(self.groups))}")
        if drain not in DRAIN_MODES:
            raise ValueError(f"drain must be one of {', '.join(DRAIN_MODES)}, not {drain!r}")
        if drain == "external" and (force or max_unavailable is not None):
            raise ValueError("force and max_unavailable are about the cloud's drain; not with drain=external")
        group = self.groups[name]
        op = self._op("NodeGroupUpdate", name, version, LAUNCHING)
        old_nodes = [n["metadata"]["name"] for n in self.nodes_of(name)]
        self._log(
            op,
            f"updating node group {name} ({len(old_nodes)} nodes) from {group.version} to {version}"
            + ("; the old nodes are to be drained by someone else" if drain == "external" else ""),
        )
        group.version = version
        replacement = _Replacement(
            self,
            op,
            name,
            version,
            old_nodes,
            force=force,
            parallel=max_unavailable or group.max_unavailable,
            drain_timeout=drain_timeout,
            drain=drain,
        )
        self.engine.after(self.join_seconds, replacement.launch, key=("op", op.id))
        return op

    def _holds_pods(self, node: str) -> bool:
        """Whether pods other than DaemonSet and mirror pods are on `node` (terminating ones too)."""
        for e in self.api.store.by_index("pods", node):
            pod = e.obj()
            if not (is_daemonset_pod(pod) or is_mirror_pod(pod)):
                return True
        return False

    def _evict_all(self, node: str, *, force: bool) -> str | None:
        """Evict what can be evicted from `node`; None when nothing but DaemonSet/mirror pods remains."""
        blocked = ""
        waiting = False
        for e in self.api.store.by_index("pods", node):
            pod = e.obj()
            if is_daemonset_pod(pod) or is_mirror_pod(pod):
                continue
            if pod["metadata"].get("deletionTimestamp"):
                waiting = True
                continue
            waiting = True
            if force:
                self.api.delete(PODS, e.namespace, e.name, DeleteOptions())
                continue
            try:
                eviction.evict(
                    self.api,
                    e.namespace,
                    e.name,
                    {
                        "apiVersion": "policy/v1",
                        "kind": "Eviction",
                        "metadata": {"name": e.name, "namespace": e.namespace},
                    },
                )
            except ApiError as exc:
                blocked = blocked or f"{e.namespace}/{e.name}: {exc.message}"
        if not waiting:
            return None
        return blocked or WAITING

    # ---- fargate --------------------------------------------------------------------------------

    def _fargate_admission(self, kind: Kind, obj: Obj) -> None:
        if kind.kind != "Pod" or not self.fargate:
            return
        for profile in self.fargate:
            if profile.matches(obj):
                spec = obj.setdefault("spec", {})
                if spec.get("nodeName"):
                    return
                spec["schedulerName"] = "fargate-scheduler"
                obj["metadata"].setdefault("annotations", {})["eks.amazonaws.com/compute-type"] = "fargate"
                obj["metadata"]["labels"] = {
                    **(obj["metadata"].get("labels") or {}),
                    "eks.amazonaws.com/fargate-profile": profile.name,
                }
                return

    def _fargate_place(self, pod: Obj) -> bool:
        uid = pod["metadata"]["uid"]
        if uid in self._fargate_nodes:
            return True
        profile = next((p for p in self.fargate if p.matches(pod)), None)
        if profile is None:
            return False
        group = NodeGroupSpec(
            name=f"fargate-{profile.name}",
            count=0,
            version=self.catalog.version,
            instance_type="fargate",
            capacity={"cpu": "2", "memory": "3921Mi", "pods": "1"},
        )
        node = self.node_object(group, ready=False, now=self.engine.clock.now(), version=self.catalog.version)
        m = node["metadata"]
        m["name"] = "fargate-" + m["name"]
        m["labels"]["kubernetes.io/hostname"] = m["name"]
        for k in list(m["labels"]):
            if (
                k.startswith(("eks.amazonaws.com/nodegroup", "beta.kubernetes.io/instance"))
                or k == "node.kubernetes.io/instance-type"
            ):
                del m["labels"][k]
        m["labels"].update(
            {"eks.amazonaws.com/compute-type": "fargate", "eks.amazonaws.com/fargate-profile": profile.name}
        )
        node["spec"]["taints"] = [
            {"key": "eks.amazonaws.com/compute-type", "value": "fargate", "effect": "NoSchedule"}
        ]
        node["status"]["nodeInfo"]["osImage"] = "Amazon Linux 2"
        entry = self.api.create(NODES, "", node)
        self._fargate_nodes[uid] = entry.name
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])

        def ready() -> None:
            self._node_ready(entry.name)
            current = self.api.store.get("pods", *key)
            if (
                current is not None
                and current["metadata"]["uid"] == uid
                and not current["spec"].get("nodeName")
            ):
                current["metadata"].setdefault("annotations", {})["CapacityProvisioned"] = "0.25vCPU 0.5GB"
                self.api.write("pods", current)
                scheduler = next(c for c in self.engine.controllers if isinstance(c, Scheduler))
                fresh = self.api.store.get("pods", *key)
                if fresh is not None:
                    scheduler.bind(fresh, entry.name)

        self.engine.after(self.fargate_seconds, ready, key=("fargate", uid))
        return True

    # ---- controller protocol (Fargate node clean-up) -------------------------------------------

    def on_change(self, record: Record) -> None:
        if record.type == DELETED and record.entry.kind.key == "pods":
            node = self._fargate_nodes.pop(record.entry.uid, None)
            if node is not None:
                self.engine.enqueue(self.name, node)

    def sync(self, node: str) -> None:
        self.terminate(node)

    # ---- deprecated API callers -----------------------------------------------------------------

    def add_caller(self, caller: DeprecatedCaller) -> None:
        def call() -> None:
            group, _, version = caller.group_version.rpartition("/")
            served: Served | None = self.catalog.lookup(group, version, caller.resource)
            code = 200 if served is not None else 404
            self.metrics.request(
                verb=caller.verb,
                group=group,
                version=version,
                resource=caller.resource,
                subresource="",
                scope="cluster",
                code=code,
            )
            if served is not None and served.deprecation is not None:
                dep = KNOWN_DEPRECATED_BY_GV[caller.group_version].deprecation
                self.metrics.deprecated_call(
                    group=group,
                    version=version,
                    resource=caller.resource,
                    subresource="",
                    removed=dep.removed_in,
                )

        call()
        self.engine.every(
            caller.every, call, key=("caller", caller.group_version, caller.resource, caller.user_agent)
        )


class _Replacement:
    """One node group's replacement as it plays out on the engine: new nodes launched, then the old
    ones cordoned and drained by the cloud (`drain_next`, `drain_node`), or left to someone else to
    drain and terminated once they are (`await_drain`)."""

    def __init__(
        self,
        cloud: Cloud,
        op: Operation,
        name: str,
        version: str,
        old_nodes: list[str],
        *,
        force: bool,
        parallel: int,
        drain_timeout: float | None,
        drain: str,
    ) -> None:
        self.cloud, self.op, self.name, self.version, self.old_nodes = cloud, op, name, version, old_nodes
        self.group = group = cloud.groups[name]
        self.force, self.parallel, self.drain_timeout, self.drain = force, parallel, drain_timeout, drain
        self.count = max(group.count, len(old_nodes), 1)
        self.timeout = cloud.drain_timeout if drain_timeout is None else drain_timeout
        self.new_nodes: list[str] = []
        self.gone: set[str] = set()
        self.reported: set[str] = set()

    def launch(self) -> None:
        cloud, op = self.cloud, self.op
        for _ in range(self.count):
            self.new_nodes.append(cloud.add_node(self.name, ready=False, version=self.version))
        cloud._log(op, f"launched {self.count} nodes: {', '.join(self.new_nodes)}")
        cloud.engine.after(5.0, self.wait_ready, key=("op", op.id))

    def wait_ready(self) -> None:
        cloud, op = self.cloud, self.op
        nodes = [cloud.api.store.get("nodes", "", n) for n in self.new_nodes]
        if not all(n is not None and node_ready(n) for n in nodes):
            cloud.engine.after(5.0, self.wait_ready, key=("op", op.id))
            return
        if self.drain == "external":
            op.enter(WAITING_FOR_DRAIN)
            cloud._log(op, "new nodes are Ready; waiting for the old nodes to be cordoned and drained")
            waited = cloud.engine.clock.now()
            cloud.engine.after(0.0, lambda: self.await_drain(waited), key=("op", op.id))
            return
        op.enter(DRAINING)
        cloud._log(op, "new nodes are Ready; cordoning the old nodes")
        for n in self.old_nodes:
            if cloud.api.store.entry("nodes", "", n) is not None:
                cloud.api.patch(NODES, "", n, STRATEGIC, b'{"spec":{"unschedulable":true}}')
        pending = list(self.old_nodes)
        self.drain_next(pending, [])

    def drain_next(self, pending: list[str], draining: list[str]) -> None:
        cloud, op = self.cloud, self.op
        while pending and len(draining) < self.parallel:
            node = pending.pop(0)
            draining.append(node)
            cloud._log(op, f"draining {node}")
            started = cloud.engine.clock.now()
            cloud.engine.after(
                0.0,
                functools.partial(self.drain_node, node, started, pending, draining),
                key=("op", op.id, node),
            )
        if not pending and not draining:
            self.group.count = self.count
            cloud._finish(op)

    def drain_node(self, node: str, started: float, pending: list[str], draining: list[str]) -> None:
        cloud, op = self.cloud, self.op
        if op.state != "InProgress":
            return
        force = self.force and cloud.engine.clock.now() - started >= self.timeout
        left = cloud._evict_all(node, force=force)
        if left is None:
            cloud._log(op, f"{node} drained; terminating the instance")
            cloud.terminate(node)
            draining.remove(node)
            self.drain_next(pending, draining)
            return
        if left != WAITING and left not in self.reported:
            # Log each distinct refusal once: a PDB holding the drain is what operators look for.
            self.reported.add(left)
            cloud._log(op, f"{node}: eviction refused, retrying every {EVICTION_RETRY:g}s: {left}")
        if cloud.engine.clock.now() - started >= self.timeout and not self.force:
            cloud._finish(
                op,
                f"PodEvictionFailure: Reached max retries while trying to evict pods from nodes in "
                f"node group {self.name} ({node}: {left})",
            )
            return
        cloud.engine.after(
            EVICTION_RETRY,
            lambda: self.drain_node(node, started, pending, draining),
            key=("op", op.id, node),
        )

    def await_drain(self, since: float) -> None:
        # Self-managed: whoever drains decides; the cloud only ends instances already emptied.
        cloud, op, gone = self.cloud, self.op, self.gone
        if op.state != "InProgress":
            return
        for node in self.old_nodes:
            if node in gone:
                continue
            obj = cloud.api.store.get("nodes", "", node)
            if obj is None:
                gone.add(node)
                cloud._log(op, f"{node} is gone (terminated elsewhere)")
            elif (obj.get("spec") or {}).get("unschedulable") and not cloud._holds_pods(node):
                gone.add(node)
                cloud._log(op, f"{node} is cordoned and drained; terminating the instance")
                cloud.terminate(node)
        if len(gone) == len(self.old_nodes):
            self.group.count = self.count
            cloud._finish(op)
            return
        if self.drain_timeout is not None and cloud.engine.clock.now() - since >= self.drain_timeout:
            left = ", ".join(n for n in self.old_nodes if n not in gone)
            cloud._finish(
                op,
                f"NodesNotDrained: old nodes of node group {self.name} not cordoned and drained "
                f"{self.drain_timeout:g}s after the new ones were Ready: {left}",
            )
            return
        cloud.engine.after(DRAIN_POLL, lambda: self.await_drain(since), key=("op", op.id))


def _base36(n: int) -> str:
    """`n` in base 36, as an AKS scale set numbers its VMs (`vmss00000a` follows `vmss000009`)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out
