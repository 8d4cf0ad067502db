"""Raw Kubernetes JSON for the watch core's tests: nodes, pods, workloads and events as the API sends them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.watches.spec import StopRules, Target, WatchSpec

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GROUP_LABEL = "eks.amazonaws.com/nodegroup"


def at(minutes: float = 0, seconds: float = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec(**changes: Any) -> WatchSpec:
    values: dict[str, Any] = {"cluster": "prod", "node_group_labels": (GROUP_LABEL,), "started_at": T0}
    values.update(changes)
    return WatchSpec(**values)


def target_spec(
    version: str = "v1.30.2",
    groups: tuple[str, ...] = ("ng-a",),
    settle: timedelta = timedelta(minutes=5),
    **changes: Any,
) -> WatchSpec:
    return spec(
        target=Target(nodegroups=groups, kubelet_version=version, settle=settle),
        stop=changes.pop("stop", StopRules()),
        **changes,
    )


def node(
    name: str,
    group: str = "ng-a",
    *,
    kubelet: str = "v1.29.4",
    ready: bool = True,
    cordoned: bool = False,
    uid: str | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": stamp(T0 - timedelta(days=3)),
            "labels": {GROUP_LABEL: group, "kubernetes.io/hostname": name},
        },
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
            "nodeInfo": {"kubeletVersion": kubelet, "bootID": "b"},
        },
    }


def _owner(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def pod(
    name: str,
    namespace: str = "shop",
    *,
    deployment: str | None = None,
    daemonset: str | None = None,
    statefulset: str | None = None,
    job: str | None = None,
    node_name: str = "n1",
    phase: str = "Running",
    ready: bool = True,
    waiting: str | None = None,
    terminated: str | None = None,
    exit_code: int = 1,
    restarts: int = 0,
    init: list[dict[str, Any]] | None = None,
    created: datetime = T0,
    deleted: datetime | None = None,
    unschedulable: bool = False,
    uid: str | None = None,
) -> dict[str, Any]:
    labels: dict[str, str] = {"app": name}
    owners: list[dict[str, Any]] = []
    if deployment:
        labels["pod-template-hash"] = "5d8f7c9b6"
        owners.append(_owner("ReplicaSet", f"{deployment}-5d8f7c9b6"))
    elif daemonset:
        owners.append(_owner("DaemonSet", daemonset))
    elif statefulset:
        owners.append(_owner("StatefulSet", statefulset))
    elif job:
        owners.append({"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True})
    state: dict[str, Any] = {"running": {"startedAt": stamp(created)}}
    if waiting:
        state = {"waiting": {"reason": waiting, "message": f"{waiting} for container"}}
    elif terminated:
        state = {"terminated": {"reason": terminated, "exitCode": exit_code}}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "resourceVersion": "7",
        "creationTimestamp": stamp(created),
        "labels": labels,
        "ownerReferences": owners,
    }
    if deleted is not None:
        metadata["deletionTimestamp"] = stamp(deleted)
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {"name": "app", "ready": ready, "restartCount": restarts, "state": state, "image": "app:1"}
        ],
    }
    if init is not None:
        status["initContainerStatuses"] = init
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
        ]
        status.pop("containerStatuses")
    return {
        "metadata": metadata,
        "spec": {"nodeName": "" if unschedulable else node_name, "containers": [{"name": "app"}]},
        "status": status,
    }


def crashing(name: str, namespace: str = "shop", **kw: Any) -> dict[str, Any]:
    return pod(name, namespace, ready=False, waiting="CrashLoopBackOff", restarts=kw.pop("restarts", 3), **kw)


def deployment(
    name: str,
    namespace: str = "shop",
    *,
    generation: int = 1,
    observed: int | None = None,
    replicas: int = 3,
    updated: int | None = None,
    available: int | None = None,
    total: int | None = None,
) -> dict[str, Any]:
    updated = replicas if updated is None else updated
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": generation},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app"}]}}},
        "status": {
            "observedGeneration": generation if observed is None else observed,
            "replicas": updated if total is None else total,
            "updatedReplicas": updated,
            "readyReplicas": replicas if available is None else available,
            "availableReplicas": replicas if available is None else available,
        },
    }


def warning(
    name: str, reason: str, *, namespace: str = "shop", count: int = 1, when: datetime = T0
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-ev-{name}"},
        "type": "Warning",
        "reason": reason,
        "message": f"{reason} happened",
        "count": count,
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "p"},
        "lastTimestamp": stamp(when),
    }


def vault_pod(name: str, *, agent_ready: bool) -> dict[str, Any]:
    raw = pod(name, "payments", deployment="payments-worker", ready=agent_ready)
    raw["metadata"]["annotations"] = {"vault.hashicorp.com/agent-inject": "true", "unrelated": "x" * 500}
    statuses = raw["status"]["containerStatuses"]
    statuses[0]["ready"] = True
    statuses.append(
        {
            "name": "vault-agent",
            "ready": agent_ready,
            "restartCount": 0,
            "state": {"running": {}},
            "image": "v",
        }
    )
    return raw
