"""The sim serves Argo CD Applications and Flux Kustomizations/HelmReleases (the `gitops`
scenario), with the status their controllers would write, which the `app_status` fault changes
(issue 39 item 8): read through the real `kubernetes` client and the real kubectl."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from bot.sim import SimCluster


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


def _app(api: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "argoproj.io", "v1alpha1", "argocd", "applications", name
    )
    return found


def test_the_scenario_serves_argo_cd_and_flux_objects_with_their_status(
    sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    api = kube_api(sim)
    objects = client.CustomObjectsApi(api)
    apps = objects.list_cluster_custom_object("argoproj.io", "v1alpha1", "applications")["items"]
    assert {a["metadata"]["name"]: a["status"]["health"]["status"] for a in apps} == {
        "legacy": "Degraded",
        "shop": "Healthy",
    }
    ks = objects.get_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations", "apps"
    )
    hr = objects.get_namespaced_custom_object(
        "helm.toolkit.fluxcd.io", "v2", "cache", "helmreleases", "redis"
    )
    for obj in (ks, hr):
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"


def test_kubectl_lists_them_by_their_short_names(
    sim: SimCluster, kubectl: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    out = kubectl(sim, "get", "ks,hr", "-A", "-o", "json")
    assert out.returncode == 0, out.stderr
    kinds = sorted((i["kind"], i["metadata"]["name"]) for i in json.loads(out.stdout)["items"])
    assert kinds == [("HelmRelease", "redis"), ("Kustomization", "apps")]
    out = kubectl(sim, "get", "applications.argoproj.io", "-n", "argocd", "-o", "name")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["application.argoproj.io/legacy", "application.argoproj.io/shop"]


def test_a_fault_degrades_an_application_and_clearing_it_puts_the_status_back(
    sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    api = kube_api(sim)
    fid = sim.control.inject_fault(
        {
            "type": "app_status",
            "object": {"kind": "Application", "namespace": "argocd", "name": "shop"},
            "health": "Degraded",
            "sync": "OutOfSync",
            "message": "Deployment shop/web: Progress deadline exceeded",
        }
    )
    status = _app(api, "shop")["status"]
    assert status["health"] == {
        "status": "Degraded",
        "message": "Deployment shop/web: Progress deadline exceeded",
    }
    assert status["sync"]["status"] == "OutOfSync"
    assert sim.control.clear_fault(fid)
    assert _app(api, "shop")["status"]["health"] == {"status": "Healthy"}


def test_a_fault_sets_a_flux_objects_ready_condition_through_its_status_subresource(
    sim: SimCluster, kube_api: Callable[[SimCluster], Any]
) -> None:
    objects = client.CustomObjectsApi(kube_api(sim))
    sim.control.inject_fault(
        {
            "type": "app_status",
            "object": {"kind": "HelmRelease", "namespace": "cache", "name": "redis"},
            "ready": "False",
            "reason": "UpgradeFailed",
            "message": "Helm upgrade failed for release cache/redis: timed out waiting for the condition",
        }
    )
    hr = objects.get_namespaced_custom_object(
        "helm.toolkit.fluxcd.io", "v2", "cache", "helmreleases", "redis"
    )
    ready = next(c for c in hr["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "UpgradeFailed")
    assert "timed out" in ready["message"]


def test_a_fault_on_a_kind_without_its_fields_is_refused_with_the_reason(sim: SimCluster) -> None:
    from bot.sim.apiserver.errors import ApiError

    with pytest.raises(ApiError, match="health: 'Sick' is not one of"):
        sim.control.inject_fault(
            {"type": "app_status", "object": {"kind": "Application", "namespace": "argocd", "name": "shop"},
             "health": "Sick"}
        )  # fmt: skip
    with pytest.raises(ApiError, match="not found"):
        sim.control.inject_fault(
            {
                "type": "app_status",
                "object": {"kind": "Kustomization", "namespace": "flux-system", "name": "nope"},
            }
        )
