"""The status a GitOps controller would write on its objects, for the sim's `app_status` fault.

No Argo CD or Flux controller runs in the sim (nor on the real control plane the tests start):
an Application's health and sync, and a Flux Kustomization's or HelmRelease's `Ready` condition,
are what a scenario states or a fault sets. This module turns a fault's fields into that status,
in the shapes the controllers write:

- Argo CD: `status.health.status` (Healthy, Progressing, Degraded, Suspended, Missing, Unknown)
  with `status.health.message`, and `status.sync.status` (Synced, OutOfSync, Unknown);
- Flux: `status.conditions[type=Ready]` with `status` ("True"/"False"/"Unknown"), `reason` and
  `message`, and `observedGeneration`.

    {"type": "app_status", "object": {"kind": "Application", "namespace": "argocd", "name": "shop"},
     "health": "Degraded", "sync": "Synced", "message": "Deployment shop/web: Progress deadline exceeded"}
    {"type": "app_status", "object": {"kind": "Kustomization", "namespace": "flux-system", "name": "apps"},
     "ready": "False", "reason": "HealthCheckFailed", "message": "…"}
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

ARGO_KINDS = ("Application",)
FLUX_KINDS = ("Kustomization", "HelmRelease")
HEALTH = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")
SYNC = ("Synced", "OutOfSync", "Unknown")
READY = ("True", "False", "Unknown")


def status_for(obj: Obj, spec: Obj, *, now: str) -> Obj:
    """The object's status after the fault `spec` (its other status fields kept); ValueError
    names a field the kind does not take."""
    kind = str(obj.get("kind", ""))
    status = copy.deepcopy(obj.get("status") or {})
    message = str(spec.get("message", ""))
    if kind in ARGO_KINDS:
        health = str(spec.get("health", "") or (status.get("health") or {}).get("status") or "Healthy")
        sync = str(spec.get("sync", "") or (status.get("sync") or {}).get("status") or "Synced")
        if health not in HEALTH:
            raise ValueError(f"health: {health!r} is not one of {', '.join(HEALTH)}")
        if sync not in SYNC:
            raise ValueError(f"sync: {sync!r} is not one of {', '.join(SYNC)}")
        status["health"] = {"status": health, **({"message": message} if message else {})}
        status["sync"] = {**(status.get("sync") or {}), "status": sync}
        return status
    if kind in FLUX_KINDS:
        ready = str(spec.get("ready", "True"))
        if ready not in READY:
            raise ValueError(f"ready: {ready!r} is not one of {', '.join(READY)}")
        reason = str(
            spec.get("reason", "")
            or ("ReconciliationSucceeded" if ready == "True" else "ReconciliationFailed")
        )
        generation = int((obj.get("metadata") or {}).get("generation") or 1)
        condition = {
            "type": "Ready",
            "status": ready,
            "reason": reason,
            "message": message or ("Applied revision: main@sha1:0000000" if ready == "True" else reason),
            "lastTransitionTime": now,
            "observedGeneration": generation,
        }
        others = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
        status["conditions"] = [condition, *others]
        status["observedGeneration"] = generation
        return status
    raise ValueError(f"object: kind {kind!r} is not one of {', '.join(ARGO_KINDS + FLUX_KINDS)}")
