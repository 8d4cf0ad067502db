"""The eviction subresource answers exactly as the real API server does."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from bot.sim import SimCluster
from bot.sim.apiserver import eviction
from bot.sim.apiserver.errors import ApiError

Api = Callable[[SimCluster], Any]


def _evict(v1: Any, namespace: str, name: str) -> None:
    body = k8s_client.V1Eviction(metadata=k8s_client.V1ObjectMeta(name=name, namespace=namespace))
    v1.create_namespaced_pod_eviction(name, namespace, body)


def _pods(sim: SimCluster, namespace: str, app: str) -> list[str]:
    return sorted(e.name for e in sim.core.store.entries("pods", namespace) if e.labels.get("app") == app)


def test_an_eviction_the_budget_allows_deletes_the_pod_gracefully_and_spends_the_budget(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    policy = k8s_client.PolicyV1Api(kube_api(sim))
    first, second, _ = _pods(sim, "default", "web")
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 1
    _evict(v1, "default", first)
    pod = v1.read_namespaced_pod(first, "default")
    assert pod.metadata.deletion_timestamp is not None
    target = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "EvictionByEvictionAPI")
    budget = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert budget.disruptions_allowed == 0
    with pytest.raises(ApiException) as refused:
        _evict(v1, "default", second)
    assert refused.value.status == 429
    status = json.loads(refused.value.body)
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
        }
    ]


def test_the_budget_recovers_once_the_replacement_is_ready(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    policy = k8s_client.PolicyV1Api(kube_api(sim))
    first = _pods(sim, "default", "web")[0]
    _evict(v1, "default", first)
    sim.control.advance(60)
    assert first not in _pods(sim, "default", "web")
    assert len(_pods(sim, "default", "web")) == 3
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 1


def test_a_pod_matched_by_two_budgets_cannot_be_evicted_500(sim_small: SimCluster, kube_api: Api) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    sim_small.control.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web-too", "namespace": "default"},
            "spec": {"maxUnavailable": 3, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    with pytest.raises(ApiException) as several:
        _evict(v1, "default", _pods(sim_small, "default", "web")[0])
    assert several.value.status == 500
    status = json.loads(several.value.body)
    assert (
        status["message"]
        == "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    )


def test_evicting_a_pod_that_is_gone_is_404_and_a_mismatched_name_is_400(
    sim_small: SimCluster, kube_api: Api
) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    with pytest.raises(ApiException) as gone:
        _evict(v1, "default", "web-gone")
    assert gone.value.status == 404
    name = _pods(sim_small, "default", "web")[0]
    body = k8s_client.V1Eviction(metadata=k8s_client.V1ObjectMeta(name="other", namespace="default"))
    with pytest.raises(ApiException) as mismatch:
        v1.create_namespaced_pod_eviction(name, "default", body)
    assert mismatch.value.status == 400
    assert json.loads(mismatch.value.body)["message"] == "name in URL does not match name in Eviction object"


def test_a_budget_whose_status_lags_its_generation_refuses_with_retry_after(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0)
    with sim.core.store.lock:
        # Freeze the disruption controller's view by bumping the spec under the store lock and
        # evicting before it reconciles (what a client racing a PDB edit sees).
        pdb = sim.core.store.get("poddisruptionbudgets.policy", "default", "web")
        assert pdb is not None
        pdb["spec"]["maxUnavailable"] = 2
        sim.core.api.write("poddisruptionbudgets.policy", pdb)
        with pytest.raises(ApiError) as lagging:
            eviction.evict(
                sim.core.api,
                "default",
                _pods(sim, "default", "web")[0],
                {"metadata": {"name": _pods(sim, "default", "web")[0]}},
            )
    err = lagging.value
    assert err.code == 429
    assert err.details is not None
    assert (
        err.details["causes"][0]["message"]
        == "The disruption budget web is still being processed by the server."
    )
    assert err.details["retryAfterSeconds"] == 10


def test_pending_and_unready_pods_are_evicted_without_spending_the_budget(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    policy = k8s_client.PolicyV1Api(kube_api(sim))
    sim.control.inject_fault(
        {"type": "not_ready", "match": {"namespace": "default", "labels": {"app": "web"}, "container": "web"}}
    )
    sim.control.advance(5)
    # All three are unready now: none is healthy, so the budget has nothing to protect... and
    # IfHealthyBudget only lets unready pods go while the budget is met; it is not (0 < 2).
    status = policy.read_namespaced_pod_disruption_budget("web", "default").status
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed) == (0, 2, 0)
    with pytest.raises(ApiException) as refused:
        _evict(v1, "default", _pods(sim, "default", "web")[0])
    assert refused.value.status == 429
    policy.patch_namespaced_pod_disruption_budget(
        "web", "default", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    )
    sim.control.advance(1)
    _evict(v1, "default", _pods(sim, "default", "web")[0])
    assert policy.read_namespaced_pod_disruption_budget("web", "default").status.disruptions_allowed == 0
