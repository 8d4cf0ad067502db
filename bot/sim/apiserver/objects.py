"""Small helpers over raw Kubernetes JSON: identities, names, conditions, quantities, pod states.

Everything the simulator invents (UIDs, name suffixes, IPs) comes from one seeded `random.Random`,
so `--seed` makes a run repeatable.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import random
import uuid
from typing import Any

from bot.sim.apiserver.clock import parse_time, rfc3339

Obj = dict[str, Any]

#: The alphabet Kubernetes uses for generated name suffixes (no vowels, no look-alikes).
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class Ids:
    """Seeded sources of UIDs, name suffixes and addresses."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self._pod_ip = 0
        self._svc_ip = 10

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(SAFE_ALPHABET) for _ in range(n))

    def hex(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def pod_ip(self) -> str:
        self._pod_ip += 1
        n = self._pod_ip
        return f"10.{100 + (n >> 16) % 100}.{(n >> 8) & 255}.{n & 255 or 1}"

    def service_ip(self) -> str:
        self._svc_ip += 1
        n = self._svc_ip
        return f"172.20.{(n >> 8) & 255}.{n & 255}"


_ATOMS = (str, int, float, bool, type(None))


def clone(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), several times quicker than
    `copy.deepcopy`, which the API server called for every write; anything else is deep-copied."""
    kind = type(value)
    if kind is dict:
        return {k: clone(v) for k, v in value.items()}
    if kind is list:
        return [clone(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def template_hash(template: Any) -> str:
    """A stable short hash of a pod template, spelled like `pod-template-hash` values (e.g. 5cdd6b8668)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    number = str(int.from_bytes(digest[:4], "big"))
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in number)


def meta(obj: Obj) -> Obj:
    m = obj.setdefault("metadata", {})
    assert isinstance(m, dict)
    return m


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("annotations") or {})


def controller_ref(obj: Obj) -> Obj | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_ref(owner: Obj, api_version: str, kind: str) -> Obj:
    m = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(status: Obj, kind: str) -> Obj | None:
    for c in status.get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def mark_disruption_target(pod: Obj, reason: str, message: str, now: float) -> Obj:
    """Give a pod the `DisruptionTarget` condition it gets before it is deleted for a disruption (an
    eviction, a NoExecute taint, the pod GC); returns its status."""
    status: Obj = pod.setdefault("status", {})
    set_condition(
        status,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
        },
        now,
    )
    return status


def set_condition(status: Obj, new: Obj, now: float, *, update_time: bool = False) -> None:
    """Set a condition, keeping lastTransitionTime when the status did not change."""
    conditions = list(status.get("conditions") or [])
    stamp = rfc3339(now)
    for i, c in enumerate(conditions):
        if c.get("type") == new["type"]:
            merged = {**c, **new}
            if c.get("status") == new.get("status"):
                merged["lastTransitionTime"] = c.get("lastTransitionTime", stamp)
            else:
                merged["lastTransitionTime"] = stamp
            if update_time:
                same = all(c.get(k) == new.get(k) for k in ("status", "reason", "message"))
                merged["lastUpdateTime"] = c.get("lastUpdateTime", stamp) if same else stamp
            conditions[i] = merged
            status["conditions"] = conditions
            return
    fresh = {**new, "lastTransitionTime": stamp}
    if update_time:
        fresh["lastUpdateTime"] = stamp
    conditions.append(fresh)
    status["conditions"] = conditions


def parse_quantity(value: Any) -> float:
    """Kubernetes quantities (`500m`, `2`, `16Gi`, `1.5G`) as floats (cores or bytes)."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    suffixes = {
        "Ki": 1024.0,
        "Mi": 1024.0**2,
        "Gi": 1024.0**3,
        "Ti": 1024.0**4,
        "Pi": 1024.0**5,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "P": 1e15,
        "m": 1e-3,
        "n": 1e-9,
        "u": 1e-6,
    }
    for suffix in sorted(suffixes, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * suffixes[suffix]
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """maxSurge/maxUnavailable/minAvailable: an int, or a percentage of `total` rounded as Kubernetes does."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = float(text[:-1])
        exact = pct * total / 100.0
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


# ---- pods --------------------------------------------------------------------------------------


def pod_ready(pod: Obj) -> bool:
    c = condition(pod.get("status") or {}, "Ready")
    return bool(c and c.get("status") == "True")


def pod_terminating(pod: Obj) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp"))


def pod_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_active(pod: Obj) -> bool:
    """Counted by controllers: not terminal and not being deleted."""
    return not pod_terminating(pod) and not pod_terminal(pod)


def pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    c = condition(pod.get("status") or {}, "Ready")
    if not c or c.get("status") != "True":
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time(c.get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds <= now


def is_daemonset_pod(pod: Obj) -> bool:
    ref = controller_ref(pod)
    return bool(ref and ref.get("kind") == "DaemonSet")


def is_mirror_pod(pod: Obj) -> bool:
    return "kubernetes.io/config.mirror" in annotations_of(pod)


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        effect = t.get("effect", "")
        if effect and effect != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        key = t.get("key", "")
        if op == "Exists":
            if not key or key == taint.get("key"):
                return True
            continue
        if key == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_ready(node: Obj) -> bool:
    c = condition(node.get("status") or {}, "Ready")
    return bool(c and c.get("status") == "True")


class PodView:
    """What the controllers read of one stored pod version, decoded once (see `Entry.pod`).

    Controllers count and rank a workload's pods on every sync; decoding each ~5 KB pod body per
    sync made their work proportional to every pod they own × every change. A view is built once
    per stored version (entries are immutable) and holds only small, immutable values.
    """

    __slots__ = (
        "active",
        "controller",
        "created",
        "daemon_node",
        "deleting",
        "name",
        "node_name",
        "phase",
        "ready",
        "ready_since",
        "restarts",
        "terminal",
    )

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        self.name: str = str(meta.get("name", ""))
        self.deleting: bool = bool(meta.get("deletionTimestamp"))
        self.phase: str = str(status.get("phase", "") or "")
        ready = condition(status, "Ready")
        self.ready: bool = bool(ready and ready.get("status") == "True")
        #: lastTransitionTime of a True Ready condition (None if not Ready or unset).
        self.ready_since: float | None = (
            parse_time(ready.get("lastTransitionTime")) if self.ready and ready else None
        )
        self.restarts: int = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or [])
        self.created: float = parse_time(meta.get("creationTimestamp")) or 0.0
        self.node_name: str = str(spec.get("nodeName") or "")
        self.daemon_node: str = daemon_node(pod)
        ref = controller_ref(pod)
        #: The controller reference as (kind, name, uid), or None.
        self.controller: tuple[str, str, str] | None = (
            (str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", ""))) if ref else None
        )
        self.terminal: bool = self.phase in ("Succeeded", "Failed")
        #: As `pod_active`: not terminal and not being deleted.
        self.active: bool = not self.deleting and not self.terminal

    def available(self, min_ready_seconds: int, now: float) -> bool:
        """As `pod_available`."""
        if not self.ready:
            return False
        if min_ready_seconds <= 0:
            return True
        return self.ready_since is not None and self.ready_since + min_ready_seconds <= now


def required_node_terms(affinity: Obj) -> list[Obj]:
    """The nodeSelectorTerms of an affinity's required node affinity (a node must match one)."""
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return list((required or {}).get("nodeSelectorTerms") or [])


def daemon_node(pod: Obj) -> str:
    """The node a DaemonSet pod is for: its nodeName, else the `metadata.name` node affinity."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    for term in required_node_terms(spec.get("affinity") or {}):
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return ""
