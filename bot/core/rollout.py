"""Rollout verdicts: the same decision `kubectl rollout status` makes, on raw workload JSON.

Returns `(state, message)` where state is "done", "waiting" or "failed". Only the fields kubectl
reads are used, so the verdict on a snapshot record and on a live object agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DONE, WAITING, FAILED = "done", "waiting", "failed"


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def verdict(kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    spec = obj.get("spec", {})
    status = obj.get("status", {})
    name = meta.get("name", "?")
    generation = _int(meta.get("generation"))
    observed = _int(status.get("observedGeneration"))
    if kind == "Deployment":
        if generation > observed:
            return WAITING, "waiting for the deployment spec update to be observed"
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
                return FAILED, f'deployment "{name}" exceeded its progress deadline'
        replicas = _int(spec.get("replicas", 1))
        updated = _int(status.get("updatedReplicas"))
        if updated < replicas:
            return WAITING, f"{updated} of {replicas} new replicas have been updated"
        if _int(status.get("replicas")) > updated:
            return WAITING, f"{_int(status.get('replicas')) - updated} old replicas are pending termination"
        available = _int(status.get("availableReplicas"))
        if available < updated:
            return WAITING, f"{available} of {updated} updated replicas are available"
        return DONE, f'deployment "{name}" successfully rolled out'
    if kind not in ("DaemonSet", "StatefulSet"):
        raise ValueError(f"no rollout verdict for kind {kind}")
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return DONE, "rollout status is only available for RollingUpdate strategy type"
    if kind == "DaemonSet":
        if generation > observed:
            return WAITING, "waiting for the daemon set spec update to be observed"
        desired = _int(status.get("desiredNumberScheduled"))
        updated = _int(status.get("updatedNumberScheduled"))
        if updated < desired:
            return WAITING, f"{updated} out of {desired} new pods have been updated"
        available = _int(status.get("numberAvailable"))
        if available < desired:
            return WAITING, f"{available} of {desired} updated pods are available"
        return DONE, f'daemon set "{name}" successfully rolled out'
    # A StatefulSet.
    if observed == 0 or generation > observed:
        return WAITING, "waiting for statefulset spec update to be observed"
    replicas = _int(spec.get("replicas", 1))
    ready = _int(status.get("readyReplicas"))
    if ready < replicas:
        return WAITING, f"{replicas - ready} pods are not ready"
    partition = _int((strategy.get("rollingUpdate") or {}).get("partition"))
    if partition > 0:
        if _int(status.get("updatedReplicas")) < replicas - partition:
            return WAITING, "waiting for partitioned roll out to finish"
        return DONE, "partitioned roll out complete"
    if status.get("updateRevision") != status.get("currentRevision"):
        return WAITING, "waiting for statefulset rolling update to complete"
    return DONE, "statefulset rolling update complete"
