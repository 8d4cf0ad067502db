"""Workload controllers: Deployments, ReplicaSets, DaemonSets and StatefulSets.

They follow the real controllers' rules closely enough that `kubectl rollout status` reads the
same story: a Deployment rolls with maxSurge/maxUnavailable (surge rounded up, unavailability
down, never both zero), scales old ReplicaSets down only as far as availability allows, and
reports updated/ready/available/unavailable replicas plus Available and Progressing conditions
(including ProgressDeadlineExceeded). A DaemonSet keeps one pod per eligible node, tolerating
cordons and node trouble, and rolls node by node within maxUnavailable. A StatefulSet creates
ordinals in order, each only once its predecessor is Ready, and updates them from the highest
ordinal down, respecting a partition.
"""

from __future__ import annotations

import abc
import copy
import heapq
from collections.abc import Callable
from typing import Any

from bot.sim.apiserver.api import DeleteOptions
from bot.sim.apiserver.clock import parse_time, rfc3339
from bot.sim.apiserver.objects import (
    PodView,
    int_or_percent,
    owner_ref,
    pod_available,
    pod_ready,
    pod_terminating,
    set_condition,
    template_hash,
    tolerates,
)
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.apiserver.store import DELETED, Entry, Record
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder
from bot.sim.controllers.scheduler import _node_selector_terms_match

Obj = dict[str, Any]
Key = tuple[str, str]

PODS = KINDS_BY_KEY["pods"]
RS = KINDS_BY_KEY["replicasets.apps"]
DEPLOY = KINDS_BY_KEY["deployments.apps"]
DS = KINDS_BY_KEY["daemonsets.apps"]
STS = KINDS_BY_KEY["statefulsets.apps"]
REVISIONS = KINDS_BY_KEY["controllerrevisions.apps"]
PVC = KINDS_BY_KEY["persistentvolumeclaims"]

REVISION = "deployment.kubernetes.io/revision"

#: Tolerations the DaemonSet controller adds to its pods, so they run on cordoned and troubled nodes.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def _owned(engine: Engine, owner_uid: str, kind_key: str) -> list[Entry]:
    return [e for e in engine.store.dependents_of(owner_uid, kind_key) if e.controller == owner_uid]


def _owner_keys(record: Record, kind: str) -> list[Key]:
    """(namespace, name) of the controller of kind `kind` for a changed object (old and new owner)."""
    out = []
    for entry in (record.entry, record.prev):
        if entry is None or not entry.controller:
            continue
        if entry.kind.key == PODS.key:
            ref = entry.pod().controller  # decoded once per pod version
            if ref is not None and ref[0] == kind:
                out.append((entry.namespace, ref[1]))
            continue
        for ref_kind, ref_name in entry.memo("controllers", _controller_refs):
            if ref_kind == kind:
                out.append((entry.namespace, ref_name))
    return out


def _controller_refs(obj: Obj) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(ref.get("kind")), str(ref.get("name")))
        for ref in obj["metadata"].get("ownerReferences") or []
        if ref.get("controller")
    )


def _template_without_hash(template: Obj, label: str) -> Obj:
    t = copy.deepcopy(template)
    labels = (t.get("metadata") or {}).get("labels") or {}
    labels.pop(label, None)
    return t


def _rank_for_deletion(pod: PodView) -> tuple[int, int, int, int, float]:
    """Lower sorts first: the pods a controller removes first when scaling down."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod.phase, 0)
    return (1 if pod.node_name else 0, phase_rank, 1 if pod.ready else 0, -pod.restarts, -pod.created)


def _st(obj: Obj, field: str) -> int:
    return int((obj.get("status") or {}).get(field, 0))


def pod_from_template(
    owner: Obj,
    api_version: str,
    kind: str,
    template: Obj,
    *,
    name: str = "",
    generate: str = "",
    extra_labels: dict[str, str] | None = None,
) -> Obj:
    """The pod a workload controller asks the API server for (before defaulting and admission):
    the template's labels (plus `extra_labels`) and annotations, a controller reference to `owner`."""
    tm = template.get("metadata") or {}
    meta: Obj = {}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate
    meta["namespace"] = owner["metadata"].get("namespace", "")
    meta["labels"] = {**(tm.get("labels") or {}), **(extra_labels or {})}
    if tm.get("annotations"):
        meta["annotations"] = dict(tm["annotations"])
    meta["ownerReferences"] = [owner_ref(owner, api_version, kind)]
    return {"metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def rolling_bounds(spec: Obj, replicas: int) -> tuple[bool, int, int]:
    """(rolling, surge, unavailable) of a Deployment spec: maxSurge rounded up, maxUnavailable
    down, never both zero."""
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
    ru = strategy.get("rollingUpdate") or {}
    surge = int_or_percent(ru.get("maxSurge", "25%"), replicas, round_up=True) if rolling else 0
    unavailable = int_or_percent(ru.get("maxUnavailable", "25%"), replicas, round_up=False) if rolling else 0
    if rolling and surge == 0 and unavailable == 0:
        unavailable = 1
    return rolling, surge, unavailable


def new_replica_set(d: Obj, pod_hash: str, revision: int, replicas: int, surge: int) -> Obj:
    """The ReplicaSet the Deployment controller creates for `d`'s current template (`replicas` to
    start with): named and labelled by the template's hash, owned by the Deployment."""
    spec = d["spec"]
    template = spec.get("template") or {}
    d_replicas = int(spec.get("replicas", 1))
    labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": pod_hash}
    rs_template = copy.deepcopy(template)
    rs_template.setdefault("metadata", {})["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
    rs: Obj = {
        "metadata": {
            "name": f"{d['metadata']['name']}-{pod_hash}",
            "namespace": d["metadata"]["namespace"],
            "labels": labels,
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": str(d_replicas),
                "deployment.kubernetes.io/max-replicas": str(d_replicas + surge),
                REVISION: str(revision),
            },
            "ownerReferences": [owner_ref(d, "apps/v1", "Deployment")],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": int(spec.get("minReadySeconds", 0)),
            "selector": selector,
            "template": rs_template,
        },
    }
    if not rs["spec"]["minReadySeconds"]:
        del rs["spec"]["minReadySeconds"]
    return rs


class _Base(abc.ABC):
    """A controller: reacts to changes of the objects it watches and syncs one object at a time."""

    name = ""

    #: Whether the engine may coalesce this controller's syncs within one simulated instant.
    coalesce = False

    def __init__(self, engine: Engine, events: Recorder) -> None:
        self.engine = engine
        self.api = engine.api
        self.events = events
        engine.add(self, coalesce=self.coalesce)

    @abc.abstractmethod
    def on_change(self, record: Record) -> None: ...

    @abc.abstractmethod
    def sync(self, key: Key) -> None: ...

    def _recheck(self, key: Key, delay: float) -> None:
        self.engine.after(delay, lambda: self.engine.enqueue(self.name, key), key=(self.name, key, "recheck"))

    def _live(self, kind_key: str, key: Key) -> tuple[Entry, Obj] | None:
        """The object to sync and its entry, or None when it is gone or being deleted."""
        entry = self.api.store.entry(kind_key, *key)
        if entry is None:
            return None
        obj = entry.obj()
        if obj["metadata"].get("deletionTimestamp"):
            return None
        return entry, obj

    def _write_status(self, kind_key: str, key: Key, status: Obj) -> None:
        """`status` written on the object as the store holds it now (gone meanwhile: nothing)."""
        fresh = self.api.store.entry(kind_key, *key)
        if fresh is not None:
            obj = fresh.obj()
            obj["status"] = status
            self.api.write(kind_key, obj, status=True)

    def _create_pod(self, owner: Obj, kind: str, pod: Obj) -> None:
        """Create `pod` (`pod_from_template`'s) for `owner`, with the controller's event."""
        created = self.api.create(PODS, pod["metadata"]["namespace"], pod)
        self.events.emit(
            owner,
            kind,
            "Normal",
            "SuccessfulCreate",
            f"Created pod: {created.name}",
            component=f"{kind.lower()}-controller" if kind != "ReplicaSet" else "replicaset-controller",
        )

    def _delete_pod(self, owner: Obj, kind: str, pod: Obj) -> None:
        m = pod["metadata"]
        self._delete_named(owner, kind, m.get("namespace", ""), m["name"])

    def _delete_named(self, owner: Obj, kind: str, namespace: str, name: str) -> None:
        self.api.delete(PODS, namespace, name, DeleteOptions())
        self.events.emit(
            owner,
            kind,
            "Normal",
            "SuccessfulDelete",
            f"Deleted pod: {name}",
            component=f"{kind.lower()}-controller",
        )


class _Owning(_Base):
    """A controller of objects that own others (a ReplicaSet its pods, a Deployment its ReplicaSets):
    it syncs an object when it changes, and when anything it controls changes."""

    own = ""  # the key of the kind it syncs
    owned = ""  # the key of the kind those own
    owner_kind = ""  # the kind named in the owned objects' controller reference

    def sync(self, key: Key) -> None:
        found = self._live(self.own, key)
        if found is not None:
            self.sync_live(key, *found)

    @abc.abstractmethod
    def sync_live(self, key: Key, entry: Entry, obj: Obj) -> None:
        """Sync the object at `key`, there and not being deleted (`obj`, its `entry`)."""

    def on_change(self, record: Record) -> None:
        kind = record.entry.kind.key
        if kind == self.own:
            self.engine.enqueue(self.name, record.entry.key)
        elif kind == self.owned:
            for key in _owner_keys(record, self.owner_kind):
                self.engine.enqueue(self.name, key)


# ---- ReplicaSets -------------------------------------------------------------------------------


class ReplicaSets(_Owning):
    name = "replicaset"
    own, owned, owner_kind = RS.key, PODS.key, "ReplicaSet"

    def sync_live(self, key: Key, entry: Entry, rs: Obj) -> None:
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        min_ready = int(spec.get("minReadySeconds", 0))
        pods = _owned(self.engine, entry.uid, PODS.key)
        active = [p for p in pods if p.pod().active]
        diff = len(active) - want
        if diff < 0:
            template = spec.get("template") or {}
            for _ in range(-diff):
                pod = pod_from_template(rs, "apps/v1", "ReplicaSet", template, generate=f"{key[1]}-")
                self._create_pod(rs, "ReplicaSet", pod)
        elif diff > 0:
            for p in sorted(active, key=lambda e: _rank_for_deletion(e.pod()))[:diff]:
                self._delete_named(rs, "ReplicaSet", p.namespace, p.name)
        pods = _owned(self.engine, entry.uid, PODS.key)
        active = [p for p in pods if p.pod().active]
        now = self.engine.clock.now()
        ready = sum(1 for p in active if p.pod().ready)
        available = sum(1 for p in active if p.pod().available(min_ready, now))
        if available < ready and min_ready:
            self._recheck(key, float(min_ready))
        status: Obj = {"replicas": len(active)}
        selector_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        labelled = sum(1 for p in active if all(p.labels.get(k) == v for k, v in selector_labels.items()))
        if labelled:
            status["fullyLabeledReplicas"] = labelled
        if ready:
            status["readyReplicas"] = ready
        if available:
            status["availableReplicas"] = available
        status["observedGeneration"] = rs["metadata"].get("generation", 1)
        status["terminatingReplicas"] = sum(1 for p in pods if p.pod().deleting)
        self._write_status(RS.key, key, status)


# ---- Deployments -------------------------------------------------------------------------------


class Deployments(_Owning):
    name = "deployment"
    own, owned, owner_kind = DEPLOY.key, RS.key, "Deployment"

    def _scale(self, d: Obj, rs: Obj, replicas: int, max_surge: int) -> None:
        if int((rs.get("spec") or {}).get("replicas", 0)) == replicas:
            return
        before = int((rs.get("spec") or {}).get("replicas", 0))
        rs["spec"]["replicas"] = replicas
        ann = rs["metadata"].setdefault("annotations", {})
        d_replicas = int(d["spec"].get("replicas", 1))
        ann["deployment.kubernetes.io/desired-replicas"] = str(d_replicas)
        ann["deployment.kubernetes.io/max-replicas"] = str(d_replicas + max_surge)
        self.api.write(RS.key, rs)
        direction = "up" if replicas > before else "down"
        self.events.emit(
            d,
            "Deployment",
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {replicas}",
            component="deployment-controller",
        )

    def sync_live(self, key: Key, entry: Entry, d: Obj) -> None:
        spec = d["spec"]
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        pod_hash = template_hash(template)
        rses = [e.obj() for e in _owned(self.engine, entry.uid, RS.key)]
        new_rs = next(
            (
                r
                for r in rses
                if _template_without_hash(r["spec"].get("template") or {}, "pod-template-hash") == template
            ),
            None,
        )
        olds = [r for r in rses if r is not new_rs]
        rolling, surge, unavailable = rolling_bounds(spec, replicas)
        created_now = False
        paused = bool(spec.get("paused"))
        if new_rs is None and not paused:
            revision = 1 + max(
                [int((r["metadata"].get("annotations") or {}).get(REVISION, "0")) for r in rses] or [0]
            )
            start = 0 if (olds or not rolling) else replicas
            if rolling and olds:
                total = sum(int(r["spec"].get("replicas", 0)) for r in olds)
                start = max(0, min(replicas + surge - total, replicas))
            new_obj = new_replica_set(d, pod_hash, revision, start, surge)
            created = self.api.create(RS, key[0], new_obj)
            new_rs = created.obj()
            created_now = True
            self.events.emit(
                d,
                "Deployment",
                "Normal",
                "ScalingReplicaSet",
                f"Scaled up replica set {created.name} from 0 to {start}",
                component="deployment-controller",
            )
        if new_rs is not None and not paused:
            revision = (new_rs["metadata"].get("annotations") or {}).get(REVISION, "1")
            older = [int((r["metadata"].get("annotations") or {}).get(REVISION, "0")) for r in olds]
            if older and int(revision) < max(older):
                # Rolled back to an old template: that ReplicaSet becomes the newest revision.
                new_rs["metadata"].setdefault("annotations", {})[REVISION] = str(max(older) + 1)
                self.api.write(RS.key, new_rs)
                fresh_rs = self.api.store.get(RS.key, key[0], new_rs["metadata"]["name"])
                assert fresh_rs is not None
                new_rs = fresh_rs
            if rolling:
                self._roll(d, new_rs, olds, replicas, surge, unavailable)
            else:
                self._recreate(d, new_rs, olds, replicas)
            self._cleanup(d, olds)
        self._status(key, new_rs, created_now, replicas, unavailable)

    def _roll(
        self, d: Obj, new_rs: Obj, olds: list[Obj], replicas: int, surge: int, unavailable: int
    ) -> None:
        all_rs = [new_rs, *olds]
        new_spec = int(new_rs["spec"].get("replicas", 0))
        if new_spec > replicas:
            self._scale(d, new_rs, replicas, surge)
        elif new_spec < replicas:
            total = sum(int(r["spec"].get("replicas", 0)) for r in all_rs)
            up = min(replicas + surge - total, replicas - new_spec)
            if up > 0:
                self._scale(d, new_rs, new_spec + up, surge)
        old_total = sum(int(r["spec"].get("replicas", 0)) for r in olds)
        if old_total == 0:
            return
        all_pods = sum(int(r["spec"].get("replicas", 0)) for r in [new_rs, *olds])
        min_available = replicas - unavailable
        new_unavailable = int(new_rs["spec"].get("replicas", 0)) - int(
            (new_rs.get("status") or {}).get("availableReplicas", 0)
        )
        max_down = all_pods - min_available - new_unavailable
        if max_down <= 0:
            return
        olds_sorted = sorted(olds, key=lambda r: parse_time(r["metadata"].get("creationTimestamp")) or 0.0)
        # First drop old pods that are not available anyway: that costs no availability.
        cleaned = 0
        for r in olds_sorted:
            if cleaned >= max_down:
                break
            have = int(r["spec"].get("replicas", 0))
            unhealthy = have - int((r.get("status") or {}).get("availableReplicas", 0))
            if have == 0 or unhealthy <= 0:
                continue
            down = min(unhealthy, max_down - cleaned)
            self._scale(d, r, have - down, surge)
            cleaned += down
        available = sum(int((r.get("status") or {}).get("availableReplicas", 0)) for r in [new_rs, *olds])
        total_down = min(available - min_available, max_down - cleaned)
        for r in olds_sorted:
            if total_down <= 0:
                break
            have = int(r["spec"].get("replicas", 0))
            if have == 0:
                continue
            down = min(have, total_down)
            self._scale(d, r, have - down, surge)
            total_down -= down

    def _recreate(self, d: Obj, new_rs: Obj, olds: list[Obj], replicas: int) -> None:
        for r in olds:
            if int(r["spec"].get("replicas", 0)):
                self._scale(d, r, 0, 0)
        if any(_owned(self.engine, r["metadata"]["uid"], PODS.key) for r in olds):
            return
        self._scale(d, new_rs, replicas, 0)

    def _cleanup(self, d: Obj, olds: list[Obj]) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        idle = [
            r
            for r in olds
            if not int(r["spec"].get("replicas", 0)) and not int((r.get("status") or {}).get("replicas", 0))
        ]
        idle.sort(key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, "0")))
        for r in idle[: max(0, len(idle) - limit)]:
            self.api.delete(RS, r["metadata"]["namespace"], r["metadata"]["name"], DeleteOptions())

    def _status(
        self, key: Key, new_rs: Obj | None, created_now: bool, replicas: int, unavailable: int
    ) -> None:
        entry = self.api.store.entry(DEPLOY.key, *key)
        if entry is None:
            return
        d = entry.obj()
        rses = [e.obj() for e in _owned(self.engine, entry.uid, RS.key)]
        total = sum(_st(r, "replicas") for r in rses)
        updated = _st(new_rs, "replicas") if new_rs is not None else 0
        ready = sum(_st(r, "readyReplicas") for r in rses)
        available = sum(_st(r, "availableReplicas") for r in rses)
        terminating = sum(_st(r, "terminatingReplicas") for r in rses)
        old = d.get("status") or {}
        now = self.engine.clock.now()
        status: Obj = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
        }
        if ready:
            status["readyReplicas"] = ready
        if available:
            status["availableReplicas"] = available
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        status["terminatingReplicas"] = terminating
        status["conditions"] = copy.deepcopy(old.get("conditions") or [])
        ok = available >= replicas - unavailable
        set_condition(
            status,
            {
                "type": "Available",
                "status": "True" if ok else "False",
                "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if ok
                else "Deployment does not have minimum availability.",
            },
            now,
            update_time=True,
        )
        rs_name = new_rs["metadata"]["name"] if new_rs else ""
        complete = new_rs is not None and updated == replicas and total == updated and available >= replicas
        progressed = any(
            old.get(f, 0) != status.get(f, 0)
            for f in ("updatedReplicas", "readyReplicas", "availableReplicas", "replicas")
        )
        deadline = int(d["spec"].get("progressDeadlineSeconds", 600))
        prog = next((c for c in old.get("conditions") or [] if c.get("type") == "Progressing"), None)
        if d["spec"].get("paused"):
            cond = {
                "type": "Progressing",
                "status": "Unknown",
                "reason": "DeploymentPaused",
                "message": "Deployment is paused",
            }
        elif complete:
            cond = {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable",
                "message": f'ReplicaSet "{rs_name}" has successfully progressed.',
            }
        elif created_now:
            cond = {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetCreated",
                "message": f'Created new replica set "{rs_name}"',
            }
        elif (
            progressed or prog is None or prog.get("reason") in ("NewReplicaSetAvailable", "DeploymentPaused")
        ):
            cond = {
                "type": "Progressing",
                "status": "True",
                "reason": "ReplicaSetUpdated",
                "message": f'ReplicaSet "{rs_name}" is progressing.',
            }
        else:
            since = parse_time(prog.get("lastUpdateTime")) or now
            if prog.get("reason") == "ProgressDeadlineExceeded" or now - since >= deadline:
                cond = {
                    "type": "Progressing",
                    "status": "False",
                    "reason": "ProgressDeadlineExceeded",
                    "message": f'ReplicaSet "{rs_name}" has timed out progressing.',
                }
            else:
                cond = dict(prog)
                self._recheck(key, deadline - (now - since) + 0.5)
        if cond.get("reason") in ("ReplicaSetUpdated", "NewReplicaSetCreated") and not complete:
            self._recheck(key, deadline + 0.5)
        # lastUpdateTime moves whenever the rollout makes progress (that is what the deadline measures).
        set_condition(status, cond, now, update_time=True)
        if progressed or created_now:
            for c in status["conditions"]:
                if c["type"] == "Progressing":
                    c["lastUpdateTime"] = rfc3339(now)
        if new_rs is not None:
            rev = (new_rs["metadata"].get("annotations") or {}).get(REVISION)
            if rev and (d["metadata"].get("annotations") or {}).get(REVISION) != rev:
                d["metadata"].setdefault("annotations", {})[REVISION] = rev
                entry = self.api.write(DEPLOY.key, d)
                d = entry.obj()
        d["status"] = status
        self.api.write(DEPLOY.key, d, status=True)


# ---- DaemonSets --------------------------------------------------------------------------------


def daemon_tolerations(template_spec: Obj) -> list[Obj]:
    tolerations = list(template_spec.get("tolerations") or [])
    for t in DAEMON_TOLERATIONS:
        if t not in tolerations:
            tolerations.append(dict(t))
    return tolerations


class _DaemonSetIndex:
    """One DaemonSet's pods by node, and what each node contributes to a sync's decisions and to
    the status, kept up to date from store changes: a change to one pod or node costs that node.

    Built from the store on the set's first sync and again whenever what the per-node answers
    depend on changes (the set's uid, its template hash, minReadySeconds). Nodes whose pods or
    eligibility changed are `dirty` and re-classified at the next sync; nodes with a pod that is
    Ready but not yet available (minReadySeconds) are `waiting`, re-classified at every sync,
    since time alone changes their answer.
    """

    def __init__(self, uid: str, template_hash_: str, min_ready: int, tspec: Obj) -> None:
        self.uid = uid
        self.hash = template_hash_
        self.min_ready = min_ready
        self.tspec = tspec
        #: daemon node → this set's pods for it; pod key → the node it is filed under.
        self.pods: dict[str, dict[Key, Entry]] = {}
        self.node_of: dict[Key, str] = {}
        #: node → (node resourceVersion, eligible) for every node judged; the eligible ones.
        self.judged: dict[str, tuple[int, bool]] = {}
        self.eligible: set[str] = set()
        self.to_judge: set[str] = set()
        self.dirty: set[str] = set()
        self.waiting: set[str] = set()
        #: eligible node → (has an active pod, ready, available, updated, unavailable), and their sums.
        self.counts: dict[str, tuple[int, int, int, int, int]] = {}
        self.sums = [0, 0, 0, 0, 0]
        #: Eligible nodes needing a pod; their first active pod when it is old and unavailable,
        #: or old and available; ineligible nodes → their active pods (in key order).
        self.create: set[str] = set()
        self.old_unavailable: dict[str, Entry] = {}
        self.old_available: dict[str, Entry] = {}
        self.misscheduled: dict[str, list[Entry]] = {}

    def add_pod(self, entry: Entry) -> None:
        node = entry.pod().daemon_node
        self.node_of[entry.key] = node
        self.pods.setdefault(node, {})[entry.key] = entry
        self.dirty.add(node)

    def remove_pod(self, key: Key) -> None:
        node = self.node_of.pop(key, None)
        if node is None:
            return
        here = self.pods[node]
        del here[key]
        if not here:
            del self.pods[node]
        self.dirty.add(node)

    def judge(self, name: str, node: Entry | None, decode: Callable[[Entry], Obj]) -> None:
        if node is None:
            self.judged.pop(name, None)
            self.eligible.discard(name)
        else:
            known = self.judged.get(name)
            if known is None or known[0] != node.rv:
                known = (node.rv, daemon_eligible(self.tspec, decode(node)))
                self.judged[name] = known
            if known[1]:
                self.eligible.add(name)
            else:
                self.eligible.discard(name)
        self.dirty.add(name)

    def classify(self, node: str, now: float) -> None:
        """Recompute `node`'s answers from its pods (the old full sync's per-node step)."""
        old = self.counts.pop(node, None)
        if old is not None:
            for i, v in enumerate(old):
                self.sums[i] -= v
        self.create.discard(node)
        self.old_unavailable.pop(node, None)
        self.old_available.pop(node, None)
        self.misscheduled.pop(node, None)
        self.waiting.discard(node)
        here = self.pods.get(node)
        entries = [here[k] for k in sorted(here)] if here else []
        active = [e for e in entries if e.pod().active]
        if node not in self.eligible:
            if active:
                self.misscheduled[node] = active
            return
        if not active and not any(e.pod().deleting for e in entries):
            self.create.add(node)
        ready = available = updated = 0
        for e in active:
            view = e.pod()
            ok = view.available(self.min_ready, now)
            ready += view.ready
            available += ok
            updated += e.labels.get("controller-revision-hash") == self.hash
            if view.ready and not ok:
                self.waiting.add(node)
        unavailable = 1
        if active:
            first = active[0]
            is_old = first.labels.get("controller-revision-hash") != self.hash
            if not first.pod().available(self.min_ready, now):
                if is_old:
                    self.old_unavailable[node] = first
            else:
                unavailable = 0
                if is_old:
                    self.old_available[node] = first
        counts = (1 if active else 0, ready, available, updated, unavailable)
        self.counts[node] = counts
        for i, v in enumerate(counts):
            self.sums[i] += v

    def refresh(
        self, now: float, nodes: Callable[[str], Entry | None], decode: Callable[[Entry], Obj]
    ) -> None:
        """Judge the nodes that changed, then re-classify the dirty and waiting ones."""
        if self.to_judge:
            for name in self.to_judge:
                self.judge(name, nodes(name), decode)
            self.to_judge = set()
        todo = self.dirty | self.waiting
        self.dirty = set()
        for node in todo:
            self.classify(node, now)


def daemon_eligible(spec: Obj, node: Obj) -> bool:
    """Whether a DaemonSet with pod template spec `spec` runs a pod on `node`."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    if not _node_selector_terms_match(spec.get("affinity") or {}, node):
        return False
    tolerations = daemon_tolerations(spec)
    taints = [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
    ]
    return all(tolerates(tolerations, t) for t in taints)


class DaemonSets(_Base):
    name = "daemonset"
    # A sync costs the nodes that changed since the last one (see _DaemonSetIndex); when a thousand
    # nodes turn Ready at the same instant, it still runs once for all of them, writing one status.
    coalesce = True

    def __init__(self, engine: Engine, events: Recorder) -> None:
        super().__init__(engine, events)
        #: DaemonSet key → its index; and by uid, to file pod changes under their controller.
        self._by_key: dict[Key, _DaemonSetIndex] = {}
        self._by_uid: dict[str, _DaemonSetIndex] = {}
        #: node name → (resourceVersion, decoded node), for the nodes whose eligibility was judged.
        self._nodes: dict[str, tuple[int, Obj]] = {}

    def on_change(self, record: Record) -> None:
        kind = record.entry.kind.key
        if kind == DS.key:
            self.engine.enqueue(self.name, record.entry.key)
        elif kind == PODS.key:
            prev = record.prev
            if prev is not None and prev.controller:
                ix = self._by_uid.get(prev.controller)
                if ix is not None:
                    ix.remove_pod(prev.key)
            if record.type != DELETED and record.entry.controller:
                ix = self._by_uid.get(record.entry.controller)
                if ix is not None:
                    ix.add_pod(record.entry)
            for key in _owner_keys(record, "DaemonSet"):
                self.engine.enqueue(self.name, key)
        elif kind == "nodes" and not record.heartbeat_only:
            name = record.entry.name
            if record.type == DELETED:
                self._nodes.pop(name, None)
            changed = (
                record.prev is None or record.type == DELETED or record.prev.labels != record.entry.labels
            )
            if changed or b'"taints"' in record.entry.raw or (record.prev and b'"taints"' in record.prev.raw):
                # Only then can a node's eligibility change (labels, name, taints).
                for ix in self._by_uid.values():
                    ix.to_judge.add(name)
                for e in self.api.store.entries(DS.key):
                    self.engine.enqueue(self.name, e.key)

    def _node_entry(self, name: str) -> Entry | None:
        return self.api.store.entry("nodes", "", name)

    def _node(self, e: Entry) -> Obj:
        cached = self._nodes.get(e.name)
        if cached is None or cached[0] != e.rv:
            cached = (e.rv, e.obj())
            self._nodes[e.name] = cached
        return cached[1]

    def index(self, key: Key) -> _DaemonSetIndex | None:
        """The kept index of DaemonSet `key` (None before its first sync)."""
        return self._by_key.get(key)

    def _build(self, uid: str, hash_: str, min_ready: int, tspec: Obj) -> _DaemonSetIndex:
        """A cold start: every node judged, every pod of the set filed (O(nodes + pods), once)."""
        ix = _DaemonSetIndex(uid, hash_, min_ready, tspec)
        for e in self.api.store.entries("nodes"):
            ix.judge(e.name, e, self._node)
        for p in _owned(self.engine, uid, PODS.key):
            ix.add_pod(p)
        return ix

    def sync(self, key: Key) -> None:
        entry = self.api.store.entry(DS.key, *key)
        if entry is None:
            gone = self._by_key.pop(key, None)
            if gone is not None:
                self._by_uid.pop(gone.uid, None)
            return
        ds = entry.obj()
        if ds["metadata"].get("deletionTimestamp"):
            return
        spec = ds["spec"]
        template = spec.get("template") or {}
        tspec = template.get("spec") or {}
        generation = ds["metadata"].get("generation", 1)
        current_hash = template_hash(template)
        if (ds["metadata"].get("annotations") or {}).get("deprecated.daemonset.template.generation") != str(
            generation
        ):
            ds["metadata"].setdefault("annotations", {})["deprecated.daemonset.template.generation"] = str(
                generation
            )
            self.api.write(DS.key, ds)
        min_ready = int(spec.get("minReadySeconds", 0))
        ix = self._by_key.get(key)
        if ix is None or ix.uid != entry.uid or ix.hash != current_hash or ix.min_ready != min_ready:
            if ix is not None:
                self._by_uid.pop(ix.uid, None)
            ix = self._build(entry.uid, current_hash, min_ready, tspec)
            self._by_key[key] = ix
            self._by_uid[entry.uid] = ix
        now = self.engine.clock.now()
        ix.refresh(now, self._node_entry, self._node)
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        # The decisions come from this snapshot of the index; the writes then happen in the
        # controller's order: creations in node order, misscheduled deletions (nodes in the order
        # of their first pod's key), then the rolling update's deletions (the unavailable old pods
        # in node order, then old available ones within maxUnavailable).
        create = sorted(ix.create)
        misscheduled = [ix.misscheduled[n] for n in sorted(ix.misscheduled, key=lambda n: min(ix.pods[n]))]
        delete_unavailable: list[Entry] = []
        old_available: list[Entry] = []
        unavailable = max_unavailable = 0
        if rolling:
            desired = len(ix.eligible)
            max_unavailable = int_or_percent(
                (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1), desired, round_up=True
            )
            max_unavailable = max(max_unavailable, 1)
            unavailable = ix.sums[4]
            delete_unavailable = [ix.old_unavailable[n] for n in sorted(ix.old_unavailable)]
            if max_unavailable > unavailable and ix.old_available:
                old_available = [
                    ix.old_available[n]
                    for n in heapq.nsmallest(max_unavailable - unavailable, ix.old_available)
                ]
        for name in create:
            pod = pod_from_template(
                ds,
                "apps/v1",
                "DaemonSet",
                template,
                generate=f"{key[1]}-",
                extra_labels={
                    "controller-revision-hash": current_hash,
                    "pod-template-generation": str(generation),
                },
            )
            pin_to_node(pod, name, tspec)
            self._create_pod(ds, "DaemonSet", pod)
        for active in misscheduled:
            for p in active:
                self._delete_named(ds, "DaemonSet", p.namespace, p.name)
        for p in delete_unavailable:
            self._delete_named(ds, "DaemonSet", p.namespace, p.name)
        for p in old_available:
            if unavailable >= max_unavailable:
                break
            self._delete_named(ds, "DaemonSet", p.namespace, p.name)
            unavailable += 1
        ix.refresh(now, self._node_entry, self._node)  # the nodes this sync's own writes touched
        scheduled, ready, available, updated, _ = ix.sums
        desired = len(ix.eligible)
        status: Obj = {
            "currentNumberScheduled": scheduled,
            "numberMisscheduled": len(ix.misscheduled),
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "observedGeneration": generation,
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
        }
        if desired - available > 0:
            status["numberUnavailable"] = desired - available
        if not available:
            del status["numberAvailable"]
        self._write_status(DS.key, key, status)


def pin_to_node(pod: Obj, node: str, template_spec: Obj) -> None:
    """A DaemonSet pod's own tolerations and its node affinity to the one node it is for."""
    spec = pod["spec"]
    spec["tolerations"] = daemon_tolerations(template_spec)
    spec.setdefault("affinity", {})["nodeAffinity"] = node_affinity(node)


def node_affinity(node: str) -> Obj:
    """The required node affinity that pins a pod to `node` by name (a DaemonSet pod's)."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    }


# ---- StatefulSets ------------------------------------------------------------------------------


def revision_name(sts: Obj, template: Obj) -> str:
    """The ControllerRevision (and pods' controller-revision-hash) of a StatefulSet's template."""
    return f"{sts['metadata']['name']}-{template_hash(template)}"


class StatefulSets(_Owning):
    name = "statefulset"
    own, owned, owner_kind = STS.key, PODS.key, "StatefulSet"

    def _revision(self, sts: Obj, template: Obj) -> str:
        name = revision_name(sts, template)
        ns = sts["metadata"]["namespace"]
        if self.api.store.entry(REVISIONS.key, ns, name) is None:
            existing = [e.obj() for e in _owned(self.engine, sts["metadata"]["uid"], REVISIONS.key)]
            number = 1 + max([int(r.get("revision", 0)) for r in existing] or [0])
            self.api.create(
                REVISIONS,
                ns,
                {
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                        "ownerReferences": [owner_ref(sts, "apps/v1", "StatefulSet")],
                    },
                    "data": {"spec": {"template": {**copy.deepcopy(template), "$patch": "replace"}}},
                    "revision": number,
                },
            )
        return name

    def _template_of(self, ns: str, revision: str) -> Obj | None:
        rev = self.api.store.get(REVISIONS.key, ns, revision)
        if rev is None:
            return None
        template = copy.deepcopy(((rev.get("data") or {}).get("spec") or {}).get("template") or {})
        template.pop("$patch", None)
        return template

    def sync_live(self, key: Key, entry: Entry, sts: Obj) -> None:
        spec = sts["spec"]
        ns, name = key
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        update_rev = self._revision(sts, template)
        old_status = sts.get("status") or {}
        current_rev = old_status.get("currentRevision") or update_rev
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0)) if rolling else 0
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods = {e.name: e.obj() for e in _owned(self.engine, entry.uid, PODS.key)}

        def ordinal_pod(i: int) -> Obj | None:
            return pods.get(f"{name}-{i}")

        def revision_of(p: Obj) -> str:
            return str((p["metadata"].get("labels") or {}).get("controller-revision-hash", ""))

        acted = False
        for i in range(replicas):
            p = ordinal_pod(i)
            if p is None:
                # Below the partition, ordinals are (re)created at the current revision.
                rev = update_rev if (not rolling or i >= partition) else current_rev
                tmpl = self._template_of(ns, rev) or template
                self._create_ordinal(sts, tmpl, i, rev)
                acted = True
                if not parallel:
                    break
                continue
            if (p.get("status") or {}).get("phase") == "Failed" and not pod_terminating(p):
                self._delete_pod(sts, "StatefulSet", p)
                acted = True
                if not parallel:
                    break
                continue
            if not parallel and (pod_terminating(p) or not pod_ready(p)):
                acted = True
                break
        if not acted:
            extra = sorted(
                (
                    int(n.rsplit("-", 1)[1])
                    for n in pods
                    if n.rsplit("-", 1)[-1].isdigit() and int(n.rsplit("-", 1)[1]) >= replicas
                ),
                reverse=True,
            )
            for i in extra:
                p = pods[f"{name}-{i}"]
                if not pod_terminating(p):
                    self._delete_pod(sts, "StatefulSet", p)
                    acted = True
                if not parallel:
                    break
        if not acted and rolling:
            healthy = all(pod_ready(p) and not pod_terminating(p) for p in pods.values())
            if healthy:
                for i in range(replicas - 1, partition - 1, -1):
                    p = ordinal_pod(i)
                    if p is not None and revision_of(p) != update_rev:
                        self._delete_pod(sts, "StatefulSet", p)
                        break
        pods = {e.name: e.obj() for e in _owned(self.engine, entry.uid, PODS.key)}
        live = [p for p in pods.values() if not pod_terminating(p)]
        now = self.engine.clock.now()
        ready = sum(1 for p in live if pod_ready(p))
        updated = sum(1 for p in live if revision_of(p) == update_rev)
        current = sum(1 for p in live if revision_of(p) == current_rev)
        status: Obj = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(live),
            "readyReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_rev,
            "updateRevision": update_rev,
            "collisionCount": 0,
            "availableReplicas": sum(
                1 for p in live if pod_available(p, int(spec.get("minReadySeconds", 0)), now)
            ),
        }
        if updated == replicas and ready == replicas and len(live) == replicas:
            status["currentRevision"] = update_rev
            status["currentReplicas"] = updated
        if not ready:
            del status["readyReplicas"]
        self._write_status(STS.key, key, status)

    def _create_ordinal(self, sts: Obj, template: Obj, i: int, revision: str) -> None:
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        pod_name = f"{name}-{i}"
        claims: list[tuple[str, str]] = []
        for tmpl in sts["spec"].get("volumeClaimTemplates") or []:
            claim = f"{tmpl['metadata']['name']}-{pod_name}"
            claims.append((tmpl["metadata"]["name"], claim))
            if self.api.store.entry(PVC.key, ns, claim) is None:
                pvc_spec = copy.deepcopy(tmpl.get("spec") or {})
                pvc_spec.setdefault("accessModes", ["ReadWriteOnce"])
                pvc_spec["volumeName"] = f"pvc-{self.engine.ids.uid()}"
                pvc = self.api.create(
                    PVC,
                    ns,
                    {
                        "metadata": {
                            "name": claim,
                            "namespace": ns,
                            "labels": dict((sts["spec"].get("selector") or {}).get("matchLabels") or {}),
                        },
                        "spec": pvc_spec,
                    },
                )
                bound = pvc.obj()
                bound["status"] = {
                    "phase": "Bound",
                    "accessModes": pvc_spec["accessModes"],
                    "capacity": ((pvc_spec.get("resources") or {}).get("requests") or {"storage": "1Gi"}),
                }
                self.api.write(PVC.key, bound, status=True)

        pod = pod_from_template(
            sts,
            "apps/v1",
            "StatefulSet",
            template,
            name=pod_name,
            extra_labels=ordinal_labels(revision, pod_name, i),
        )
        ordinal_spec(pod, sts=sts, pod_name=pod_name, claims=claims)
        self._create_pod(sts, "StatefulSet", pod)


def ordinal_labels(revision: str, pod_name: str, i: int) -> dict[str, str]:
    """The labels a StatefulSet's ordinal pod carries besides its template's."""
    return {
        "controller-revision-hash": revision,
        "statefulset.kubernetes.io/pod-name": pod_name,
        "apps.kubernetes.io/pod-index": str(i),
    }


def ordinal_spec(pod: Obj, *, sts: Obj, pod_name: str, claims: list[tuple[str, str]]) -> None:
    """An ordinal pod's stable hostname (and subdomain) and its claims in place of the template's volumes."""
    spec = pod["spec"]
    spec["hostname"] = pod_name
    if sts["spec"].get("serviceName"):
        spec["subdomain"] = sts["spec"]["serviceName"]
    volumes = list(spec.get("volumes") or [])
    for vol_name, claim in claims:
        volumes = [v for v in volumes if v.get("name") != vol_name]
        volumes.append({"name": vol_name, "persistentVolumeClaim": {"claimName": claim}})
    if volumes:
        spec["volumes"] = volumes
