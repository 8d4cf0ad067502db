"""What a gate shows before two people approve a step that changes the cluster: its dry run.

Read once, when the gate opens (the run's cards keep it in the database with the gate, so the
message is the same after a restart), from the same selection and filters the jobs use — a node
group's nodes through `plan`, each node's pods through kubectl's filters (`drain.triage`) — and
nothing is written, not even a server-side dry run: a 200-node drain is one list of nodes, one
list of pods per node and one list of budgets, instead of an eviction call per pod. (One
exception: a `delete-pod` asks the server's dry run of one delete, since deleting pods is an
opt-in role and the gate must say when the bot does not have it.)

The result is plain JSON, already bounded for Slack (the first `NODES` nodes in the order they
will be drained, `PODS` pod names per node, `BUDGETS` blocking budgets, `WORKLOADS` workloads,
each list with the count of what it leaves out), so the stored row and the message stay small
whatever the size of the group:

    {"at": "2026-11-24T14:02:11Z", "error": "",
     "actions": [{"kind": "drain", "args": "nodegroup=ng-shared version=1.25.16", "timeout": "15m",
                  "nodes": [{"name": "ip-1", "cordon": true, "evict": 12, "pods": ["ns/a", …],
                             "stay": 3, "refuse": 1, "terminating": 0}, …],
                  "node_count": 3, "cordon_count": 3, "evict_count": 41, "stay_count": 9,
                  "blocking": [{"pdb": "payments/api", "allowed": 0, "pods": 2,
                                "nodes": ["ip-1"], "node_count": 1}, …], "blocking_count": 1,
                  "refused": [{"pod": "ns/x", "node": "ip-1", "why": "emptyDir …"}],
                  "refused_count": 1},
                 {"kind": "cordon", "nodes": [{"name": "ip-1", "already": false}], "node_count": 1,
                  "change_count": 1},
                 {"kind": "restart", "workloads": ["deployment/kube-system/coredns"],
                  "workload_count": 1, "owners": [{"kind": "helm", "target": "deployment/kube-system/coredns",
                                                   "title": "Helm release kube-system/coredns"}]},
                 {"kind": "delete-pod", "workloads": ["web: 3 pod(s), 3 not ready → deletes 2 (1 kept
                  by the rule), 1 remain(s) (Deployment shop/web: replicas 3, maxUnavailable 25%)"],
                  "pods": ["pod shop/web-a (not scheduled) (Deployment shop/web; not ready)", …],
                  "pod_count": 3, "delete_count": 2, "kept_count": 1, "held_count": 2,
                  "blocking": [{"pdb": "PodDisruptionBudget shop/web (disruptionsAllowed 0)",
                                "pods": "shop/web-a, shop/web-b", "count": 2}], "blocking_count": 1,
                  "asked_force": false, "forbidden": ""},
                 {"kind": "set-image", "images": [{"workload": "daemonset/kube-system/kube-proxy",
                  "container": "kube-proxy", "old": "…:v1.25.16-eksbuild.9", "new": "…:v1.25.16-eksbuild.8"}],
                  "version": "1.25", "source": "https://docs.aws.amazon.com/…",
                  "owners": [{"kind": "flux-kustomization", "title": "Flux Kustomization flux-system/apps",
                              "consequence": "… will revert this change at its next reconcile",
                              "path": "flux-suspend object=kustomization/flux-system/apps first, …", …}]}]}

`error` says in one line why the dry run could not be read (the gate works without it); an
action's own `error` says why that action's selection failed ("node group x has no nodes").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.core.durations import format_duration
from bot.core.jobs import gitops
from bot.core.jobs.base import JobRegistry
from bot.core.jobs.common import JobCluster, disruptions_allowed, few, iso, pdb_ref, selector_matches
from bot.core.jobs.drain import pod_key, triage
from bot.core.jobs.pods import DeletePodJob, workload_line
from bot.core.jobs.pods import describe as describe_pod
from bot.core.jobs.restart import RESOURCES, wkey, workload_path
from bot.errors import UserError
from bot.records import ActionCall

#: How much of each list a gate shows (Slack: 3,000 characters a section, 50 blocks a message).
NODES = 8
PODS = 3
BUDGETS = 5
REFUSED = 5
WORKLOADS = 10
#: The kinds whose gate shows a dry run of a shape of its own (nodes, pods, budgets, workloads).
SHAPED = ("cordon", "uncordon", "drain", "restart", "delete-pod", "set-image")
#: The kinds of job that change the cluster, and so have a dry run on their gate.
CHANGING = (
    *SHAPED,
    "eks-update-cluster",
    "eks-update-nodegroup",
    "eks-update-addon",
    "aks-upgrade-control-plane",
    "aks-upgrade-nodepool",
    "gke-update-master",
    "gke-update-nodepool",
    "flux-suspend",
    "flux-resume",
    "argocd-pause",
    "argocd-resume",
)
#: Kinds that change nothing but whose gate still shows what they will wait for, read now.
WAITING = ("wait-controlplane",)
#: Lines a kind's own `dry_run` gives the gate (the kinds without a shape of their own here).
LINES = 6


def changes_cluster(calls: Sequence[ActionCall]) -> list[ActionCall]:
    """The calls of a step that have a dry run on its gate: those that change the cluster (a call
    with `dry_run: true` changes nothing) and `WAITING`'s."""
    return [
        c
        for c in calls
        if c.name in CHANGING + WAITING
        and str(c.args.get("dry_run", "")).strip().lower() not in ("true", "yes", "1")
    ]


def describe_args(args: Mapping[str, str]) -> str:
    """The call's arguments on one line; a step's `background:` and `silence:` (JSON the plan
    loader passes on) by the names of their checks, not their JSON."""
    parts = []
    for k, v in args.items():
        if k == "dry_run":
            continue
        if k in ("background", "silence"):
            try:
                raw = json.loads(v)
            except ValueError:
                raw = None
            if k == "background" and isinstance(raw, list):
                v = ",".join(str(i.get("name", "?")) for i in raw if isinstance(i, dict))
            elif k == "silence":
                v = "held"
        parts.append(f"{k}={v}")
    return " ".join(parts)


def read(
    cluster: JobCluster,
    calls: Sequence[ActionCall],
    jobs: JobRegistry,
    *,
    now: datetime,
    resumed: Mapping[str, Mapping[str, Any]] | None = None,
    cluster_name: str = "",
) -> dict[str, Any]:
    """The dry run of `calls` (see the module docstring). Cluster errors propagate: the caller
    turns them into the one line the gate shows. `resumed`: kind → the stored progress of the
    step's interrupted job, which the approval continues (an EKS job then says it follows the
    update it started, instead of what a new job would call). `cluster_name`: the run's cluster,
    which the commands it offers name (the owner's way)."""
    actions: list[dict[str, Any]] = []
    for call in calls:
        job = jobs.get(call.name)
        args = {k: str(v) for k, v in call.args.items() if k != "dry_run"}
        entry: dict[str, Any] = {"kind": call.name, "args": describe_args(args)}
        if job is None:
            continue
        earlier = (resumed or {}).get(call.name)
        if call.name == "set-image":
            # Who owns what the fix changes, and what will happen to the change (issue 40 item 7):
            # a GitOps controller puts the old image back, so the gate names its path instead —
            # said even when the fix itself is refused (an EKS add-on, a version outside the table).
            found = gitops.owners(cluster, _workload_paths(args), name=cluster_name)
            if found:
                entry["owners"] = found[:WORKLOADS]
        try:
            if earlier is not None and call.name not in SHAPED:
                progress = dict(earlier)
            else:
                progress = job.plan(cluster, args, now=now)
        except UserError as exc:
            # What the job itself would say at its first tick ("already on 1.25: nothing to do").
            actions.append({**entry, "error": exc.user_message})
            continue
        if call.name == "drain":
            entry.update(_drain(cluster, progress))
        elif call.name in ("cordon", "uncordon"):
            entry.update(_flag(progress))
        elif call.name == "restart":
            workloads = list(progress.get("workloads") or [])
            names = [wkey(w) for w in workloads]
            entry.update({"workloads": names[:WORKLOADS], "workload_count": len(names)})
            # Who owns what it restarts: named, though a restart only stamps the pod template's
            # restartedAt annotation, which no owner keeps (so none reverts it).
            owned = gitops.owners(
                cluster,
                [workload_path(w["kind"], w["namespace"], w["name"]) for w in workloads[:WORKLOADS]],
                name=cluster_name,
            )
            if owned:
                entry["owners"] = [{k: o[k] for k in ("kind", "target", "title")} for o in owned]
            if progress.get("resolved"):
                entry["resolved"] = dict(progress["resolved"])
        elif call.name == "delete-pod":
            entry.update(_pods(cluster, job, progress))
        elif call.name == "set-image":
            entry.update(_image(progress))
        else:
            # The EKS actions and wait-controlplane: what would be called, with which arguments,
            # and what EKS (DescribeX) and the API server say now — the job's own dry run.
            try:
                lines = job.dry_run(cluster, progress)
            except UserError as exc:
                actions.append({**entry, "error": exc.user_message})
                continue
            entry.update({"lines": lines[:LINES], "line_count": len(lines)})
        actions.append(entry)
    return {"at": iso(now), "error": "", "actions": actions}


def _workload_paths(args: Mapping[str, str]) -> list[str]:
    """The API path of the workload a `set-image` names (`daemonset/NS/NAME`), if it names one."""
    parts = str(args.get("workload", "")).strip().split("/")
    if len(parts) != 3 or parts[0].lower() not in RESOURCES:
        return []
    return [workload_path(parts[0].lower(), parts[1], parts[2])]


def failed(now: datetime, why: str) -> dict[str, Any]:
    """A dry run that could not be read: the gate says why, in one line, and still works."""
    return {"at": iso(now), "error": why, "actions": []}


def _flag(progress: Mapping[str, Any]) -> dict[str, Any]:
    nodes = list(progress.get("nodes") or [])
    return {
        "nodes": [{"name": n["name"], "already": bool(n["was"])} for n in nodes[:NODES]],
        "node_count": len(nodes),
        "change_count": sum(1 for n in nodes if not n["was"]),
    }


def _pods(cluster: JobCluster, job: Any, progress: Mapping[str, Any]) -> dict[str, Any]:
    """Each workload's count (how many pods it has, how many go, how many remain), each pod with
    its node and owner (and why the count rule keeps it), the budgets that hold pods now, and
    whether the bot's role may delete pods at all — what the force option does (the server's dry
    run of one delete: `pods delete` is an opt-in role)."""
    pods = list(progress.get("pods") or [])
    held = job.budgets(cluster, progress) if isinstance(job, DeletePodJob) else {}
    kept = [p for p in pods if p["state"] == "kept"]
    blocking = [
        {"pdb": name, "pods": few(keys, PODS), "count": len(keys)} for name, keys in sorted(held.items())
    ]
    return {
        "workloads": [workload_line(w) for w in (progress.get("workloads") or [])[:WORKLOADS]],
        "pods": [
            describe_pod(p) + (f" — stays: {p['why']}" if p["state"] == "kept" else "")
            for p in pods[:WORKLOADS]
        ],
        "pod_count": len(pods),
        "kept_count": len(kept),
        "delete_count": len(pods) - len(kept),
        "held_count": len({k for keys in held.values() for k in keys}),
        "blocking": blocking[:BUDGETS],
        "blocking_count": len(blocking),
        "asked_force": bool(progress.get("asked_force")),
        "forbidden": job.may_delete(cluster, progress) if isinstance(job, DeletePodJob) else "",
    }


def _image(progress: Mapping[str, Any]) -> dict[str, Any]:
    documented = progress.get("image") or {}
    return {
        "images": [
            {"workload": wkey(w), "container": w["container"], "old": w["old"], "new": w["new"]}
            for w in (progress.get("workloads") or [])[:WORKLOADS]
        ],
        "version": str(documented.get("version", "")),
        "source": str(documented.get("source", "")),
    }


def _drain(cluster: JobCluster, progress: Mapping[str, Any]) -> dict[str, Any]:
    allow = {
        "allow_local_storage": bool(progress.get("allow_local_storage")),
        "allow_unmanaged": bool(progress.get("allow_unmanaged")),
    }
    budgets = _budgets(cluster)
    order: list[str] = list(progress.get("order") or [])
    nodes: list[dict[str, Any]] = []
    blocking: dict[str, dict[str, Any]] = {}
    refused: list[dict[str, str]] = []
    totals = {"cordon": 0, "evict": 0, "stay": 0, "refuse": 0}
    for name in order:
        cordon = not progress["nodes"][name]["was"]
        counts = {"evict": 0, "stay": 0, "refuse": 0, "terminating": 0}
        evict: list[str] = []
        for pod in sorted(cluster.node_pods(name), key=pod_key):
            key = pod_key(pod)
            meta = pod.get("metadata") or {}
            what, why = triage(pod, **allow)
            if what == "skip":
                counts["stay"] += 1
                continue
            if what == "refuse":
                counts["refuse"] += 1
                refused.append({"pod": key, "node": name, "why": _short(why)})
                continue
            if meta.get("deletionTimestamp"):
                counts["terminating"] += 1
                continue
            counts["evict"] += 1
            evict.append(key)
            for pdb in budgets.get(str(meta.get("namespace", "")), ()):
                spec = pdb.get("spec") or {}
                if disruptions_allowed(pdb) > 0 or not selector_matches(
                    spec.get("selector"), meta.get("labels")
                ):
                    continue
                ref = pdb_ref(pdb)
                held = blocking.setdefault(
                    ref, {"pdb": ref, "allowed": disruptions_allowed(pdb), "pods": 0, "nodes": []}
                )
                held["pods"] += 1
                if name not in held["nodes"]:
                    held["nodes"].append(name)
        totals["cordon"] += int(cordon)
        totals["evict"] += counts["evict"]
        totals["stay"] += counts["stay"]
        totals["refuse"] += counts["refuse"]
        if len(nodes) < NODES:
            nodes.append({"name": name, "cordon": cordon, "pods": evict[:PODS], **counts})
    held_list = sorted(blocking.values(), key=lambda b: (-b["pods"], b["pdb"]))
    for held in held_list:
        held["node_count"] = len(held["nodes"])
        held["nodes"] = held["nodes"][:PODS]
    return {
        "timeout": format_duration(timedelta(seconds=float(progress.get("timeout") or 0))),
        "nodes": nodes,
        "node_count": len(order),
        "cordon_count": totals["cordon"],
        "evict_count": totals["evict"],
        "stay_count": totals["stay"],
        "blocking": held_list[:BUDGETS],
        "blocking_count": len(held_list),
        "refused": refused[:REFUSED],
        "refused_count": totals["refuse"],
    }


def _short(why: str) -> str:
    """The drain's refusal without its hint: "emptyDir (local data would be lost)"."""
    head, _, _ = why.partition(";")
    return head + ")" if "(" in head and not head.endswith(")") else head


def _budgets(cluster: JobCluster) -> dict[str, list[Mapping[str, Any]]]:
    """Every PodDisruptionBudget of the cluster by namespace: one list, a handful of pages."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for page in cluster.list_pages("/apis/policy/v1/poddisruptionbudgets"):
        for pdb in page.items:
            out.setdefault(str((pdb.get("metadata") or {}).get("namespace", "")), []).append(pdb)
    return out
