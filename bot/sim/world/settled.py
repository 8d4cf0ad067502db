"""A scenario's workloads built settled: written in the state their controllers would reach.

A scenario with `settled: true` (what `upgrade-bot sim scenario --from-snapshot` writes) does not
play its Deployments, DaemonSets and StatefulSets through the controllers during the warm-up —
150,000 pods scheduled, pulled and started one timer at a time take the sim many minutes. Instead,
as `generate.py` builds `large`, each workload is created through the API server and its
ReplicaSet (for a Deployment) and pods are written straight into the store as they would stand
once settled: each pod defaulted and admitted as the API server does (sidecar injectors included),
bound to the node the scheduler's filters allow and the least loaded of them (fewest pods, then
name: a deterministic spread over the group's nodes), Running with every container started and
Ready, the status the kubelet would have written. The controllers' first pass then finds nothing
to create and writes the statuses (ReplicaSet, Deployment, DaemonSet, StatefulSet, budgets) from
those pods; the kubelets take a pod over when they first have to act on it (eviction, deletion, a
fault, a node change).

A workload is left to its controllers (played as in any scenario) when its pods would not simply
start and run: they go to Fargate or another scheduler, a container behaviour or an immediate fault
of the scenario matches them, they use persistent volume claims, the Deployment is paused, or the
nodes do not have room for all of them.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import rfc3339
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.objects import owner_ref, template_hash
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.controllers.behaviour import Match
from bot.sim.controllers.kubelet import Kubelets
from bot.sim.controllers.scheduler import Scheduler, requests_of
from bot.sim.controllers.workloads import (
    daemon_eligible,
    new_replica_set,
    node_affinity,
    ordinal_labels,
    ordinal_spec,
    pin_to_node,
    pod_from_template,
    revision_name,
    rolling_bounds,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

PODS = KINDS_BY_KEY["pods"]
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
_TOKEN_PREFIX = "kube-api-access-"


@dataclass
class _Plan:
    """The pods of one settled workload: the admitted prototype and the node of each replica."""

    proto: Obj
    nodes: list[str]
    cpu: float
    memory: float
    #: DaemonSet (pinned to its node), StatefulSet (ordinal names) or ReplicaSet (generated names).
    kind: str
    owner_name: str
    #: `Kind/namespace/name` of the workload (the scenario's `placements` and `restarts` key).
    workload: str = ""


def is_workload(obj: Obj) -> bool:
    return obj.get("apiVersion") == "apps/v1" and obj.get("kind") in WORKLOAD_KINDS


class SettledBuild:
    """Builds workload manifests settled (see the module's docstring); `run` returns how many
    workloads it settled and how many it left to the controllers."""

    def __init__(
        self,
        api: Api,
        scheduler: Scheduler,
        kubelets: Kubelets,
        matches: list[Match],
        placements: Mapping[str, list[str]] | None = None,
        restarts: Mapping[str, Mapping[str, list[int]]] | None = None,
    ) -> None:
        self.api = api
        #: `Kind/namespace/name` → the nodes its pods go to first (the scenario's `placements`).
        self.placements = placements or {}
        #: `Kind/namespace/name` → node → the restart counts of its pods there, in turn (`restarts`).
        self.restarts = restarts or {}
        self.store = api.store
        self.scheduler = scheduler
        self.kubelets = kubelets
        #: The pod matches of the behaviours and faults that would make pods differ from a clean
        #: start (node attributes ignored: the node is not chosen yet).
        self.matches = [
            dataclasses.replace(m, node=None, node_group=None, node_version=None) for m in matches
        ]
        self.nodes = [e.name for e in self.store.entries("nodes")]
        self._node_objs: dict[str, Obj] = {}
        self.host_ip: dict[str, str] = {}
        for e in self.store.entries("nodes"):
            node = e.obj()
            self._node_objs[e.name] = node
            self.host_ip[e.name] = next(
                (
                    str(a.get("address", ""))
                    for a in (node.get("status") or {}).get("addresses") or []
                    if a.get("type") == "InternalIP"
                ),
                "",
            )
        #: node → [pods, CPU nano-cores, memory bytes] counted against it (what is bound already).
        self.used: dict[str, list[int]] = {n: [0, 0, 0] for n in self.nodes}
        for e in self.store.entries("pods"):
            bound = e.fields.get("spec.nodeName", "")
            if bound in self.used and e.fields.get("status.phase") not in ("Succeeded", "Failed"):
                self._add(bound, self.scheduler.usage_of(e.obj()))
        self._candidates: dict[str, list[str]] = {}
        self.plans: list[_Plan] = []
        self.settled = 0
        self.played = 0

    # ---- the workloads ----------------------------------------------------------------------------

    def run(self, manifests: list[Obj]) -> None:
        # DaemonSets first: their pods are on every node before the others are spread.
        ordered = sorted(manifests, key=lambda m: 0 if m.get("kind") == "DaemonSet" else 1)
        for manifest in ordered:
            m = manifest.get("metadata") or {}
            ns, name = str(m.get("namespace") or "default"), str(m.get("name", ""))
            kind = KINDS_BY_KEY[f"{str(manifest['kind']).lower()}s.apps"]
            if not name or self.store.entry(kind.key, ns, name) is not None:
                self.api.apply_manifests([manifest])
                self.played += 1
                continue
            obj = self.api.create(kind, ns, manifest).obj()
            try:
                done = {
                    "Deployment": self._deployment,
                    "DaemonSet": self._daemonset,
                    "StatefulSet": self._statefulset,
                }[kind.kind](obj)
            except ApiError:
                done = False  # the pods would not be admitted: let the controllers meet the error
            if done:
                self.settled += 1
            else:
                self.played += 1
        pods = self.store.load(PODS, self._pods(), views=True)
        log.info(
            "settled build: %d workloads written settled (%d pods), %d left to their controllers",
            self.settled,
            pods,
            self.played,
        )

    def _deployment(self, d: Obj) -> bool:
        spec = d["spec"]
        if spec.get("paused"):
            return False
        replicas = int(spec.get("replicas", 1))
        pod_hash = template_hash(spec.get("template") or {})
        _, surge, _ = rolling_bounds(spec, replicas)
        rs = new_replica_set(d, pod_hash, 1, replicas, surge)
        rs_name = rs["metadata"]["name"]
        placeholder = {"metadata": {"name": rs_name, "namespace": d["metadata"]["namespace"], "uid": ""}}
        template = rs["spec"]["template"]
        proto = self._admitted(
            pod_from_template(placeholder, "apps/v1", "ReplicaSet", template, generate=f"{rs_name}-")
        )
        if proto is None:
            return False
        nodes = self._spread(proto, replicas, self._placed("Deployment", d))
        if nodes is None:
            return False
        created = self.api.create(KINDS_BY_KEY["replicasets.apps"], d["metadata"]["namespace"], rs).obj()
        proto["metadata"]["ownerReferences"] = [owner_ref(created, "apps/v1", "ReplicaSet")]
        self._plan(proto, nodes, "ReplicaSet", rs_name, _key("Deployment", d))
        return True

    def _daemonset(self, ds: Obj) -> bool:
        template = ds["spec"].get("template") or {}
        tspec = template.get("spec") or {}
        labels = {
            "controller-revision-hash": template_hash(template),
            "pod-template-generation": str(ds["metadata"].get("generation", 1)),
        }
        eligible = [n for n in self.nodes if daemon_eligible(tspec, self._node_objs[n])]
        if not eligible:
            return True  # nothing to run: the controller only writes its status
        pod = pod_from_template(
            ds, "apps/v1", "DaemonSet", template, generate=f"{ds['metadata']['name']}-", extra_labels=labels
        )
        pin_to_node(pod, eligible[0], tspec)
        proto = self._admitted(pod)
        if proto is None:
            return False
        # Each pod is pinned to its node by name; the other filters are the same for all of them.
        unpinned = {**proto["spec"], "affinity": tspec.get("affinity") or {}}
        fits = self.scheduler.fit_check({**proto, "spec": unpinned})
        need = self.scheduler.usage_of(proto)
        if any(fits(node, self.used[node]) is not None for node in eligible):
            return False
        for node in eligible:
            self._add(node, need)
        self._plan(proto, eligible, "DaemonSet", ds["metadata"]["name"], _key("DaemonSet", ds))
        return True

    def _statefulset(self, sts: Obj) -> bool:
        spec = sts["spec"]
        if spec.get("volumeClaimTemplates"):
            return False
        name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        replicas = int(spec.get("replicas", 1))
        if any(self.store.entry(PODS.key, ns, f"{name}-{i}") is not None for i in range(replicas)):
            return False
        template = spec.get("template") or {}
        revision = revision_name(sts, template)
        pod = pod_from_template(
            sts,
            "apps/v1",
            "StatefulSet",
            template,
            name=f"{name}-0",
            extra_labels=ordinal_labels(revision, f"{name}-0", 0),
        )
        ordinal_spec(pod, sts=sts, pod_name=f"{name}-0", claims=[])
        proto = self._admitted(pod)
        if proto is None:
            return False
        nodes = self._spread(proto, replicas, self._placed("StatefulSet", sts))
        if nodes is None:
            return False
        self._plan(proto, nodes, "StatefulSet", name, _key("StatefulSet", sts))
        return True

    # ---- one workload's pods ------------------------------------------------------------------------

    def _admitted(self, pod: Obj) -> Obj | None:
        """The pod as the API server would store it (defaults, admission, validation), or None
        when it would not simply be scheduled and start."""
        proto = self.api.create(PODS, pod["metadata"]["namespace"], pod, dry_run=True).obj()
        spec = proto.get("spec") or {}
        if spec.get("nodeName") or spec.get("schedulerName", "default-scheduler") != "default-scheduler":
            return None  # Fargate (its own scheduler and nodes) or a custom scheduler
        if any("persistentVolumeClaim" in v for v in spec.get("volumes") or []):
            return None
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for match in self.matches:
            if match.pod_matches(proto) and any(match.container_matches(c) for c in containers):
                return None
        return proto

    def _placed(self, kind: str, obj: Obj) -> list[str]:
        return self.placements.get(_key(kind, obj), [])

    def _spread(self, proto: Obj, replicas: int, placed: Sequence[str] = ()) -> list[str] | None:
        """The node of each replica: first the `placed` nodes that exist and fit, then the least
        loaded node that fits (fewest pods, then name), as the scheduler picks one pod after
        another; None when they do not all fit."""
        if replicas <= 0:
            return []
        fits = self.scheduler.fit_check(proto)
        need = self.scheduler.usage_of(proto)
        spec = proto.get("spec") or {}
        signature = json.dumps(
            [spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True
        )
        candidates = self._candidates.get(signature)
        if candidates is None:
            # The filters that do not depend on what runs on the node, once per kind of placement.
            candidates = [n for n in self.nodes if fits(n, [0, 0, 0]) is None]
            self._candidates[signature] = candidates
        chosen: list[str] = []
        added: dict[str, list[int]] = {}
        allowed = set(candidates)
        for node in placed[:replicas]:
            if node in allowed and fits(node, self.used[node]) is None:
                chosen.append(node)
                self._add(node, need)
                extra = added.setdefault(node, [0, 0, 0])
                for i in range(3):
                    extra[i] += need[i]
        heap = [(self.used[n][0], n) for n in candidates]
        heapq.heapify(heap)
        while len(chosen) < replicas and heap:
            count, node = heapq.heappop(heap)
            if fits(node, self.used[node]) is not None:
                continue  # full for this pod: out of this workload's running
            chosen.append(node)
            self._add(node, need)
            extra = added.setdefault(node, [0, 0, 0])
            for i in range(3):
                extra[i] += need[i]
            heapq.heappush(heap, (count + 1, node))
        if len(chosen) < replicas:
            for node, extra in added.items():
                self._add(node, [-v for v in extra])
            return None
        return chosen

    def _add(self, node: str, need: list[int]) -> None:
        used = self.used[node]
        for i in range(3):
            used[i] += need[i]

    def _plan(self, proto: Obj, nodes: list[str], kind: str, owner: str, workload: str) -> None:
        cpu, memory = requests_of(proto)
        self.plans.append(_Plan(proto, nodes, cpu, memory, kind, owner, workload))

    # ---- writing the pods -----------------------------------------------------------------------------

    def _pods(self) -> Iterator[Obj]:
        ids = self.api.ids
        stamp = rfc3339(self.api.clock.now())
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        taken: set[tuple[str, str]] = set()
        for plan in self.plans:
            pm, ps = plan.proto["metadata"], plan.proto["spec"]
            ns = pm["namespace"]
            token = next(
                (
                    v["name"]
                    for v in ps.get("volumes") or []
                    if str(v.get("name", "")).startswith(_TOKEN_PREFIX)
                ),
                None,
            )
            status: Obj | None = None  # the first pod's, made each next pod's own
            restarts = {node: list(counts) for node, counts in self.restarts.get(plan.workload, {}).items()}
            for i, node in enumerate(plan.nodes):
                meta = {**pm, "uid": ids.uid(), "creationTimestamp": stamp}
                spec = {**ps, "nodeName": node}
                if plan.kind == "StatefulSet":
                    name = f"{plan.owner_name}-{i}"
                    meta["labels"] = {
                        **pm["labels"],
                        **ordinal_labels(pm["labels"]["controller-revision-hash"], name, i),
                    }
                    spec["hostname"] = name
                else:
                    name = f"{pm['generateName']}{ids.suffix(5)}"
                    while (ns, name) in taken or self.store.entry(PODS.key, ns, name) is not None:
                        name = f"{pm['generateName']}{ids.suffix(5)}"
                    if plan.kind == "DaemonSet":
                        spec["affinity"] = {**(ps.get("affinity") or {}), "nodeAffinity": node_affinity(node)}
                meta["name"] = name
                taken.add((ns, name))
                if token is not None:
                    _fresh_token(spec, token, f"{_TOKEN_PREFIX}{ids.suffix(5)}")
                pod: Obj = {"metadata": meta, "spec": spec}
                host_ip = self.host_ip.get(node, "")
                if status is None:
                    pod["status"] = {**plan.proto.get("status", {}), "conditions": [dict(scheduled)]}
                    status = pod["status"] = self.kubelets.running_status(pod, host_ip)
                else:
                    pod["status"] = self.kubelets.running_status_like(status, pod, host_ip)
                counts = restarts.get(node)
                if counts:
                    pod["status"] = _restarted(pod["status"], counts.pop(0))
                self.scheduler.remember_requests(meta["uid"], plan.cpu, plan.memory)
                yield pod


def _key(kind: str, obj: Obj) -> str:
    m = obj.get("metadata") or {}
    return f"{kind}/{m.get('namespace', '')}/{m.get('name', '')}"


def _restarted(status: Obj, count: int) -> Obj:
    """`status` with its first container restarted `count` times (a copy: the status is shared as
    the next pods' model). A snapshot records a pod's restarts summed over its containers."""
    if count <= 0 or not status.get("containerStatuses"):
        return status
    first, *rest = status["containerStatuses"]
    return {**status, "containerStatuses": [{**first, "restartCount": count}, *rest]}


def _fresh_token(spec: Obj, old: str, new: str) -> None:
    """Each pod's own service-account token volume name (admission draws one per pod)."""
    spec["volumes"] = [{**v, "name": new} if v.get("name") == old else v for v in spec.get("volumes") or []]
    for key in ("initContainers", "containers"):
        if key in spec:
            spec[key] = [
                {
                    **c,
                    "volumeMounts": [
                        {**vm, "name": new} if vm.get("name") == old else vm
                        for vm in c.get("volumeMounts") or []
                    ],
                }
                if c.get("volumeMounts")
                else c
                for c in spec[key]
            ]
