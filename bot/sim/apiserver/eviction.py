"""The eviction subresource (`POST pods/NAME/eviction`), judged against PodDisruptionBudgets.

It follows the real API server's rules, because `kubectl drain` and the node-group pipeline are
judged by exactly these answers (the budgets' status comes from the disruption controller,
`bot.sim.controllers.disruption`):

- terminal, Pending or already-deleting pods are deleted without a PDB check; several
  matching PDBs → 500; a PDB whose status lags its generation → 429 "still being processed";
  no disruptions left → 429 "Cannot evict pod as it would violate the pod's disruption budget."
  with a `DisruptionBudget` cause; otherwise the budget is decremented, the pod gets a
  DisruptionTarget condition and is deleted gracefully. The answer is 201 with a success Status.
"""

from __future__ import annotations

from typing import Any

from bot.sim.apiserver.api import Api, DeleteOptions
from bot.sim.apiserver.clock import rfc3339
from bot.sim.apiserver.errors import ApiError, bad_request, not_found, too_many_requests
from bot.sim.apiserver.objects import mark_disruption_target, pod_ready, set_condition
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.apiserver.selectors import SelectorError, selector_from_object

Obj = dict[str, Any]

PDB = "poddisruptionbudgets.policy"
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


def matching_pdbs(api: Api, pod: Obj) -> list[Obj]:
    ns = pod["metadata"].get("namespace", "")
    labels = pod["metadata"].get("labels") or {}
    out = []
    for pdb in api.store.objects(PDB, ns):
        try:
            sel = selector_from_object((pdb.get("spec") or {}).get("selector"))
        except SelectorError:
            continue
        if sel.matches(labels):
            out.append(pdb)
    return out


def allowed_condition(status: Obj, now: float) -> None:
    """Set the DisruptionAllowed condition from `disruptionsAllowed`: the disruption controller does
    it on every sync, and an eviction that spends the last disruption does it at once."""
    allowed = int(status.get("disruptionsAllowed", 0)) > 0
    set_condition(
        status,
        {
            "type": "DisruptionAllowed",
            "status": "True" if allowed else "False",
            "observedGeneration": status.get("observedGeneration", 1),
            "reason": "SufficientPods" if allowed else "InsufficientPods",
            "message": "",
        },
        now,
    )


def evict(api: Api, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> None:
    """POST pods/{name}/eviction. Returns normally when the pod was evicted; raises ApiError otherwise."""
    if not isinstance(body, dict):
        raise bad_request("not a Eviction object")
    if (body.get("metadata") or {}).get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    options = DeleteOptions.parse(body.get("deleteOptions"), {})
    dry_run = dry_run or options.dry_run
    with api.store.lock:
        entry = api.store.entry("pods", namespace, name)
        if entry is None:
            raise not_found("pods", name)
        pod = entry.obj()
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            _delete(api, pod, options, dry_run)
            return
        pdbs = matching_pdbs(api, pod)
        if len(pdbs) > 1:
            raise ApiError(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if pdbs:
            pdb = pdbs[0]
            status = pdb.get("status") or {}
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            if not pod_ready(pod) and (
                policy == "AlwaysAllow"
                or (
                    int(status.get("currentHealthy", 0)) >= int(status.get("desiredHealthy", 0))
                    and int(status.get("desiredHealthy", 0)) > 0
                )
            ):
                _delete(api, pod, options, dry_run)
                return
            _check_and_decrement(api, pdb, name, dry_run)
        _delete(api, pod, options, dry_run)


def _refused(message: str, retry_after: int = 0) -> ApiError:
    err = too_many_requests(EVICTION_REFUSED, [{"reason": "DisruptionBudget", "message": message}])
    if retry_after and err.details is not None:
        err.details["retryAfterSeconds"] = retry_after
        err.retry_after = retry_after
    return err


def _check_and_decrement(api: Api, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    name = pdb["metadata"]["name"]
    status = dict(pdb.get("status") or {})
    if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
        raise _refused(
            f"The disruption budget {name} is still being processed by the server.", retry_after=10
        )
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        raise ApiError(
            403,
            "Forbidden",
            f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is negative',
        )
    if allowed == 0:
        cond = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
        current, desired = int(status.get("currentHealthy", 0)), int(status.get("desiredHealthy", 0))
        if (
            cond
            and cond.get("status") == "False"
            and cond.get("message")
            and cond.get("reason") == "SyncFailed"
        ):
            msg = f"The disruption budget {name} does not allow evicting pods currently because it failed sync: {cond['message']}"
        elif current <= desired:
            msg = f"The disruption budget {name} needs {desired} healthy pods and has {current} currently"
        else:
            msg = f"The disruption budget {name} does not allow evicting pods currently"
        raise _refused(msg)
    if dry_run:
        return
    now = api.clock.now()
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        allowed_condition(status, now)
    disrupted = dict(status.get("disruptedPods") or {})
    disrupted[pod_name] = rfc3339(now)
    status["disruptedPods"] = disrupted
    pdb["status"] = status
    api.write(PDB, pdb, status=True)


def _delete(api: Api, pod: Obj, options: DeleteOptions, dry_run: bool) -> None:
    m = pod["metadata"]
    if dry_run:
        return
    api.evictions.append(
        {
            "namespace": m.get("namespace", ""),
            "name": m.get("name", ""),
            "uid": m.get("uid", ""),
            "at": api.clock.now(),
        }
    )
    if not m.get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    ):
        mark_disruption_target(pod, "EvictionByEvictionAPI", "Eviction API: evicting", api.clock.now())
        api.write("pods", pod, status=True)
    api.delete(KINDS_BY_KEY["pods"], m.get("namespace", ""), m["name"], options)
