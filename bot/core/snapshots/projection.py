"""Cluster snapshots: a compact, stored record of what the cluster looked like at one moment.

List pages stream in (500 objects at a time), decoded by the kube adapter straight into the structs
of `schema.py`, which declare only the fields read here; each page is projected into slim records
and dropped, so memory stays bounded at 150,000 pods and the projection is a thin step over typed
data. Pods are kept as rows (tuples in memory, arrays when stored) of a fixed column list
of strings and ints; nodes, workloads and PDBs, which are few, as small dicts.

Every list is listed, decoded and projected by a helper process of the kube adapter (`map_pages`),
which hands back JSON records, so the bot's interpreter never holds its lock for a page (a Slack ack
does not wait). The pods are most of a large cluster's bytes (800 MB of JSON at 150,000 pods):
their helper starts once the ReplicaSets are known and works while the other lists are read, so
the two cores share the work; a snapshot to be stored compresses their rows into its body as they
arrive (`RowsSink`) and never builds them here.

A resource the bot may not read (403) or whose list could not be completed (the continue token
expired twice) is recorded as a named *gap*: shown to the user, and skipped by the diff rather
than read as "everything is gone".
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

import msgspec

from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.kube.applied import APPLIED_KINDS
from bot.core.kube.wire import ContainerState, InvolvedObject
from bot.core.providers import Provider
from bot.core.rollout import verdict
from bot.core.snapshots import schema
from bot.core.snapshots.apiuse import api_uses, applied_in
from bot.core.snapshots.logreads import LogProbe, LogReads
from bot.core.snapshots.provider import capture_provider
from bot.decoders import decoder
from bot.errors import ClusterError

log = logging.getLogger(__name__)

FORMAT = 1

#: The pod columns the diff reads (`bot.core.snapshots.diff._fold`), first in every row.
POD_DIFF_FIELDS: tuple[str, ...] = (
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
)
POD_FIELDS: tuple[str, ...] = (
    *POD_DIFF_FIELDS,
    "images",
    "ip",
    "created",
    # What a twin of the cluster needs to be true to it (`bot/sim/world/twin.py`), added after the
    # columns above so that older snapshots read the same: the containers' names (in the order of
    # `images`, injected sidecars included), the init containers as `name=image`, and each
    # container that is not ready as `name:reason` (the reason empty when it simply is not ready),
    # and the emptyDir and hostPath volumes as `name:emptyDir` or `name:hostPath`.
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


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PageLike(Protocol[T_co]):
    @property
    def items(self) -> Sequence[T_co]: ...

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

    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes: ...

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500, item_type: type[T]
    ) -> Iterator[PageLike[T]]: ...

    def map_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = 500,
        item_type: type[T],
        transform: Callable[[list[T]], bytes],
    ) -> MappedLike: ...

    def close(self) -> None: ...


class MappedPageLike(Protocol):
    @property
    def data(self) -> bytes: ...

    @property
    def count(self) -> int: ...


class MappedLike(Protocol):
    """Pages transformed into bytes, worked on ahead (the kube adapter: in a helper process)."""

    def __iter__(self) -> Iterator[MappedPageLike]: ...

    def close(self) -> None: ...


class RowsSink(Protocol):
    """Where `take_snapshot` hands the pod rows as the JSON they are stored as, while they arrive.

    `begin(snap)` comes when every section before `"pods"` (in `snap`'s key order) is in `snap`,
    and again if the pods are listed again from the start (a 410) or end as a gap: whatever rows came
    before are then void. `rows(data)` is one page's rows, JSON arrays separated by commas, without
    the enclosing brackets. Sections after `"pods"` are final only once `take_snapshot` returns.
    """

    def begin(self, snap: Mapping[str, Any]) -> None: ...

    def rows(self, data: bytes) -> None: ...


class Progress(Protocol):
    """Told after each page of a list: the resource, the items read so far, and the list's total
    when the server says how many remain (`remainingItemCount`; None when it does not)."""

    def __call__(self, resource: str, count: int, total: int | None = None) -> None: ...


def list_total(count: int, page: object) -> int | None:
    """The items of a list in all: `count` read so far plus the page's `remaining`, if it has one
    (the kube adapter's pages do; a reader that does not say leaves the total unknown)."""
    if getattr(page, "continue_token", None) == "":
        return count  # the last page: the server no longer counts what remains
    remaining = getattr(page, "remaining", None)
    return None if remaining is None else count + int(remaining)


def no_progress(resource: str, count: int, total: int | None = None) -> None:
    return None


def take_snapshot(
    cluster: ClusterReader,
    *,
    label: str,
    taken_by: str,
    now: datetime,
    node_group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS,
    events_since: timedelta = timedelta(hours=1),
    progress: Progress | None = None,
    pods_to: RowsSink | None = None,
    logs: LogProbe | None = None,
    provider: Callable[[], Provider] | None = None,
    beside: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Read the cluster and return the snapshot body (plain JSON-ready data).

    With `logs`, the lines of the containers' logs that it keeps go in `snap["logs"]`
    (`logreads`: read while the pods are listed).
    `beside` is called once the pods' helper process is listing them: what the caller has to do
    besides (the command line opens the store) starts then, not while this process is still
    importing and connecting, when it would hold the interpreter lock the first lists wait for.
    With `provider` (it connects to the cluster's provider), the cloud's side goes in
    `snap["provider"]` (`bot.core.snapshots.provider`).

    Pod rows are tuples in `snap["pods"]`; or, with `pods_to`, they go there as the JSON they are
    stored as, page by page while they arrive, and `snap["pods"]` stays empty (storing a snapshot
    never builds them in this process: see `RowsSink`).
    Raises ClusterUnreachable if the API server does not answer at all: nothing half-taken.
    """
    report: Progress = no_progress if progress is None else progress
    version = cluster.get_json("/version")  # first call: an unreachable cluster fails here
    snap = _heading(cluster, label=label, taken_by=taken_by, now=now, version=version)
    gaps: list[dict[str, str]] = snap["gaps"]
    collect = _Lists(cluster, gaps, report)

    snap["api_versions"] = _api_versions(cluster, gaps)

    # ReplicaSet → Deployment, so pods are keyed by the workload people know, not a hash suffix.
    # Listed first: the pods' helper process, started next, takes this map with it.
    rs_owner: dict[tuple[str, str], tuple[str, str]] = {}

    def rs_row(obj: schema.Named) -> tuple[str, str, str, str]:
        meta = obj.metadata
        owner = _controller(meta) or ("ReplicaSet", meta.name or "")
        return meta.namespace or "", meta.name or "", owner[0], owner[1]

    replicasets = collect("replicasets", "/apis/apps/v1/replicasets", schema.Named, rs_row)
    if replicasets is None:
        log.info("replicasets unreadable: pods are keyed by their ReplicaSet")
    for namespace, name, kind, workload in replicasets or ():
        rs_owner[namespace, name] = (kind, workload)

    def pod_rows(items: list[schema.Pod]) -> bytes:
        # Runs in the pod list's helper process: a page of pods in, its rows as a JSON array out.
        return _ENCODER.encode([project_pod(o, rs_owner) for o in items])

    def list_pods() -> MappedLike:
        return cluster.map_pages("/api/v1/pods", item_type=schema.Pod, transform=pod_rows)

    # The pods, nine tenths of a large cluster's bytes, are listed, decoded and projected by a helper
    # process from now on, while the lists below are read (each by a helper of its own).
    pending: MappedLike | None = list_pods()
    if beside is not None:
        beside()
    try:
        snap["namespaces"] = sorted(
            collect("namespaces", "/api/v1/namespaces", schema.Named, lambda o: o.metadata.name) or []
        )
        snap["nodes"] = (
            collect("nodes", "/api/v1/nodes", schema.Node, lambda o: project_node(o, node_group_labels)) or []
        )
        workloads = _workloads(collect)
        snap["workloads"] = workloads
        snap["pdbs"] = (
            collect("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", schema.Pdb, project_pdb)
            or []
        )
        cutoff = now - events_since
        snap["events"] = (
            collect("events", "/api/v1/events", schema.Event, lambda o: project_event(o, cutoff)) or []
        )
        snap["objects"] = _objects(cluster, collect, snap["api_versions"], workloads, gaps)
        snap["api_uses"] = api_uses(
            cluster,
            snap["api_versions"],
            lambda resource, exc: gaps.append({"resource": resource, "reason": exc.user_message}),
            listed=collect.applied,
        )
        if provider is not None:  # while the pods' helper lists them
            snap["provider"] = capture_provider(
                provider,
                snap["version"],
                lambda reason: gaps.append({"resource": "provider", "reason": reason}),
            )
        mapped, pending = pending, None
        rows, count, reads = _pods(mapped, list_pods, collect, snap, pods_to, logs)
    finally:
        if pending is not None:
            pending.close()
    # In the order the resources were listed before the pods' helper (so a gap's place is kept).
    gaps.sort(key=lambda gap: _GAP_ORDER.get(gap["resource"], len(_GAP_ORDER)))
    snap["pods"] = _ROWS.decode(rows)
    if logs is not None:
        snap["logs"] = reads.lines() if reads is not None else []
    snap["counts"] = {
        "nodes": len(snap["nodes"]),
        "pods": count,
        "workloads": len(workloads),
        "namespaces": len(snap["namespaces"]),
        "warning_events": len(snap["events"]),
    }
    return snap


def _heading(
    cluster: ClusterReader, *, label: str, taken_by: str, now: datetime, version: Mapping[str, Any]
) -> dict[str, Any]:
    """A snapshot's body before its lists are read: every section, in the order it is stored."""
    return {
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
        # What the checks read besides, that a twin of the cluster keeps (`project_object`).
        "objects": [],
        # What the cluster says of old APIs (calls, Helm releases, applied objects: `apiuse`).
        "api_uses": {},
    }


#: The applied kinds (`apiuse`) by list path: a snapshot list of one of them finds its old API uses
#: in the same pass (`_Lists`), so that `api_uses` does not list the kind again.
_APPLIED_BY_PATH = {kind.path: kind for kind in APPLIED_KINDS}


class _Lists:
    """The snapshot's lists: `collect` projects every object of one; on a 403 or repeated expiry it
    records a gap instead.

    A list is decoded and projected in a helper process too (`map_pages`), which hands back each
    page's records as JSON: decoding a page holds the interpreter lock for milliseconds, and this
    process has Slack to answer. The records are JSON data already (they are stored so), and come
    back as they went. A list of one of the applied kinds (Deployments, PDBs, webhooks, CRDs …)
    also hands back the old API uses its objects name (`apiuse.applied_in`), kept in `applied` by
    path: those kinds are then listed once, not once here and once more by `api_uses`."""

    def __init__(self, cluster: ClusterReader, gaps: list[dict[str, str]], report: Progress) -> None:
        self.cluster, self.gaps, self.report = cluster, gaps, report
        self.applied: dict[str, list[dict[str, Any]]] = {}

    def gap_or_again(self, resource: str, exc: ClusterError, attempt: int) -> bool:
        """True to list again (the first expiry); on a 403 or repeated expiry, record a gap."""
        if exc.status == 410 and attempt == 1:
            log.info("%s list expired mid-way; listing again from the start", resource)
            return True
        if exc.status in (403, 410):
            why = "forbidden by the bot's RBAC role" if exc.status == 403 else "list expired twice"
            self.gaps.append({"resource": resource, "reason": f"{why}: {exc.user_message}"})
            return False
        raise exc

    def __call__(
        self, resource: str, path: str, item_type: type[T], project: Callable[[T], Any]
    ) -> list[Any] | None:
        kind = _APPLIED_BY_PATH.get(path)
        if kind is None:

            def records(items: list[Any]) -> bytes:
                return _ENCODER.encode([r for r in map(project, items) if r is not None])

        else:
            decode = decoder(item_type).decode

            def records(items: list[Any]) -> bytes:
                # Each object's JSON is decoded for the record, and read for old API uses.
                rows = [r for r in (project(decode(raw)) for raw in items) if r is not None]
                uses = [u for u in (applied_in(raw, kind.group_version, kind.kind) for raw in items) if u]
                return _ENCODER.encode([rows, uses])

        for attempt in (1, 2):
            out: list[Any] = []
            uses: list[dict[str, Any]] = []
            seen = 0
            try:
                with contextlib.closing(
                    self.cluster.map_pages(
                        path, item_type=item_type if kind is None else msgspec.Raw, transform=records
                    )
                ) as pages:
                    for page in pages:
                        if kind is None:
                            out.extend(_RECORDS.decode(page.data))
                        else:
                            got, found = _PAIR.decode(page.data)
                            out.extend(got)
                            uses.extend(found)
                        seen += page.count
                        self.report(resource, seen, list_total(seen, page))
                if kind is not None:
                    self.applied[path] = uses
                return out
            except ClusterError as exc:
                if not self.gap_or_again(resource, exc, attempt):
                    return None
        return None  # pragma: no cover - the loop always returns


def _pods(
    mapped: MappedLike | None,
    list_pods: Callable[[], MappedLike],
    lists: _Lists,
    snap: dict[str, Any],
    pods_to: RowsSink | None,
    logs: LogProbe | None,
) -> tuple[bytes, int, LogReads | None]:
    """The pods' rows as one JSON array (empty with `pods_to`, which had them page by page), their
    count, and the logs being read of them (`logs`' choice): from the helper started early
    (`mapped`), or, after an expiry, from a list started again."""
    rows, count, reads = b"[]", 0, None
    try:
        for attempt in (1, 2):
            mapped = mapped or list_pods()
            fragments: list[bytes] = []
            if reads is not None:
                reads.close()  # the pods of a list that expired: their logs are chosen again
            reads = LogReads(lists.cluster, logs, P) if logs is not None else None
            count = 0
            if pods_to is not None:
                pods_to.begin(snap)
            try:
                with contextlib.closing(mapped):
                    for page in mapped:
                        if page.count:
                            if reads is not None:
                                reads.page(page.data)
                            inner = page.data[1:-1]  # the rows, without the page's [ ]
                            if pods_to is not None:
                                pods_to.rows(inner)
                            else:
                                fragments.append(inner)
                            count += page.count
                        lists.report("pods", count, list_total(count, page))
                rows = b"[" + b",".join(fragments) + b"]"
                fragments.clear()
                break
            except ClusterError as exc:
                mapped = None
                if not lists.gap_or_again("pods", exc, attempt):
                    if pods_to is not None:
                        pods_to.begin(snap)  # what it had is dropped: no pods, as `snap` says
                    rows, count = b"[]", 0
                    break
    except BaseException:
        if reads is not None:
            reads.close()  # no log read outlives the snapshot that chose it
        raise
    return rows, count, reads


#: Gaps are reported in this order, whatever order the lists ran in.
_GAP_ORDER = {
    resource: i
    for i, resource in enumerate(
        (
            "api discovery",
            "namespaces",
            "nodes",
            "replicasets",
            "deployments",
            "daemonsets",
            "statefulsets",
            "poddisruptionbudgets",
            "pods",
            "events",
        )
    )
}
_ENCODER = msgspec.json.Encoder()
_ROWS = msgspec.json.Decoder(list[tuple[Any, ...]])
_RECORDS = msgspec.json.Decoder(list[Any])
_PAIR = msgspec.json.Decoder(tuple[list[Any], list[dict[str, Any]]])


def _workloads(collect: Callable[..., list[Any] | None]) -> list[dict[str, Any]]:
    workloads: list[dict[str, Any]] = []
    for kind, plural in (
        ("Deployment", "deployments"),
        ("DaemonSet", "daemonsets"),
        ("StatefulSet", "statefulsets"),
    ):
        got = collect(
            plural,
            f"/apis/apps/v1/{plural}",
            schema.Workload,
            lambda o, k=kind: project_workload(k, msgspec.to_builtins(o)),
        )
        workloads.extend(got or [])
    return workloads


#: The kinds the checks read besides the workloads, listed whole: (apiVersion, kind, plural path).
OBJECT_LISTS: tuple[tuple[str, str, str], ...] = (
    ("v1", "Service", "/api/v1/services"),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ),
    ("cert-manager.io/v1", "Certificate", "/apis/cert-manager.io/v1/certificates"),
)
#: The ConfigMap istiod publishes its root certificate in (the Istio root check reads it by name).
ISTIO_ROOT = "istio-ca-root-cert"


def _objects(
    cluster: ClusterReader,
    collect: Callable[..., list[Any] | None],
    served: Sequence[str],
    workloads: Sequence[Mapping[str, Any]],
    gaps: list[dict[str, str]],
) -> list[dict[str, Any]]:
    """Services, webhook configurations, CRDs, cert-manager Certificates and Istio's root
    certificate: what the checks read besides the workloads, pruned to what they read, so that a
    twin of the cluster gives the same findings (`bot/sim/world/twin.py`). Certificates here are
    public ones (CA bundles, a root); no Secret is read."""
    out: list[dict[str, Any]] = []
    for api_version, kind, path in OBJECT_LISTS:
        if api_version not in served:
            continue  # not installed (cert-manager): nothing to list
        got = collect(
            path.rsplit("/", 1)[-1],
            path,
            schema.Loose,
            lambda o, a=api_version, k=kind: project_object(a, k, msgspec.to_builtins(o)),
        )
        out.extend(got or [])
    for ns in sorted({str(w.get("namespace", "")) for w in workloads if w.get("name") == "istiod"}):
        try:
            cm = cluster.get_json(f"/api/v1/namespaces/{ns}/configmaps/{ISTIO_ROOT}")
        except ClusterError as exc:
            if exc.status == 403:
                gaps.append({"resource": f"configmap {ns}/{ISTIO_ROOT}", "reason": exc.user_message})
            elif exc.status != 404:
                raise
            continue
        out.append(project_object("v1", "ConfigMap", cm))
    return out


def project_object(api_version: str, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """One of `_objects`' objects as a manifest, pruned to what the checks read."""
    meta = obj.get("metadata") or {}
    slim_meta = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if meta.get(k)}
    # Not the last-applied manifest: the largest annotation by far, and read only on other kinds.
    annotations = {k: v for k, v in (slim_meta.get("annotations") or {}).items() if k != _LAST_APPLIED}
    if annotations:
        slim_meta["annotations"] = annotations
    else:
        slim_meta.pop("annotations", None)
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": slim_meta}
    spec = obj.get("spec") or {}
    if kind == "Service":
        out["spec"] = {k: spec[k] for k in ("type", "selector", "ports") if spec.get(k)}
    elif kind.endswith("WebhookConfiguration"):
        out["webhooks"] = obj.get("webhooks") or []
    elif kind == "CustomResourceDefinition":
        versions = [
            {k: v for k, v in version.items() if k not in ("schema", "additionalPrinterColumns")}
            for version in spec.get("versions") or []
        ]
        out["spec"] = {
            **{k: spec[k] for k in ("group", "names", "scope", "conversion") if k in spec},
            "versions": versions,
        }
        status = obj.get("status") or {}
        out["status"] = {k: status[k] for k in ("storedVersions", "acceptedNames") if k in status}
    elif kind == "Certificate":
        out["spec"] = spec
        out["status"] = obj.get("status") or {}
    elif kind == "ConfigMap":
        out["data"] = obj.get("data") or {}
    return out


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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


def _controller(meta: schema.Meta | schema.PodMeta) -> tuple[str, str] | None:
    for ref in meta.owner_references or ():
        if ref.controller:
            return str(ref.kind), str(ref.name)
    return None


def project_node(obj: schema.Node, group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS) -> dict[str, Any]:
    meta, spec, status = obj.metadata, obj.spec, obj.status
    labels = meta.labels or {}
    info = status.node_info or schema.NodeInfo()
    # The label that names the node's group (a plan drafted from the snapshot says which).
    group_label = next((k for k in group_labels if labels.get(k)), "")
    group = labels[group_label] if group_label else ""
    if not group and labels.get("eks.amazonaws.com/compute-type") == "fargate":
        group, group_label = "fargate", "eks.amazonaws.com/compute-type"
    roles = sorted(
        k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k
    )
    conditions = {c.type: c.status for c in status.conditions or ()}
    addresses = {a.type: a.address for a in status.addresses or ()}
    allocatable = status.allocatable or {}
    return {
        "name": meta.name or "",
        "group": group or "(none)",
        "group_label": group_label,
        "roles": roles,
        "zone": labels.get("topology.kubernetes.io/zone", ""),
        "instance_type": labels.get("node.kubernetes.io/instance-type", ""),
        "kubelet": info.kubelet_version,
        "os_image": info.os_image,
        "kernel": info.kernel_version,
        "runtime": info.container_runtime_version,
        "boot_id": info.boot_id,
        "ready": conditions.get("Ready", "Unknown"),
        # Pressure conditions that are True are worth seeing; the rest are noise.
        "problems": sorted(str(t) for t, s in conditions.items() if t != "Ready" and s == "True"),
        "taints": sorted(f"{t.key}={t.value or ''}:{t.effect}" for t in spec.taints or ()),
        "unschedulable": bool(spec.unschedulable),
        "allocatable": {k: allocatable[k] for k in ("cpu", "memory", "pods") if k in allocatable},
        "created": meta.creation_timestamp or "",
        "internal_ip": addresses.get("InternalIP") or "",
        "external_ip": addresses.get("ExternalIP") or "",
        # All of them: a twin gives its nodes those its workloads' selectors and affinities read.
        "labels": dict(sorted(labels.items())),
    }


def project_workload(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """On the workload's raw JSON pruned to `schema.Workload`, which the rollout verdict shares."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
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


#: Volume kinds a twin keeps: the ones the drain checks read (DRAIN002, DRAIN003).
TWIN_VOLUMES = ("emptyDir", "hostPath")


def template_record(spec: Mapping[str, Any], *, env: bool = False) -> dict[str, Any]:
    """What a workload's pods are made from, as much as a twin of the cluster needs to behave as
    it does and to give the checks the same findings: the selector, the pod template's labels and
    annotations (the known-issue rules and the drain checks read them), its containers (names,
    images, requests, whether a readiness probe is set), init containers, placement (node
    selector, affinity, tolerations, scheduler), the volumes the drain checks read and the grace
    period; with `env`, the literal environment values too (kube-system's add-ons, whose settings
    the checks read: the VPC CNI's warm pool). Everything else of the template (other workloads'
    environment, which may hold what should have been a Secret, mounts, probes' details) is left out."""
    template = spec.get("template") or {}
    meta = template.get("metadata") or {}
    pod = template.get("spec") or {}

    def container(c: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.get("name", ""), "image": c.get("image", "")}
        if c.get("resources"):
            out["resources"] = c["resources"]
        if c.get("readinessProbe"):
            out["readiness_probe"] = True
        literal = [
            {"name": e["name"], "value": e["value"]}
            for e in c.get("env") or []
            if "value" in e and "name" in e
        ]
        if env and literal:
            out["env"] = literal
        return out

    record: dict[str, Any] = {
        "selector": spec.get("selector") or {},
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "containers": [container(c) for c in pod.get("containers") or []],
    }
    optional = {
        "init_containers": [container(c) for c in pod.get("initContainers") or []],
        "node_selector": pod.get("nodeSelector") or {},
        "affinity": pod.get("affinity") or {},
        "tolerations": pod.get("tolerations") or [],
        "volumes": [v for v in pod.get("volumes") or [] if any(k in v for k in TWIN_VOLUMES)],
        "termination_grace_period_seconds": pod.get("terminationGracePeriodSeconds"),
        "scheduler_name": pod.get("schedulerName") or "",
    }
    record.update({k: v for k, v in optional.items() if v not in (None, "", [], {})})
    return record


def project_pdb(obj: schema.Pdb) -> dict[str, Any]:
    status = obj.status
    return {
        "namespace": obj.metadata.namespace or "",
        "name": obj.metadata.name or "",
        "disruptions_allowed": int(status.disruptions_allowed or 0),
        "current_healthy": int(status.current_healthy or 0),
        "desired_healthy": int(status.desired_healthy or 0),
        "expected_pods": int(status.expected_pods or 0),
    }


def pod_display_status(obj: schema.Pod) -> tuple[str, list[str]]:
    """The STATUS kubectl shows, and every waiting/terminated reason found (for the diff)."""
    status = obj.status
    reason = status.reason or status.phase or "Unknown"
    reasons: list[str] = []
    inits = status.init_container_statuses
    for i, cs in enumerate(inits or ()):
        state = cs.state or _NO_STATE
        term, wait = state.terminated, state.waiting
        if term and term.exit_code == 0:
            continue
        if term:
            r = term.reason or f"ExitCode:{term.exit_code}"
            reasons.append(r)
            reason = f"Init:{r}"
        elif wait and wait.reason and wait.reason != "PodInitializing":
            reasons.append(wait.reason)
            reason = f"Init:{wait.reason}"
        else:
            reason = f"Init:{i}/{len(inits or ())}"
        break
    else:
        for cs in reversed(status.container_statuses or ()):
            now = cs.state
            if now is not None:
                wait, term = now.waiting, now.terminated
                if wait and wait.reason:
                    reasons.append(wait.reason)
                    reason = wait.reason
                elif term and term.reason:
                    reasons.append(term.reason)
                    reason = term.reason
            last = cs.last_state
            if last is not None and last.terminated and last.terminated.reason in ("Error", "OOMKilled"):
                reasons.append(last.terminated.reason)
    if obj.metadata.deletion_timestamp:
        reason = "Terminating"
    return str(reason), sorted(set(reasons)) if reasons else reasons


_NO_STATE = ContainerState()
#: A container's last termination that `pod_display_status` counts among a pod's reasons.
_LAST_BAD = ("Error", "OOMKilled")


def project_pod(obj: schema.Pod, rs_owner: Mapping[tuple[str, str], tuple[str, str]]) -> tuple[Any, ...]:
    # This runs 150,000 times a snapshot: one pass over each list, no helper calls but the status.
    meta, spec, status = obj.metadata, obj.spec, obj.status
    namespace = meta.namespace or ""
    kind, workload = "Pod", meta.name or ""
    for ref in meta.owner_references or ():
        if ref.controller:  # as `_controller`
            owner = str(ref.kind), str(ref.name)
            kind, workload = rs_owner.get((namespace, owner[1]), owner) if owner[0] == "ReplicaSet" else owner
            break
    statuses = status.container_statuses or ()
    containers = spec.containers or ()
    ready = restarts = 0
    unready: list[str] = []
    if status.init_container_statuses:
        for cs in statuses:
            if cs.ready:
                ready += 1
            else:
                unready.append(f"{cs.name or ''}:{_state_reason(cs)}")
            restarts += cs.restart_count or 0
        display, reasons = pod_display_status(obj)
    else:
        # `pod_display_status` without init containers (nearly every pod), folded into the one pass
        # over the statuses: its STATUS is the first container's (in order) waiting or terminated
        # reason.
        display = ""
        reasons = []
        for cs in statuses:
            state = cs.state
            why = ""
            if state is not None:
                wait, term = state.waiting, state.terminated
                if wait is not None:
                    why = wait.reason or ""
                    if why:
                        reasons.append(why)
                        display = display or why
                    elif term is not None and term.reason:
                        reasons.append(term.reason)
                        display = display or term.reason
                elif term is not None:
                    why = term.reason or ""
                    if why:
                        reasons.append(why)
                        display = display or why
            if cs.ready:
                ready += 1
            else:
                unready.append(f"{cs.name or ''}:{why}")
            restarts += cs.restart_count or 0
            last = cs.last_state
            if last is not None and last.terminated is not None and last.terminated.reason in _LAST_BAD:
                reasons.append(last.terminated.reason)
        if meta.deletion_timestamp:
            display = "Terminating"
        elif not display:
            display = status.reason or status.phase or "Unknown"
        if reasons:
            reasons = sorted(set(reasons))
    # In POD_FIELDS order, built at once. Nothing is interned: rows are made in the pod list's helper
    # process and leave it as JSON at once (interning cost a tenth of the projection, for nothing).
    return (
        namespace,
        meta.name or "",
        meta.uid or "",
        kind or "",
        workload or "",
        spec.node_name or "",
        status.phase or "",
        display,
        ready,
        len(containers) or len(statuses),
        restarts,
        ",".join(reasons) if reasons else "",
        ",".join([c.image or "" for c in containers]),
        status.pod_ip or "",
        meta.creation_timestamp or "",
        ",".join([c.name or "" for c in containers]),
        ",".join([f"{c.name or ''}={c.image or ''}" for c in spec.init_containers or ()]),
        ",".join(unready),
        ",".join(
            [
                f"{v.name or ''}:{'emptyDir' if v.empty_dir is not None else 'hostPath'}"
                for v in spec.volumes or ()
                if v.empty_dir is not None or v.host_path is not None
            ]
        ),
    )


def _state_reason(cs: schema.ContainerStatus) -> str:
    """Why a container is not ready, as its state says (empty: running, just not ready)."""
    state = cs.state
    if state is None:
        return ""
    if state.waiting is not None:
        return state.waiting.reason or ""
    if state.terminated is not None:
        return state.terminated.reason or ""
    return ""


def project_event(obj: schema.Event, cutoff: datetime) -> dict[str, Any] | None:
    if obj.type != "Warning":
        return None
    when = obj.last_timestamp or obj.event_time or obj.metadata.creation_timestamp
    moment = _parse_time(when)
    if moment is not None and moment < cutoff:
        return None
    involved = obj.involved_object or InvolvedObject()
    return {
        "namespace": involved.namespace or obj.metadata.namespace or "",
        "kind": involved.kind or "",
        "name": involved.name or "",
        "reason": obj.reason or "",
        "message": (obj.message or "")[:500],
        "count": int(obj.count or 1),
        "last": when or "",
    }


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def to_json(snap: Mapping[str, Any]) -> bytes:
    """The snapshot as compact JSON, as `json.dumps(separators=(",", ":"))` writes it but in UTF-8.

    msgspec's encoder is about ten times faster. Either is one C call that holds the interpreter
    lock throughout, and at 150,000 pods json.dumps held it for half a second: a Slack ack that
    arrived meanwhile waited as long.
    """
    return msgspec.json.encode(snap)


def pods_as_dicts(snap: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    fields = snap.get("pod_fields") or POD_FIELDS
    for row in snap.get("pods") or []:
        yield dict(zip(fields, row, strict=False))
