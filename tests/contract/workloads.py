"""Manifests and waits the contract tests share; the same on both backends."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.support.backends import GROUP_LABEL, TIMEOUT, Backend
from tests.support.testbed import wait_until

IMAGE = "nginx:1.27"


def pending_pod(name: str) -> dict[str, Any]:
    """A pod no node can take (it selects a node group that does not exist): it stays Pending."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"contract": "list"}},
        "spec": {
            "nodeSelector": {GROUP_LABEL: "no-such-group"},
            "containers": [{"name": "app", "image": IMAGE}],
        },
    }


def deployment(name: str, group: str, *, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {GROUP_LABEL: group},
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "app", "image": IMAGE}],
                },
            },
        },
    }


def pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
    }


def start_web(backend: Backend, group: str, *, replicas: int = 2) -> None:
    """Nodes of `group`, and a Deployment `web` on them with all replicas ready."""
    apps = client.AppsV1Api(backend.api)
    apps.create_namespaced_deployment(backend.namespace, deployment("web", group, replicas=replicas))
    wait_until(
        lambda: ready_replicas(backend, "web") == replicas, timeout=TIMEOUT, what=f"web {replicas} ready"
    )


def ready_replicas(backend: Backend, name: str) -> int:
    dep = client.AppsV1Api(backend.api).read_namespaced_deployment(name, backend.namespace)
    return int(dep.status.ready_replicas or 0)


def pod_names(backend: Backend, selector: str = "app=web") -> list[str]:
    pods = client.CoreV1Api(backend.api).list_namespaced_pod(backend.namespace, label_selector=selector)
    return sorted(p.metadata.name for p in pods.items if not p.metadata.deletion_timestamp)
