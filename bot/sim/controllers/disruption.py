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
from bot.sim.apiserver.objects import controller_ref, int_or_percent, pod_ready, set_condition
from bot.sim.apiserver.selectors import SelectorError, selector_from_object

Obj = dict[str, Any]

#: How long an evicted pod may linger in disruptedPods before the controller stops expecting it gone.
DELETION_TIMEOUT = 120.0


def _pods_for(api: Api, pdb: Obj) -> list[Obj]:
    ns = pdb["metadata"].get("namespace", "")
    try:
        sel = selector_from_object((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return []
    return [e.obj() for e in api.store.entries("pods", ns) if sel.matches(e.labels)]


def _scale_of(api: Api, ns: str, ref: Obj) -> tuple[str, int] | None:
    """The top controller's (uid, replicas) for a pod's controller reference, as the PDB finders do."""
    kind = ref.get("kind")
    if kind == "ReplicaSet":
        rs = api.store.get("replicasets.apps", ns, ref.get("name", ""))
        if rs is None or rs["metadata"].get("uid") != ref.get("uid"):
            return None
        owner = controller_ref(rs)
        if owner and owner.get("kind") == "Deployment":
            dep = api.store.get("deployments.apps", ns, owner.get("name", ""))
            if dep is not None and dep["metadata"].get("uid") == owner.get("uid"):
                return dep["metadata"]["uid"], int((dep.get("spec") or {}).get("replicas", 1))
            return None
        return rs["metadata"]["uid"], int((rs.get("spec") or {}).get("replicas", 1))
    if kind == "StatefulSet":
        sts = api.store.get("statefulsets.apps", ns, ref.get("name", ""))
        if sts is None or sts["metadata"].get("uid") != ref.get("uid"):
            return None
        return sts["metadata"]["uid"], int((sts.get("spec") or {}).get("replicas", 1))
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
            ref = controller_ref(pod)
            if ref is None:
                continue
            if ref.get("uid") in scales:
                continue
            found = _scale_of(api, ns, ref)
            if found is None:
                error = f'found no controllers for pod "{pod["metadata"]["name"]}"'
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
        name = pod["metadata"]["name"]
        at = (old.get("disruptedPods") or {}).get(name)
        if at and not pod["metadata"].get("deletionTimestamp"):
            when = parse_time(at)
            if when is not None and when + DELETION_TIMEOUT > now:
                disrupted[name] = at
    healthy = sum(
        1
        for pod in pods
        if not pod["metadata"].get("deletionTimestamp")
        and pod["metadata"]["name"] not in disrupted
        and pod_ready(pod)
    )
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
