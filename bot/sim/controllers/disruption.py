"""PodDisruptionBudget status, as the disruption controller computes it.

It follows the real controller's rules, because the eviction subresource
(`bot.sim.apiserver.eviction`) and so `kubectl drain` and the node-group pipeline are judged by it:
`expectedPods` is the number of matching pods for an integer `minAvailable`, else the sum of the
owning controllers' scale; `desiredHealthy` follows from minAvailable/maxUnavailable (percentages
rounded up); `currentHealthy` counts Ready pods that are not being deleted and not recently
evicted; `disruptionsAllowed = max(0, currentHealthy - desiredHealthy)`.
"""

from __future__ import annotations

import copy
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import parse_time
from bot.sim.apiserver.eviction import allowed_condition
from bot.sim.apiserver.objects import PodView, controller_ref, int_or_percent, set_condition
from bot.sim.apiserver.selectors import SelectorError, selector_from_object

Obj = dict[str, Any]

#: How long an evicted pod may linger in disruptedPods before the controller stops expecting it gone.
DELETION_TIMEOUT = 120.0


def _pods_for(api: Api, pdb: Obj) -> list[PodView]:
    """The views of the pods the PDB selects (matched on the stored labels: nothing decoded twice)."""
    ns = pdb["metadata"].get("namespace", "")
    try:
        sel = selector_from_object((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return []
    return [e.pod() for e in api.store.entries("pods", ns) if sel.matches(e.labels)]


def _scale_fields(obj: Obj) -> tuple[tuple[str, str, str] | None, int]:
    """A workload's controller reference (kind, name, uid) and spec.replicas."""
    ref = controller_ref(obj)
    owner = (str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", ""))) if ref else None
    return owner, int((obj.get("spec") or {}).get("replicas", 1))


def _scale_of(api: Api, ns: str, ref: tuple[str, str, str]) -> tuple[str, int] | None:
    """The top controller's (uid, replicas) for a pod's controller reference (kind, name, uid), as
    the PDB finders do. Each workload version is decoded once (`Entry.memo`)."""
    kind, ref_name, ref_uid = ref
    if kind == "ReplicaSet":
        rs = api.store.entry("replicasets.apps", ns, ref_name)
        if rs is None or rs.uid != ref_uid:
            return None
        owner, replicas = rs.memo("scale", _scale_fields)
        if owner and owner[0] == "Deployment":
            dep = api.store.entry("deployments.apps", ns, owner[1])
            if dep is not None and dep.uid == owner[2]:
                return dep.uid, dep.memo("scale", _scale_fields)[1]
            return None
        return rs.uid, replicas
    if kind == "StatefulSet":
        sts = api.store.entry("statefulsets.apps", ns, ref_name)
        if sts is None or sts.uid != ref_uid:
            return None
        return sts.uid, sts.memo("scale", _scale_fields)[1]
    return None


def compute_status(api: Api, pdb: Obj, now: float) -> Obj:
    """The status the disruption controller would write for `pdb` now."""
    spec = pdb.get("spec") or {}
    old = pdb.get("status") or {}
    pods = _pods_for(api, pdb)
    ns = pdb["metadata"].get("namespace", "")
    error = ""
    expected = desired = 0
    needs_scale = spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)
    if needs_scale:
        scales: dict[str, int] = {}
        for pod in pods:
            ref = pod.controller
            if ref is None:
                continue
            if ref[2] in scales:
                continue
            found = _scale_of(api, ns, ref)
            if found is None:
                error = f'found no controllers for pod "{pod.name}"'
                break
            scales[found[0]] = found[1]
        expected = sum(scales.values())
        if spec.get("maxUnavailable") is not None:
            desired = max(0, expected - int_or_percent(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = int_or_percent(spec["minAvailable"], expected, round_up=True)
    elif spec.get("minAvailable") is not None:
        desired = int(spec["minAvailable"])
        expected = len(pods)
    disrupted: dict[str, str] = {}
    for pod in pods:
        name = pod.name
        at = (old.get("disruptedPods") or {}).get(name)
        if at and not pod.deleting:
            when = parse_time(at)
            if when is not None and when + DELETION_TIMEOUT > now:
                disrupted[name] = at
    healthy = sum(1 for pod in pods if not pod.deleting and pod.name not in disrupted and pod.ready)
    status: Obj = {"observedGeneration": pdb["metadata"].get("generation", 1)}
    if error:
        status.update(
            disruptionsAllowed=0,
            currentHealthy=old.get("currentHealthy", 0),
            desiredHealthy=old.get("desiredHealthy", 0),
            expectedPods=old.get("expectedPods", 0),
        )
        status["conditions"] = copy.deepcopy(old.get("conditions") or [])
        set_condition(
            status,
            {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": error,
                "observedGeneration": status["observedGeneration"],
            },
            now,
        )
        return status
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    if disrupted:
        status["disruptedPods"] = disrupted
    status.update(
        disruptionsAllowed=allowed, currentHealthy=healthy, desiredHealthy=desired, expectedPods=expected
    )
    status["conditions"] = copy.deepcopy(old.get("conditions") or [])
    allowed_condition(status, now)
    return status
