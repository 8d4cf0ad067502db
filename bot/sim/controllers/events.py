"""Kubernetes Events written by the simulated components, aggregated the way client-go's recorder does.

An event names its involved object, a reason and a message, the reporting component and host.
The same (object, reason, message, component) repeated bumps `count` and `lastTimestamp` of one
Event instead of adding another — so `kubectl describe pod` shows "x12 over 5m" for a
CrashLoopBackOff, as on a real cluster. Events expire after an hour of simulated time.
"""

from __future__ import annotations

import contextlib
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import parse_time, rfc3339
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.resources import KINDS_BY_KEY

Obj = dict[str, Any]

EVENT_TTL = 3600.0
EVENTS = KINDS_BY_KEY["events"]

_API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
}


class Recorder:
    def __init__(self, api: Api) -> None:
        self.api = api
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self.enabled = True

    def emit(
        self,
        involved: Obj,
        kind: str,
        event_type: str,
        reason: str,
        message: str,
        *,
        component: str,
        host: str = "",
        field_path: str = "",
        times: int = 1,
    ) -> None:
        """Record that `reason` happened to `involved` (`times` times, the last now): a new Event,
        or the count of the same one raised, as the kubelet's event aggregation does."""
        if not self.enabled:
            return
        m = involved.get("metadata") or {}
        uid = str(m.get("uid", ""))
        namespace = str(m.get("namespace") or "default")
        key = (uid, reason, message, component)
        now = self.api.clock.now()
        stamp = rfc3339(now)
        with self.api.store.lock:
            known = self._seen.get(key)
            if known is not None:
                existing = self.api.store.get("events", *known)
                if existing is not None:
                    existing["count"] = int(existing.get("count", 1)) + times
                    existing["lastTimestamp"] = stamp
                    with contextlib.suppress(ApiError):
                        self.api.write("events", existing)
                    return
            ref: Obj = {
                "kind": kind,
                "namespace": m.get("namespace", ""),
                "name": m.get("name", ""),
                "uid": uid,
                "apiVersion": _API_VERSIONS.get(kind, "v1"),
                "resourceVersion": str(m.get("resourceVersion", "")),
            }
            if not ref["namespace"]:
                ref.pop("namespace")
            if field_path:
                ref["fieldPath"] = field_path
            name = f"{m.get('name', 'unknown')}.{int(now * 1e9):x}{self.api.ids.hex(4)}"[:253]
            event: Obj = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "source": {"component": component, **({"host": host} if host else {})},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": times,
                "type": event_type,
                "eventTime": None,
                "reportingComponent": component,
                "reportingInstance": host,
            }
            try:
                self.api.create(EVENTS, namespace, event)
            except ApiError:
                return
            self._seen[key] = (namespace, name)

    def expire(self) -> int:
        """Delete events older than the TTL (the API server's event TTL)."""
        now = self.api.clock.now()
        gone = 0
        with self.api.store.lock:
            for e in self.api.store.entries("events"):
                last = e.memo("last-seen", _last_seen)
                if last is None:
                    last = now
                if last + EVENT_TTL < now:
                    self.api.remove_now("events", e.namespace, e.name)
                    gone += 1
            if gone:
                self._seen = {
                    k: v for k, v in self._seen.items() if self.api.store.entry("events", *v) is not None
                }
        return gone


def _last_seen(event: Obj) -> float | None:
    """When an event was last seen (decoded once per stored version: `expire` runs every 10 s)."""
    return parse_time(event.get("lastTimestamp")) or parse_time(event.get("eventTime"))
