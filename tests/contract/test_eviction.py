"""Eviction through the eviction API: refused (429) while a PodDisruptionBudget allows no disruption,
accepted once it does."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.errors import EvictionBlocked
from tests.contract.workloads import pdb, pod_names, start_web
from tests.support.backends import TIMEOUT, Backend
from tests.support.testbed import wait_until

BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


def _pdb_settled(policy: client.PolicyV1Api, ns: str, allowed: int) -> bool:
    budget = policy.read_namespaced_pod_disruption_budget("web", ns)
    status = budget.status
    return bool(
        status
        and status.observed_generation == budget.metadata.generation
        and status.current_healthy == 2
        and status.disruptions_allowed == allowed
    )


def test_eviction_is_refused_by_a_disruption_budget_then_allowed(backend: Backend) -> None:
    ns = backend.namespace
    core, policy = client.CoreV1Api(backend.api), client.PolicyV1Api(backend.api)
    group = f"ng-{uuid.uuid4().hex[:4]}"
    backend.add_nodes(group, 2, version="v1.29.4")
    start_web(backend, group)
    policy.create_namespaced_pod_disruption_budget(ns, pdb("web", minAvailable=2))
    wait_until(lambda: _pdb_settled(policy, ns, 0), timeout=TIMEOUT, what="PDB status computed")
    victim = pod_names(backend)[0]
    bot = backend.bot()

    with pytest.raises(EvictionBlocked) as blocked:
        bot.evict(ns, victim)
    assert blocked.value.status == 429
    assert BLOCKED in blocked.value.user_message
    assert "The disruption budget web needs 2 healthy pods and has 2 currently" in blocked.value.user_message

    # What the official client (and so kubectl drain) sees: 429 and a Status naming the cause.
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": ns}}
    with pytest.raises(ApiException) as raw:
        core.create_namespaced_pod_eviction(victim, ns, body)
    assert raw.value.status == 429
    status = json.loads(raw.value.body)
    assert (status["reason"], status["message"], status["code"]) == ("TooManyRequests", BLOCKED, 429)
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
        }
    ]

    policy.patch_namespaced_pod_disruption_budget("web", ns, {"spec": {"minAvailable": 1}})
    wait_until(lambda: _pdb_settled(policy, ns, 1), timeout=TIMEOUT, what="PDB allows one")
    assert bot.evict(ns, victim) is True
    wait_until(lambda: victim not in pod_names(backend), timeout=TIMEOUT, what=f"{victim} gone")
    assert bot.evict(ns, "no-such-pod") is False  # 404: already gone

    # Once the replacement is ready the budget allows one again; what an accepted eviction returns.
    wait_until(lambda: _pdb_settled(policy, ns, 1), timeout=TIMEOUT, what="replacement ready")
    second = pod_names(backend)[0]
    body["metadata"]["name"] = second
    response = core.create_namespaced_pod_eviction(second, ns, body, _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
