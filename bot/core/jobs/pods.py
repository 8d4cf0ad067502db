"""The `delete-pod` job: take away stuck pods — a pod stuck Terminating on a dead node (KI008), the
old pod that still holds a ReadWriteOnce volume (KI007's Multi-Attach), a pod stuck in its init
containers or ContainerCreating — so their controller starts them again.

Arguments: `pod` (comma-separated `NAMESPACE/NAME`), or `workload` (`KIND/NAMESPACE/NAME`: a
deployment, statefulset, daemonset, replicaset or job; `pod/NAMESPACE/NAME` for a bare pod) with
`only`: `terminating` (its pods being deleted that have not gone) or `not-ready` (its pods not
Ready: waiting in init containers or ContainerCreating). `allow_unmanaged: true` lets it take a pod
no controller owns, asked by name; without it such a pod is refused when the job is planned
(nothing would start it again). `force: true` says the remedy needs the gate's *force* option: the
gate then shows that option first — the argument by itself forces nothing (issue 38).

Two promises, kept at the gate's dry run and again, on the live cluster, before every write:

- **Never a whole workload.** For each workload (the pod's controller: a ReplicaSet's Deployment,
  a StatefulSet, a DaemonSet, a Job…) the job never takes its last pod, and never takes a Ready
  pod when that would leave fewer than `max(1, replicas − maxUnavailable)` Ready pods
  (maxUnavailable: the Deployment's strategy, default 25% rounded down as the Deployment
  controller does; the StatefulSet's or DaemonSet's rollingUpdate, default 1; a Job 1; any other
  controller 0). A pod that is not Ready (or is already Terminating) is unavailable already:
  taking it costs no availability, so only the last-pod rule holds it. The pods the rule keeps are
  named at the gate and in the thread ("web: 3 pods, 3 not ready → deletes 2, 1 remains").
  A pod no controller owns (by name, `allow_unmanaged`) is outside the count: nothing counts its
  replicas, and the person who named it accepted that nothing recreates it.
- **Budgets hold.** Pods go through the Eviction API (policy/v1, as a drain's do), never a bare
  delete, and before each eviction the job reads the budgets that select the pod: one at
  `disruptionsAllowed` 0 leaves the pod where it is and names the budget (the API server itself
  lets a Pending or Terminating pod be evicted past any budget — `canIgnorePDB` — so the job's own
  check is what keeps a budget's pods when all of them are stuck). A budget whose
  `unhealthyPodEvictionPolicy` is `AlwaysAllow` says itself that a not-Ready pod may go. A 429
  from the eviction (a budget spent meanwhile) leaves the pod the same way.

The only way past a budget is the gate's **force** option: a distinct "Approve with force…"
button with its own reason, which every approval of the gate must have picked (one person's
force is not the gate's). It deletes with grace period 0 (`kubectl delete --grace-period=0
--force`: what a pod on a dead node needs); the audit row of each forced delete names the budgets
it passed, who chose force and why. Force never lifts the count rule.

Progress (JSON):

    {"started": "…", "timeout": 120, "asked_force": true,
     "gate": {"option": "force", "by": ["U1", "U2"], "reasons": ["U1: node is gone", …]},
     "workloads": [{"key": "Deployment shop/web", "replicas": 3, "max_unavailable": "25%",
                    "unavailable": 0, "floor": 3, "pods": 3, "ready": 0, "selected": 3, "deletes": 2}],
     "pods": [{"namespace": "shop", "name": "web-1", "uid": "…", "node": "ip-1",
               "owner": "Deployment shop/web", "terminating": false, "ready": false,
               "state": "pending|kept|blocked|evicting|deleting|done|gone|failed", "why": ""}]}

`gate` is written by the job service from the step's approvals (`JobService`), never from the
plan's arguments. Never twice: the UID precondition makes a write hit only the pod that was
planned; a tick that runs again after a crash finds the pod gone or Terminating (done) or still
there and sends the same eviction again, which is the same request. The job is done when every
pod is gone, kept, blocked or past the timeout; it is ok when none was blocked or stayed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    FORCE,
    GATE,
    JobCluster,
    bar,
    disruptions_allowed,
    duration_arg,
    few,
    flag,
    iso,
    kind_namespace_name,
    names_arg,
    namespace_name,
    namespace_pdbs,
    object_name,
    pdb_named,
    ready,
    selector_matches,
    timer_start,
)
from bot.core.kube.objects import workload_of
from bot.core.kube.wire import WPod
from bot.decoders import convert
from bot.errors import ClusterError, ClusterForbidden, EvictionBlocked, UserError, clip

#: How long a pod may take to go before the job says it did not (its grace period runs first; a
#: forced delete goes at once).
DEFAULT_TIMEOUT = timedelta(minutes=2)
ONLY = ("terminating", "not-ready")
WORKLOAD_KINDS = {
    "deployment": "Deployment",
    "statefulset": "StatefulSet",
    "daemonset": "DaemonSet",
    "replicaset": "ReplicaSet",
    "job": "Job",
    "pod": "Pod",
}
#: At most this many pods in one job: a stuck pod is a handful, never a namespace.
MAX_PODS = 20
ROLE_HINT = (
    "deleting a pod needs the optional `upgrade-bot-pod-delete` role (deploy/rbac.yaml; Helm value "
    "`podDelete: true`), which is not bound"
)
#: Where each controller keeps its maxUnavailable, and the default when it is absent.
_API = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "ReplicaSet": "/apis/apps/v1/namespaces/{ns}/replicasets/{name}",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets/{name}",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
    "ReplicationController": "/api/v1/namespaces/{ns}/replicationcontrollers/{name}",
}
#: Pod states that still need a write or a look.
_OPEN = ("pending", "evicting", "deleting")


def check_args(args: Mapping[str, str]) -> None:
    """The arguments' shape, without a cluster (plans and `/upgrade action` check it first)."""
    pods, workload = names_arg(args, "pod"), str(args.get("workload", "")).strip()
    if bool(pods) == bool(workload):
        raise UserError("name the pods: either pod (NAMESPACE/NAME, …) or workload (KIND/NAMESPACE/NAME)")
    for text in pods:
        namespace, sep, name = text.partition("/")
        if not sep:
            raise UserError(f"pod: {clip(text, 60)!r} is not like NAMESPACE/NAME")
        namespace_name("pod", namespace)
        object_name("pod", name)
    if len(pods) > MAX_PODS:
        raise UserError(f"pod: at most {MAX_PODS} pods at a time")
    only = str(args.get("only", "")).strip()
    if workload:
        like = f"statefulset/NAMESPACE/NAME ({', '.join(WORKLOAD_KINDS)})"
        kind, _, _ = kind_namespace_name("workload", workload, WORKLOAD_KINDS, like)
        if kind != "pod" and only not in ONLY:
            raise UserError(f"workload: say which of its pods with only={' or only='.join(ONLY)}")
    if only and only not in ONLY:
        raise UserError(f"only: {clip(only, 30)!r} — one of {', '.join(ONLY)}")


def _stuck(pod: Mapping[str, Any], only: str) -> bool:
    meta = pod.get("metadata") or {}
    if only == "terminating":
        return bool(meta.get("deletionTimestamp"))
    if meta.get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    return not ready(pod)


def _controller(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the pod's own controller (a ReplicaSet, not its Deployment); ("", "")."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return "", ""


def _owner(pod: Mapping[str, Any]) -> str:
    """ "StatefulSet db/db" — the workload people know; "" for a pod no controller owns."""
    typed = convert(pod, WPod)
    kind, name = workload_of(typed)
    return "" if kind == "Pod" else f"{kind} {typed.metadata.namespace}/{name}"


def _counts(pod: Mapping[str, Any]) -> bool:
    """Does the pod count among its workload's pods: not leaving (Terminating) and not finished."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def _entry(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "node": str((pod.get("spec") or {}).get("nodeName") or ""),
        "owner": _owner(pod),
        "terminating": bool(meta.get("deletionTimestamp")),
        "ready": ready(pod),
        "created": str(meta.get("creationTimestamp") or ""),
        "state": "pending",
        "why": "",
    }


def pkey(entry: Mapping[str, Any]) -> str:
    return f"{entry['namespace']}/{entry['name']}"


def describe(entry: Mapping[str, Any]) -> str:
    """ "pod db/db-0 on node ip-1 (StatefulSet db/db; Terminating)" — what the gate names."""
    owner = entry["owner"] or "no controller: nothing recreates it"
    where = f" on node {entry['node']}" if entry["node"] else " (not scheduled)"
    state = "; Terminating" if entry["terminating"] else "" if entry.get("ready", True) else "; not ready"
    return f"pod {pkey(entry)}{where} ({owner}{state})"


# ----- the count rule ------------------------------------------------------------------------------


def _scaled(value: Any, total: int, *, up: bool) -> int:
    """An IntOrString against `total` (intstr.GetScaledValueFromIntOrPercent)."""
    text = str(value).strip()
    if text.endswith("%"):
        try:
            share = float(text[:-1]) * total / 100
        except ValueError:
            return 0
        return math.ceil(share) if up else math.floor(share)
    try:
        return int(text)
    except ValueError:
        return 0


def budget_of(kind: str, obj: Mapping[str, Any] | None, seen: int) -> dict[str, Any]:
    """The workload's replicas and maxUnavailable, as its controller reads them: `replicas`,
    `max_unavailable` (as written, for people), `unavailable` (resolved) and `floor`, the Ready
    pods that must remain: `max(1, replicas − unavailable)`. `seen`: its pods now (a controller
    the bot does not know, or one it could not read, counts those)."""
    spec = (obj or {}).get("spec") or {}
    status = (obj or {}).get("status") or {}
    written: Any
    if kind in ("Deployment", "ReplicaSet", "ReplicationController"):
        replicas = int(spec.get("replicas", 1) if obj is not None else seen)
        rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        written = rolling.get("maxUnavailable", "25%")
        surge = _scaled(rolling.get("maxSurge", "25%"), replicas, up=True)
        unavailable = _scaled(written, replicas, up=False)
        if unavailable == 0 and surge == 0:
            unavailable = 1  # the Deployment controller's fencepost: a rollout must move
    elif kind in ("StatefulSet", "DaemonSet"):
        if kind == "StatefulSet":
            replicas = int(spec.get("replicas", 1) if obj is not None else seen)
        else:
            replicas = int(status.get("desiredNumberScheduled", seen) if obj is not None else seen)
        rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
        written = rolling.get("maxUnavailable", 1)
        unavailable = max(1, _scaled(written, replicas, up=True))
    elif kind == "Job":
        replicas = int(spec.get("parallelism", 1) if obj is not None else seen)
        written, unavailable = 1, 1
    else:
        replicas, written, unavailable = seen, 0, 0
    return {
        "replicas": replicas,
        "max_unavailable": str(written),
        "unavailable": unavailable,
        "floor": max(1, replicas - unavailable),
    }


def _order(entry: Mapping[str, Any]) -> tuple[int, int, str, str]:
    """Which of a workload's stuck pods go first: the Terminating (they cost nothing), then the not
    Ready, then the Ready; the oldest first, so the pod kept is the newest (the likeliest to come
    up by itself)."""
    return (0 if entry["terminating"] else 1, 1 if entry["ready"] else 0, entry["created"], entry["name"])


class Counted:
    """One workload's pods as the count rule sees them now: which still count, which are Ready."""

    def __init__(self, budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> None:
        self.budget = budget
        self.counting = {str((p.get("metadata") or {}).get("uid", "")) for p in pods if _counts(p)}
        self.ready = {str((p.get("metadata") or {}).get("uid", "")) for p in pods if _counts(p) and ready(p)}

    def refuse(self, entry: Mapping[str, Any]) -> str:
        """Why taking this pod now would break the rule; "" when it may go."""
        uid = entry["uid"]
        if uid not in self.counting:
            return ""  # Terminating or finished: it is leaving already, it costs the workload nothing
        owner = entry["owner"]
        if len(self.counting) <= 1:
            return f"the last pod of {owner} stays"
        floor = int(self.budget["floor"])
        if uid in self.ready and len(self.ready) - 1 < floor:
            return (
                f"it is Ready, and {owner} keeps at least {floor} Ready pod(s) (replicas "
                f"{self.budget['replicas']} − maxUnavailable {self.budget['max_unavailable']}); "
                f"it has {len(self.ready)}"
            )
        return ""

    def take(self, entry: Mapping[str, Any]) -> None:
        self.counting.discard(entry["uid"])
        self.ready.discard(entry["uid"])


def _workload_pods(
    cluster: JobCluster, namespace: str, owner: str, cache: dict[str, list[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    if namespace not in cache:
        listed: list[Mapping[str, Any]] = []
        for page in cluster.list_pages(f"/api/v1/namespaces/{namespace}/pods"):
            listed.extend(page.items)
        cache[namespace] = listed
    return [p for p in cache[namespace] if _owner(p) == owner]


def _read_workload(
    cluster: JobCluster, pod: Mapping[str, Any], owner: str, seen: int
) -> tuple[str, dict[str, Any]]:
    """The workload's kind and its budget (`budget_of`), read from its controller object."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    kind, _, name = owner.partition(" ")
    name = name.partition("/")[2]
    direct_kind, direct_name = _controller(pod)
    tries = [(kind, name)]
    if kind == "Deployment" and direct_kind == "ReplicaSet":
        tries.append(("ReplicaSet", direct_name))  # a ReplicaSet of no Deployment
    for what, named in tries:
        template = _API.get(what)
        if template is None:
            break
        try:
            obj = cluster.get_json(template.format(ns=namespace, name=named))
        except ClusterError as exc:
            # 403: a kind the bot's read role does not cover (Jobs, ReplicationControllers):
            # counted from the pods it has now, with the kind's default maxUnavailable.
            if exc.status in (403, 404):
                continue
            raise
        return what, budget_of(what, obj, seen)
    return kind, budget_of(kind, None, seen)


def limit(
    cluster: JobCluster, entries: list[dict[str, Any]], found: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Apply the count rule to planned `entries` (their raw pods in `found`, by uid): the pods it
    keeps are marked `kept` with why; returns each workload's figures, for the gate."""
    cache: dict[str, list[Mapping[str, Any]]] = {}
    summary: list[dict[str, Any]] = []
    by_owner: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if entry["owner"]:
            by_owner.setdefault(entry["owner"], []).append(entry)
    for owner, mine in sorted(by_owner.items()):
        first = found[mine[0]["uid"]]
        pods = _workload_pods(cluster, mine[0]["namespace"], owner, cache)
        _kind, budget = _read_workload(cluster, first, owner, sum(1 for p in pods if _counts(p)))
        counted = Counted(budget, pods)
        figures = {
            "key": owner,
            **budget,
            "pods": len(counted.counting),
            "terminating": sum(1 for p in pods if (p.get("metadata") or {}).get("deletionTimestamp")),
            "ready": len(counted.ready),
            "selected": len(mine),
            "deletes": 0,
        }
        for entry in sorted(mine, key=_order):
            why = counted.refuse(entry)
            if why:
                entry["state"], entry["why"] = "kept", why
            else:
                counted.take(entry)
                figures["deletes"] += 1
        figures["remains"] = len(counted.counting)
        summary.append(figures)
    return summary


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def workload_line(w: Mapping[str, Any]) -> str:
    """ "web: 3 pods, 3 not ready → deletes 2, 1 remains (maxUnavailable 25%, replicas 3 of
    Deployment shop/web)" — the gate's line for a workload. Pods already Terminating are counted
    apart: they are leaving, and do not remain."""
    name = str(w["key"]).rpartition("/")[2]
    terminating = int(w.get("terminating", 0))
    not_ready = int(w["pods"]) - int(w["ready"])
    kept = int(w["selected"]) - int(w["deletes"])
    remains = int(w["remains"])
    return (
        f"{name}: {_n(int(w['pods']) + terminating, 'pod')}"
        f"{f' ({terminating} terminating)' if terminating else ''}, {not_ready} not ready"
        f" → deletes {w['deletes']}{f', keeps {kept}' if kept else ''},"
        f" {remains} {'remains' if remains == 1 else 'remain'}"
        f" (maxUnavailable {w['max_unavailable']}, replicas {w['replicas']} of {w['key']})"
    )


# ----- budgets -------------------------------------------------------------------------------------


def holding(
    cluster: JobCluster, pod: Mapping[str, Any], cache: dict[str, list[Mapping[str, Any]]]
) -> tuple[list[str], list[str]]:
    """(the budgets that select the pod, those of them that hold it now), as
    "PodDisruptionBudget ns/name (disruptionsAllowed 0)"."""
    meta = pod.get("metadata") or {}
    selecting, holds = [], []
    for pdb in namespace_pdbs(cluster, str(meta.get("namespace", "")), cache):
        spec = pdb.get("spec") or {}
        if not selector_matches(spec.get("selector"), meta.get("labels")):
            continue
        named = pdb_named(pdb)
        selecting.append(named)
        if disruptions_allowed(pdb) < 1 and not (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" and not ready(pod)
        ):
            holds.append(named)
    return selecting, holds


def gate_force(progress: Mapping[str, Any]) -> bool:
    """Did the gate choose force (every approval that opened it)?"""
    return str((progress.get(GATE) or {}).get("option", "")) == FORCE


def _chosen(progress: Mapping[str, Any]) -> str:
    gate = progress.get(GATE) or {}
    by = ", ".join(str(b) for b in gate.get("by") or []) or "the gate"
    reasons = "; ".join(str(r) for r in gate.get("reasons") or [])
    return f"force chosen at the gate by {by}" + (f": {reasons}" if reasons else "")


class DeletePodJob:
    """`delete-pod`: see the module docstring."""

    kind = "delete-pod"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        check_args(args)
        timeout = duration_arg(args, "timeout", DEFAULT_TIMEOUT)
        only = str(args.get("only", "")).strip()
        found: list[Mapping[str, Any]] = []
        workload = str(args.get("workload", "")).strip()
        if workload:
            kind, namespace, name = workload.split("/")
            kind = kind.lower()
            if kind == "pod":
                found = [self._get(cluster, namespace, name)]
                if only and not _stuck(found[0], only):
                    raise UserError(f"pod {namespace}/{name} is not {only} now: nothing to delete")
            else:
                want = (WORKLOAD_KINDS[kind], name)
                for page in cluster.list_pages(f"/api/v1/namespaces/{namespace}/pods"):
                    for raw in page.items:
                        if workload_of(convert(raw, WPod)) == want and _stuck(raw, only):
                            found.append(raw)
                if not found:
                    hint = (
                        " (a volume still attached to a dead node is released by the attach/detach"
                        " controller after 6 minutes, or by deleting its VolumeAttachment: see the remedy)"
                        if only == "terminating"
                        else ""
                    )
                    raise UserError(
                        f"no pod of {kind}/{namespace}/{name} is {only} now: nothing to delete{hint}"
                    )
                if len(found) > MAX_PODS:
                    raise UserError(
                        f"{len(found)} pods of {kind}/{namespace}/{name} are {only}: more than {MAX_PODS} "
                        "is not a stuck pod — look at the workload"
                    )
        else:
            for text in names_arg(args, "pod"):
                namespace, _, name = text.partition("/")
                named = self._get(cluster, namespace, name)
                if only and not _stuck(named, only):
                    raise UserError(f"pod {namespace}/{name} is not {only} now: nothing to delete")
                found.append(named)
        entries = sorted((_entry(p) for p in found), key=pkey)
        unmanaged = [pkey(e) for e in entries if not e["owner"]]
        if unmanaged and not flag(args, "allow_unmanaged"):
            raise UserError(
                f"pod {few(unmanaged)} has no controller: once deleted nothing starts it again (its work,"
                " and any emptyDir data, are gone). To delete it all the same, ask for it by name with"
                " allow_unmanaged=true"
            )
        by_uid = {str((p.get("metadata") or {}).get("uid", "")): p for p in found}
        workloads = limit(cluster, entries, by_uid)
        return {
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "asked_force": flag(args, "force"),
            "workloads": workloads,
            "pods": entries,
        }

    @staticmethod
    def _get(cluster: JobCluster, namespace: str, name: str) -> dict[str, Any]:
        try:
            return cluster.get_json(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except ClusterError as exc:
            if exc.status == 404:
                raise UserError(f"no such pod: {namespace}/{name}") from None
            raise

    def may_delete(self, cluster: JobCluster, progress: Mapping[str, Any]) -> str:
        """ "" when the bot's role may delete the first pod (the server's dry run of the delete,
        what the force option does); else why not, for the gate."""
        for entry in [p for p in progress["pods"] if p["state"] == "pending"][:1]:
            try:
                cluster.delete_pod(entry["namespace"], entry["name"], uid=entry["uid"], dry_run=True)
            except ClusterError as exc:
                if exc.status == 403:
                    return ROLE_HINT
                raise
        return ""

    def budgets(self, cluster: JobCluster, progress: Mapping[str, Any]) -> dict[str, list[str]]:
        """Each budget that holds planned pods now → those pods (the gate names them)."""
        cache: dict[str, list[Mapping[str, Any]]] = {}
        held: dict[str, list[str]] = {}
        for entry in progress["pods"]:
            if entry["state"] != "pending":
                continue
            live = self._live(cluster, entry)
            if live is None:
                continue
            for named in holding(cluster, live, cache)[1]:
                held.setdefault(named, []).append(pkey(entry))
        return held

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        force = gate_force(progress)
        lines = [workload_line(w) for w in progress.get("workloads") or []]
        cache: dict[str, list[Mapping[str, Any]]] = {}
        for entry in progress["pods"]:
            if entry["state"] == "kept":
                lines.append(f"would leave {describe(entry)}: {entry['why']}")
                continue
            live = self._live(cluster, entry)
            if live is None:
                lines.append(f"{describe(entry)} is already gone: nothing to do")
                continue
            holds = holding(cluster, live, cache)[1]
            if force:
                try:
                    cluster.delete_pod(entry["namespace"], entry["name"], uid=entry["uid"], dry_run=True)
                except ClusterError as exc:
                    if exc.status != 403:
                        raise
                    lines.append(f"would FAIL to delete {describe(entry)}: {ROLE_HINT}")
                    continue
                past = f", past {', '.join(holds)}" if holds else ""
                lines.append(f"would delete {describe(entry)} with grace period 0 (forced{past})")
            elif holds:
                lines.append(f"would leave {describe(entry)}: held by {', '.join(holds)}")
            else:
                lines.append(f"would evict {describe(entry)} through the Eviction API")
        return lines

    @staticmethod
    def _live(cluster: JobCluster, entry: Mapping[str, Any]) -> dict[str, Any] | None:
        """The planned pod as it is now; None when it is gone (or another pod has its name)."""
        try:
            live = cluster.get_json(f"/api/v1/namespaces/{entry['namespace']}/pods/{entry['name']}")
        except ClusterError as exc:
            if exc.status != 404:
                raise
            return None
        if str((live.get("metadata") or {}).get("uid", "")) != entry["uid"]:
            return None
        return live

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        pods = [dict(p) for p in progress["pods"]]
        posts: list[Post] = []
        audit: list[tuple[str, str]] = []
        force = gate_force(progress)
        started = timer_start(progress, progress["started"], now)
        pod_cache: dict[str, list[Mapping[str, Any]]] = {}
        pdb_cache: dict[str, list[Mapping[str, Any]]] = {}
        counted: dict[str, Counted] = {}
        budgets = {str(w["key"]): w for w in progress.get("workloads") or []}
        for entry in pods:
            if entry["state"] not in _OPEN:
                continue
            key = pkey(entry)
            live = self._live(cluster, entry)
            if live is None:
                # Gone (or another pod under the same name now: the controller's replacement).
                was = entry["state"]
                entry["state"] = "gone" if was == "pending" else "done"
                text = f"pod {key} was already gone" if was == "pending" else f"pod {key} is gone"
                posts.append(Post(key=f"delete-pod:{key}:{entry['uid']}", text=text))
                continue
            if entry["state"] != "pending":
                continue  # evicted or deleted: waiting for it to go
            # The count rule again, on the workload as it is now: the gate's figures are minutes old.
            if entry["owner"]:
                rule = counted.get(entry["owner"])
                if rule is None:
                    budget = budgets.get(entry["owner"]) or budget_of("", None, 0)
                    rule = Counted(
                        budget, _workload_pods(cluster, entry["namespace"], entry["owner"], pod_cache)
                    )
                    counted[entry["owner"]] = rule
                why = rule.refuse(entry)
                if why:
                    entry["state"], entry["why"] = "kept", why
                    posts.append(
                        Post(key=f"delete-pod-kept:{key}:{entry['uid']}", text=f"pod {key} left: {why}")
                    )
                    continue
            selecting, holds = holding(cluster, live, pdb_cache)
            if force:
                self._delete(cluster, entry)
                entry["state"] = "deleting"
                if entry["owner"]:
                    counted[entry["owner"]].take(entry)
                past = f", past {', '.join(holds)}" if holds else ""
                audit.append(
                    (
                        "delete-pod",
                        f"{describe(entry)} (uid {entry['uid']}): deleted with grace period 0 "
                        f"(forced{past}) — {_chosen(progress)}",
                    )
                )
                continue
            if holds:
                entry["state"], entry["why"] = "blocked", f"held by {', '.join(holds)}"
                posts.append(
                    Post(
                        key=f"delete-pod-blocked:{key}:{entry['uid']}",
                        text=f"pod {key} left: {entry['why']} — only the gate's force option passes a budget",
                    )
                )
                continue
            try:
                accepted = cluster.evict(entry["namespace"], entry["name"], uid=entry["uid"])
            except EvictionBlocked as exc:
                named = ", ".join(selecting) or "a PodDisruptionBudget"
                entry["state"], entry["why"] = (
                    "blocked",
                    f"the eviction was refused by {named}: {exc.user_message}",
                )
                posts.append(
                    Post(
                        key=f"delete-pod-blocked:{key}:{entry['uid']}",
                        text=f"pod {key} left: {entry['why']} — only the gate's force option passes a budget",
                    )
                )
                continue
            except ClusterError as exc:
                if exc.status in (401, 403):
                    raise
                # 500: several budgets select the pod — the API refuses, and so the pod stays.
                entry["state"], entry["why"] = "blocked", f"the eviction was refused: {exc.user_message}"
                posts.append(
                    Post(
                        key=f"delete-pod-blocked:{key}:{entry['uid']}", text=f"pod {key} left: {entry['why']}"
                    )
                )
                continue
            if not accepted:
                entry["state"] = "gone"
                posts.append(Post(key=f"delete-pod:{key}:{entry['uid']}", text=f"pod {key} was already gone"))
                continue
            entry["state"] = "evicting"
            if entry["owner"]:
                counted[entry["owner"]].take(entry)
            audit.append(("delete-pod", f"{describe(entry)} (uid {entry['uid']}): evicted"))
        timeout = timedelta(seconds=float(progress["timeout"]))
        if now - started >= timeout:
            for entry in pods:
                if entry["state"] in _OPEN:
                    entry["state"] = "failed"
                    hint = (
                        "" if force else " — on a node that is gone only the gate's force option removes it"
                    )
                    posts.append(
                        Post(
                            key=f"delete-pod-failed:{pkey(entry)}:{entry['uid']}",
                            text=f"pod {pkey(entry)} is still there after {int(timeout.total_seconds())} s{hint}",
                        )
                    )
        return self._tick(progress, pods, posts, audit)

    @staticmethod
    def _delete(cluster: JobCluster, entry: Mapping[str, Any]) -> None:
        try:
            cluster.delete_pod(entry["namespace"], entry["name"], uid=entry["uid"], grace_seconds=0)
        except ClusterError as exc:
            if exc.status != 403:
                raise
            raise ClusterForbidden(
                f"{exc.user_message} — {ROLE_HINT}", cluster=exc.cluster, status=403
            ) from exc

    @staticmethod
    def _tick(
        progress: Progress, pods: list[dict[str, Any]], posts: list[Post], audit: list[tuple[str, str]]
    ) -> Tick:
        def named(state: str) -> list[str]:
            return [pkey(p) for p in pods if p["state"] == state]

        settled = [p for p in pods if p["state"] not in _OPEN]
        done = len(settled) == len(pods)
        taken = named("done")
        card = [bar(len(taken) + len(named("gone")), len(pods), "pods gone")]
        for state, words in (("blocked", "held by a budget"), ("kept", "kept (never a whole workload)"),
                             ("failed", "still there")):  # fmt: skip
            if named(state):
                card.append(f"{words}: {few(named(state))}")
        detail = ""
        if done:
            parts = [f"{len(taken)} pod(s) gone"]
            for state, words in (("gone", "already gone"), ("kept", "kept by the count rule"),
                                 ("blocked", "held by a budget"), ("failed", "still there")):  # fmt: skip
                if named(state):
                    parts.append(
                        f"{words}: {few(named(state))}" if state != "gone" else f"{len(named(state))} {words}"
                    )
            detail = "; ".join(parts)
        ok = not named("failed") and not named("blocked")
        return Tick(progress={**progress, "pods": pods}, posts=tuple(posts), audit=tuple(audit),
                    card=tuple(card), done=done, ok=ok, detail=detail, wait=2.0)  # fmt: skip
