"""Raw Kubernetes JSON for core tests: nodes, pods and workloads shaped as the API returns them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def node(
    name: str,
    group: str,
    *,
    kubelet: str = "v1.29.4",
    ready: str = "True",
    unschedulable: bool = False,
    kernel: str = "5.10.1",
    boot: str = "boot-1",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {
                "eks.amazonaws.com/nodegroup": group,
                "node-role.kubernetes.io/worker": "",
                "topology.kubernetes.io/zone": "ap-northeast-1a",
            },
        },
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "conditions": [{"type": "Ready", "status": ready}, {"type": "MemoryPressure", "status": "False"}],
            "nodeInfo": {
                "kubeletVersion": kubelet,
                "osImage": "Amazon Linux 2",
                "kernelVersion": kernel,
                "containerRuntimeVersion": "containerd://1.7.2",
                "bootID": boot,
            },
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


def container_status(
    name: str, *, ready: bool = True, restarts: int = 0, waiting: str | None = None, image: str = "app:1"
) -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {"name": name, "ready": ready, "restartCount": restarts, "state": state, "image": image}


def pod(
    namespace: str,
    name: str,
    *,
    owner: tuple[str, str] | None,
    node_name: str = "n1",
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    statuses = containers if containers is not None else [container_status("app")]
    meta: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": uid or f"uid-{namespace}-{name}",
        "creationTimestamp": "2026-11-20T00:00:00Z",
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    return {
        "metadata": meta,
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": c["name"], "image": c["image"]} for c in statuses],
        },
        "status": {"phase": phase, "podIP": "10.1.0.5", "containerStatuses": statuses},
    }


def replicaset(namespace: str, name: str, deployment: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "ownerReferences": [{"kind": "Deployment", "name": deployment, "controller": True}],
        }
    }


def deployment(
    namespace: str, name: str, *, replicas: int = 2, ready: int = 2, image: str = "app:1", generation: int = 1
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "generation": generation},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "app", "image": image}]}},
        },
        "status": {
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
        },
    }


@dataclass
class FakePage:
    items: list[dict[str, Any]]
    resource_version: str = "100"
    continue_token: str = ""


@dataclass
class DictCluster:
    """A ClusterReader over in-memory lists, paged like the API; for pure core tests."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    name: str = "test"
    context: str = "test-ctx"
    version: str = "v1.29.4"
    page_size: int = 2
    errors: dict[str, Exception] = field(default_factory=dict)
    #: What `/metrics` answers (the API server's own metrics, in Prometheus' text format).
    metrics: str = ""

    def get_raw(self, path: str, query: Any = None) -> bytes:
        if path == "/metrics":
            return self.metrics.encode()
        raise KeyError(path)

    def get_json(self, path: str, query: Any = None) -> dict[str, Any]:
        if path == "/version":
            return {"gitVersion": self.version, "major": "1", "minor": self.version.split(".")[1]}
        if path == "/api":
            return {"versions": ["v1"]}
        if path == "/apis":
            return {"groups": [{"versions": [{"groupVersion": "apps/v1"}, {"groupVersion": "policy/v1"}]}]}
        raise KeyError(path)

    def list_pages(self, path: str, query: Any = None, *, limit: int = 500) -> Any:
        resource = path.rsplit("/", 1)[-1]
        if resource in self.errors:
            raise self.errors[resource]
        items = self.objects.get(resource, [])
        for i in range(0, max(len(items), 1), self.page_size):
            yield FakePage(
                items=items[i : i + self.page_size],
                continue_token="more" if i + self.page_size < len(items) else "",
            )

    def close(self) -> None:
        return None
