"""Reference only: the snapshot projection as it was before the typed decoder (issue #12).

Each page parsed whole by `json.loads` (`JsonLoadsReader`) and projected from raw dicts by the
functions below, copied unchanged from `bot/core/snapshots/projection.py` as of the commit before
the change. `test_decoded_snapshot_matches_json_loads.py` holds the production path (msgspec
structs) to it record by record; nothing in the bot imports this module.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, Protocol

from bot.core.rollout import verdict
from bot.core.snapshots.apiuse import api_uses
from bot.core.snapshots.projection import ISTIO_ROOT, OBJECT_LISTS, project_object, template_record
from bot.errors import ClusterError

log = logging.getLogger(__name__)

FORMAT = 1

#: Labels that name a node's group, most specific first (EKS managed, eksctl, GKE, AKS, Karpenter).
DEFAULT_NODE_GROUP_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "karpenter.sh/nodepool",
    "node.kubernetes.io/nodegroup",
)

POD_FIELDS: tuple[str, ...] = (
    "namespace",
    "name",
    "uid",
    "workload_kind",
    "workload",
    "node",
    "phase",
    "status",
    "ready",
    "total",
    "restarts",
    "reasons",
    "images",
    "ip",
    "created",
    "containers",
    "init_containers",
    "unready",
    "volumes",
)
P = {name: i for i, name in enumerate(POD_FIELDS)}

#: Container states that mean trouble, as kubectl shows them in the STATUS column.
BAD_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "Error",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
        "OOMKilled",
        "RunContainerError",
        "ContainerCannotRun",
    }
)


class PageLike(Protocol):
    @property
    def items(self) -> list[dict[str, Any]]: ...

    @property
    def resource_version(self) -> str: ...

    @property
    def continue_token(self) -> str: ...


class ClusterReader(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def context(self) -> str: ...

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500
    ) -> Iterator[PageLike]: ...

    def close(self) -> None: ...


Progress = Callable[[str, int], None]


def _intern(value: Any) -> str:
    return sys.intern(str(value)) if value is not None else ""


def take_snapshot(
    cluster: ClusterReader,
    *,
    label: str,
    taken_by: str,
    now: datetime,
    node_group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS,
    events_since: timedelta = timedelta(hours=1),
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Read the cluster and return the snapshot body (plain JSON-ready data).

    Raises ClusterUnreachable if the API server does not answer at all: nothing half-taken.
    """
    report = progress or (lambda _resource, _count: None)
    version = cluster.get_json("/version")  # first call: an unreachable cluster fails here
    snap: dict[str, Any] = {
        "format": FORMAT,
        "cluster": cluster.name,
        "context": cluster.context,
        "label": label,
        "taken_at": now.astimezone(UTC).isoformat(),
        "taken_by": taken_by,
        "version": {k: version.get(k, "") for k in ("gitVersion", "major", "minor", "platform")},
        "api_versions": [],
        "nodes": [],
        "workloads": [],
        "pdbs": [],
        "namespaces": [],
        "events": [],
        "pod_fields": list(POD_FIELDS),
        "pods": [],
        "gaps": [],
        "objects": [],
        "api_uses": {},
    }
    gaps: list[dict[str, str]] = snap["gaps"]

    def collect(resource: str, path: str, project: Callable[[dict[str, Any]], Any]) -> list[Any] | None:
        """Project every object of a list; on a 403 or repeated expiry, record a gap instead."""
        for attempt in (1, 2):
            out: list[Any] = []
            try:
                for page in cluster.list_pages(path):
                    for item in page.items:
                        record = project(item)
                        if record is not None:
                            out.append(record)
                    report(resource, len(out))
                return out
            except ClusterError as exc:
                if exc.status == 410 and attempt == 1:
                    log.info("%s list expired mid-way; listing again from the start", resource)
                    continue
                if exc.status in (403, 410):
                    why = "forbidden by the bot's RBAC role" if exc.status == 403 else "list expired twice"
                    gaps.append({"resource": resource, "reason": f"{why}: {exc.user_message}"})
                    return None
                raise
        return None  # pragma: no cover - the loop always returns

    snap["api_versions"] = _api_versions(cluster, gaps)
    snap["namespaces"] = sorted(
        collect("namespaces", "/api/v1/namespaces", lambda o: o["metadata"]["name"]) or []
    )
    snap["nodes"] = collect("nodes", "/api/v1/nodes", lambda o: project_node(o, node_group_labels)) or []

    # ReplicaSet → Deployment, so pods are keyed by the workload people know, not a hash suffix.
    rs_owner: dict[tuple[str, str], tuple[str, str]] = {}

    def remember_rs(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        owner = _controller(meta)
        key = (_intern(meta.get("namespace")), _intern(meta["name"]))
        rs_owner[key] = (_intern(owner[0]), _intern(owner[1])) if owner else ("ReplicaSet", key[1])

    if collect("replicasets", "/apis/apps/v1/replicasets", remember_rs) is None:
        log.info("replicasets unreadable: pods are keyed by their ReplicaSet")

    workloads: list[dict[str, Any]] = []
    for kind, plural in (
        ("Deployment", "deployments"),
        ("DaemonSet", "daemonsets"),
        ("StatefulSet", "statefulsets"),
    ):
        got = collect(plural, f"/apis/apps/v1/{plural}", lambda o, k=kind: project_workload(k, o))  # type: ignore[misc]
        workloads.extend(got or [])
    snap["workloads"] = workloads
    snap["pdbs"] = collect("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", project_pdb) or []
    pods = collect("pods", "/api/v1/pods", lambda o: project_pod(o, rs_owner))
    snap["pods"] = pods or []
    cutoff = now - events_since
    snap["events"] = collect("events", "/api/v1/events", lambda o: project_event(o, cutoff)) or []
    for api_version, kind, path in OBJECT_LISTS:
        if api_version in snap["api_versions"]:
            got = collect(
                path.rsplit("/", 1)[-1], path, lambda o, a=api_version, k=kind: project_object(a, k, o)
            )  # type: ignore[misc]
            snap["objects"].extend(got or [])
    for ns in sorted({w["namespace"] for w in workloads if w["name"] == "istiod"}):
        try:
            cm = cluster.get_json(f"/api/v1/namespaces/{ns}/configmaps/{ISTIO_ROOT}")
        except ClusterError as exc:
            if exc.status != 404:
                raise
            continue
        snap["objects"].append(project_object("v1", "ConfigMap", cm))
    # Old API uses are read by the production code on the adapter under the old path (a handful of
    # objects, not a list the typed decoder was made for): the section is there, the same.
    snap["api_uses"] = api_uses(
        getattr(cluster, "cluster", cluster),
        snap["api_versions"],
        lambda resource, exc: gaps.append({"resource": resource, "reason": exc.user_message}),
    )
    snap["counts"] = {
        "nodes": len(snap["nodes"]),
        "pods": len(snap["pods"]),
        "workloads": len(workloads),
        "namespaces": len(snap["namespaces"]),
        "warning_events": len(snap["events"]),
    }
    return snap


def _api_versions(cluster: ClusterReader, gaps: list[dict[str, str]]) -> list[str]:
    try:
        core = cluster.get_json("/api").get("versions") or []
        groups = cluster.get_json("/apis").get("groups") or []
    except ClusterError as exc:
        if exc.status != 403:
            raise
        gaps.append({"resource": "api discovery", "reason": exc.user_message})
        return []
    served = [str(v) for v in core]
    for group in groups:
        served.extend(str(v.get("groupVersion")) for v in group.get("versions") or [])
    return sorted(set(served))


def _controller(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return None


def project_node(
    obj: Mapping[str, Any], group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS
) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    labels = meta.get("labels") or {}
    status = obj.get("status", {})
    info = status.get("nodeInfo") or {}
    spec = obj.get("spec", {})
    group_label = next((k for k in group_labels if labels.get(k)), "")
    group = labels[group_label] if group_label else ""
    if not group and labels.get("eks.amazonaws.com/compute-type") == "fargate":
        group, group_label = "fargate", "eks.amazonaws.com/compute-type"
    roles = sorted(
        k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k
    )
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    allocatable = status.get("allocatable") or {}
    return {
        "name": meta.get("name", ""),
        "group": group or "(none)",
        "group_label": group_label,
        "roles": roles,
        "zone": labels.get("topology.kubernetes.io/zone", ""),
        "instance_type": labels.get("node.kubernetes.io/instance-type", ""),
        "kubelet": info.get("kubeletVersion", ""),
        "os_image": info.get("osImage", ""),
        "kernel": info.get("kernelVersion", ""),
        "runtime": info.get("containerRuntimeVersion", ""),
        "boot_id": info.get("bootID", ""),
        "ready": conditions.get("Ready", "Unknown"),
        # Pressure conditions that are True are worth seeing; the rest are noise.
        "problems": sorted(t for t, s in conditions.items() if t != "Ready" and s == "True"),
        "taints": sorted(
            f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in spec.get("taints") or []
        ),
        "unschedulable": bool(spec.get("unschedulable")),
        "allocatable": {k: allocatable[k] for k in ("cpu", "memory", "pods") if k in allocatable},
        "created": meta.get("creationTimestamp", ""),
        "internal_ip": addresses.get("InternalIP", ""),
        "external_ip": addresses.get("ExternalIP", ""),
        "labels": dict(sorted(labels.items())),
    }


def project_workload(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    if kind == "DaemonSet":
        desired = status.get("desiredNumberScheduled", 0)
        ready = status.get("numberReady", 0)
        updated = status.get("updatedNumberScheduled", 0)
        available = status.get("numberAvailable", 0)
    else:
        desired = spec.get("replicas", 1)
        ready = status.get("readyReplicas", 0)
        updated = status.get("updatedReplicas", 0)
        available = status.get("availableReplicas", 0)
    state, message = verdict(kind, obj)
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return {
        "kind": kind,
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "desired": int(desired or 0),
        "ready": int(ready or 0),
        "updated": int(updated or 0),
        "available": int(available or 0),
        "rollout": state,
        "rollout_message": message,
        "images": [c.get("image", "") for c in containers],
        "template": template_record(spec, env=meta.get("namespace") == "kube-system"),
    }


def project_pdb(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    status = obj.get("status", {})
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "disruptions_allowed": int(status.get("disruptionsAllowed", 0) or 0),
        "current_healthy": int(status.get("currentHealthy", 0) or 0),
        "desired_healthy": int(status.get("desiredHealthy", 0) or 0),
        "expected_pods": int(status.get("expectedPods", 0) or 0),
    }


def pod_display_status(obj: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The STATUS kubectl shows, and every waiting/terminated reason found (for the diff)."""
    meta = obj.get("metadata", {})
    status = obj.get("status", {})
    reason = status.get("reason") or status.get("phase") or "Unknown"
    reasons: list[str] = []
    inits = status.get("initContainerStatuses") or []
    for i, cs in enumerate(inits):
        state = cs.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            r = term.get("reason") or f"ExitCode:{term.get('exitCode')}"
            reasons.append(r)
            reason = f"Init:{r}"
        elif wait and wait.get("reason") and wait.get("reason") != "PodInitializing":
            reasons.append(wait["reason"])
            reason = f"Init:{wait['reason']}"
        else:
            reason = f"Init:{i}/{len(inits)}"
        break
    else:
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            wait, term = state.get("waiting"), state.get("terminated")
            if wait and wait.get("reason"):
                reasons.append(wait["reason"])
                reason = wait["reason"]
            elif term and term.get("reason"):
                reasons.append(term["reason"])
                reason = term["reason"]
            last = (cs.get("lastState") or {}).get("terminated")
            if last and last.get("reason") in ("Error", "OOMKilled"):
                reasons.append(last["reason"])
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason), sorted(set(reasons))


def project_pod(obj: Mapping[str, Any], rs_owner: Mapping[tuple[str, str], tuple[str, str]]) -> list[Any]:
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    namespace = _intern(meta.get("namespace"))
    owner = _controller(meta)
    if owner is None:
        kind, workload = "Pod", str(meta.get("name", ""))
    elif owner[0] == "ReplicaSet":
        kind, workload = rs_owner.get((namespace, owner[1]), owner)
    else:
        kind, workload = owner
    statuses = status.get("containerStatuses") or []
    total = len(spec.get("containers") or []) or len(statuses)
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount", 0) or 0) for cs in statuses)
    display, reasons = pod_display_status(obj)
    images = ",".join(c.get("image", "") for c in spec.get("containers") or [])
    row: list[Any] = [None] * len(POD_FIELDS)
    row[P["namespace"]] = namespace
    row[P["name"]] = meta.get("name", "")
    row[P["uid"]] = meta.get("uid", "")
    row[P["workload_kind"]] = _intern(kind)
    row[P["workload"]] = _intern(workload)
    row[P["node"]] = _intern(spec.get("nodeName") or "")
    row[P["phase"]] = _intern(status.get("phase") or "")
    row[P["status"]] = _intern(display)
    row[P["ready"]] = ready
    row[P["total"]] = total
    row[P["restarts"]] = restarts
    row[P["reasons"]] = _intern(",".join(reasons))
    row[P["images"]] = _intern(images)
    row[P["ip"]] = status.get("podIP") or ""
    row[P["created"]] = _intern(meta.get("creationTimestamp") or "")
    row[P["containers"]] = ",".join(c.get("name", "") for c in spec.get("containers") or [])
    row[P["init_containers"]] = ",".join(
        f"{c.get('name', '')}={c.get('image', '')}" for c in spec.get("initContainers") or []
    )
    unready = []
    for cs in statuses:
        if not cs.get("ready"):
            state = cs.get("state") or {}
            why = (state.get("waiting") or state.get("terminated") or {}).get("reason", "")
            unready.append(f"{cs.get('name', '')}:{why}")
    row[P["unready"]] = ",".join(unready)
    row[P["volumes"]] = ",".join(
        f"{v.get('name', '')}:{'emptyDir' if 'emptyDir' in v else 'hostPath'}"
        for v in spec.get("volumes") or []
        if "emptyDir" in v or "hostPath" in v
    )
    return row


def project_event(obj: Mapping[str, Any], cutoff: datetime) -> dict[str, Any] | None:
    if obj.get("type") != "Warning":
        return None
    when = (
        obj.get("lastTimestamp")
        or obj.get("eventTime")
        or (obj.get("metadata") or {}).get("creationTimestamp")
    )
    moment = _parse_time(when)
    if moment is not None and moment < cutoff:
        return None
    involved = obj.get("involvedObject") or {}
    return {
        "namespace": involved.get("namespace") or (obj.get("metadata") or {}).get("namespace", ""),
        "kind": involved.get("kind", ""),
        "name": involved.get("name", ""),
        "reason": obj.get("reason", ""),
        "message": str(obj.get("message", ""))[:500],
        "count": int(obj.get("count") or 1),
        "last": when or "",
    }


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def pods_as_dicts(snap: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    fields = snap.get("pod_fields") or POD_FIELDS
    for row in snap.get("pods") or []:
        yield dict(zip(fields, row, strict=False))


class JsonLoadsReader:
    """The old adapter's list path over the new adapter's transport: raw pages, `json.loads` each."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.name = cluster.name
        self.context = cluster.context

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.cluster.get_json(path, query)  # type: ignore[no-any-return]

    def list_pages(self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500) -> Any:
        token = ""
        while True:
            params = {**(query or {}), "limit": limit, **({"continue": token} if token else {})}
            body = json.loads(self.cluster.get_raw(path, params))
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            yield SimpleNamespace(
                items=body.get("items") or [],
                resource_version=str(meta.get("resourceVersion", "")),
                continue_token=token,
            )
            if not token:
                return

    def close(self) -> None:
        self.cluster.close()
