"""The `delete-pod` job: delete stuck pods — a pod stuck Terminating on a dead node (KI008), the
old pod that still holds a ReadWriteOnce volume (KI007's Multi-Attach), a pod stuck in its init
containers or ContainerCreating — so their controller starts them again.

Arguments: `pod` (comma-separated `NAMESPACE/NAME`), or `workload` (`KIND/NAMESPACE/NAME`: a
deployment, statefulset, daemonset, replicaset or job; `pod/NAMESPACE/NAME` for a bare pod) with
`only`: `terminating` (its pods being deleted that have not gone) or `not-ready` (its pods not
Ready: waiting in init containers or ContainerCreating) — never every pod of a workload.
`force: true` deletes with grace period 0 (`kubectl delete --grace-period=0 --force`: the object
goes without the kubelet's confirmation — what a pod on a dead node needs, and only then).
`allow_unmanaged: true` lets it delete a pod no controller owns; without it such a pod is refused
when the job is planned (nothing would start it again: its work, and an emptyDir's data, are gone).

Progress (JSON):

    {"started": "…", "timeout": 120, "force": true,
     "pods": [{"namespace": "db", "name": "db-0", "uid": "…", "node": "ip-1", "owner": "StatefulSet db/db",
               "terminating": true, "state": "pending|deleting|done|gone|failed"}]}

Never twice: the UID precondition makes a delete hit only the pod that was planned; a tick that
runs again after a crash finds the pod gone (done) or still there and deletes it again, which is
the same request. The job is done when every pod is gone or past the timeout (not ok: a pod on a
dead node needs `force`). Deleting pods is the optional `upgrade-bot-pod-delete` role (Helm value
`podDelete: true`): the gate's dry run says when it is not bound, and the job ends saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import msgspec

from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    JobCluster,
    bar,
    duration_arg,
    few,
    flag,
    iso,
    names_arg,
    namespace_name,
    object_name,
    ready,
    timer_start,
)
from bot.core.kube.objects import workload_of
from bot.core.kube.wire import WPod
from bot.errors import ClusterError, ClusterForbidden, UserError, clip

#: How long a deleted pod may take to go before the job says it did not (its grace period runs
#: first; a forced delete goes at once).
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
        parts = workload.split("/")
        if len(parts) != 3 or parts[0].lower() not in WORKLOAD_KINDS:
            raise UserError(
                f"workload: {clip(workload, 60)!r} is not like statefulset/NAMESPACE/NAME "
                f"({', '.join(WORKLOAD_KINDS)})"
            )
        namespace_name("workload", parts[1])
        object_name("workload", parts[2])
        if parts[0].lower() != "pod" and only not in ONLY:
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


def _owner(pod: Mapping[str, Any]) -> str:
    """ "StatefulSet db/db" — the workload people know; "" for a pod no controller owns."""
    typed = msgspec.convert(pod, WPod)
    kind, name = workload_of(typed)
    return "" if kind == "Pod" else f"{kind} {typed.metadata.namespace}/{name}"


def _entry(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "node": str((pod.get("spec") or {}).get("nodeName") or ""),
        "owner": _owner(pod),
        "terminating": bool(meta.get("deletionTimestamp")),
        "state": "pending",
    }


def pkey(entry: Mapping[str, Any]) -> str:
    return f"{entry['namespace']}/{entry['name']}"


def describe(entry: Mapping[str, Any]) -> str:
    """ "pod db/db-0 on node ip-1 (StatefulSet db/db; Terminating)" — what the gate names."""
    owner = entry["owner"] or "no controller: nothing recreates it"
    where = f" on node {entry['node']}" if entry["node"] else " (not scheduled)"
    return f"pod {pkey(entry)}{where} ({owner}{'; Terminating' if entry['terminating'] else ''})"


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
                        if workload_of(msgspec.convert(raw, WPod)) == want and _stuck(raw, only):
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
        return {
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "force": flag(args, "force"),
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
        """ "" when the bot's role may delete the first pod (the server's dry run of the delete);
        else why not, for the gate."""
        for entry in progress["pods"][:1]:
            try:
                cluster.delete_pod(entry["namespace"], entry["name"], uid=entry["uid"], dry_run=True)
            except ClusterError as exc:
                if exc.status == 403:
                    return ROLE_HINT
                raise
        return ""

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        how = "forced (grace period 0)" if progress.get("force") else "with its own grace period"
        lines = []
        for entry in progress["pods"]:
            try:
                there = cluster.delete_pod(entry["namespace"], entry["name"], uid=entry["uid"], dry_run=True)
            except ClusterError as exc:
                if exc.status != 403:
                    raise
                lines.append(f"would FAIL to delete {describe(entry)}: {ROLE_HINT}")
                continue
            if there:
                lines.append(f"would delete {describe(entry)}, {how}")
            else:
                lines.append(f"{describe(entry)} is already gone: nothing to do")
        return lines

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        pods = [dict(p) for p in progress["pods"]]
        posts: list[Post] = []
        audit: list[tuple[str, str]] = []
        grace = 0 if progress.get("force") else None
        started = timer_start(progress, progress["started"], now)
        for entry in pods:
            if entry["state"] not in ("pending", "deleting"):
                continue
            key = pkey(entry)
            try:
                live = cluster.get_json(f"/api/v1/namespaces/{entry['namespace']}/pods/{entry['name']}")
            except ClusterError as exc:
                if exc.status != 404:
                    raise
                live = None
            if live is None or str((live.get("metadata") or {}).get("uid", "")) != entry["uid"]:
                # Gone (or another pod under the same name now: the controller's replacement).
                entry["state"] = "done" if entry["state"] == "deleting" else "gone"
                text = f"pod {key} deleted" if entry["state"] == "done" else f"pod {key} was already gone"
                posts.append(Post(key=f"delete-pod:{key}:{entry['uid']}", text=text))
                continue
            if entry["state"] == "pending":
                try:
                    cluster.delete_pod(
                        entry["namespace"], entry["name"], uid=entry["uid"], grace_seconds=grace
                    )
                except ClusterError as exc:
                    if exc.status != 403:
                        raise
                    raise ClusterForbidden(
                        f"{exc.user_message} — {ROLE_HINT}", cluster=exc.cluster, status=403
                    ) from exc
                entry["state"] = "deleting"
                audit.append(
                    (
                        "delete-pod",
                        f"{describe(entry)} (uid {entry['uid']}): deleted"
                        + (" with grace period 0 (forced)" if grace == 0 else ""),
                    )
                )
        timeout = timedelta(seconds=float(progress["timeout"]))
        if now - started >= timeout:
            for entry in pods:
                if entry["state"] in ("pending", "deleting"):
                    entry["state"] = "failed"
                    hint = (
                        ""
                        if progress.get("force")
                        else " — on a node that is gone only force=true removes it"
                    )
                    posts.append(
                        Post(
                            key=f"delete-pod-failed:{pkey(entry)}:{entry['uid']}",
                            text=f"pod {pkey(entry)} is still there after {int(timeout.total_seconds())} s{hint}",
                        )
                    )
        settled = [p for p in pods if p["state"] in ("done", "gone", "failed")]
        failed = [pkey(p) for p in pods if p["state"] == "failed"]
        done = len(settled) == len(pods)
        card = [bar(len(settled), len(pods), "pods deleted")]
        if failed:
            card.append("still there: " + few(failed))
        deleted = sum(1 for p in pods if p["state"] == "done")
        gone = sum(1 for p in pods if p["state"] == "gone")
        detail = ""
        if done:
            detail = f"{deleted} pod(s) deleted" + (f", {gone} already gone" if gone else "")
            if failed:
                detail += f"; still there: {few(failed)}"
        return Tick(progress={**progress, "pods": pods}, posts=tuple(posts), audit=tuple(audit),
                    card=tuple(card), done=done, ok=not failed, detail=detail, wait=2.0)  # fmt: skip
