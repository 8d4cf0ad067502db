"""A snapshot lists each kind once (issue 45): the old API uses of the applied kinds it lists
anyway (Deployments, PDBs, webhooks, CRDs) are found in the same pass (`projection._Lists`), not
by `api_uses` listing those kinds a second time."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.adapters.kube import Cluster
from bot.core.snapshots.projection import take_snapshot
from bot.records import ClusterConfig
from bot.sim import SimCluster

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class CountingReader:
    """The kube adapter as the snapshot reads it, each list it makes counted by path."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.lists: Counter[str] = Counter()
        self.name, self.context = cluster.name, cluster.context

    def get_json(self, path: str, query: Any = None) -> dict[str, Any]:
        return self.cluster.get_json(path, query)

    def get_raw(self, path: str, query: Any = None) -> bytes:
        return self.cluster.get_raw(path, query)

    def list_pages(self, path: str, query: Any = None, **options: Any) -> Any:
        self.lists[path] += 1
        return self.cluster.list_pages(path, query, **options)

    def map_pages(self, path: str, query: Any = None, **options: Any) -> Any:
        self.lists[path] += 1
        return self.cluster.map_pages(path, query, **options)

    def close(self) -> None:
        self.cluster.close()


def deployment(name: str, last_applied: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {LAST_APPLIED: json.dumps({**last_applied, "metadata": {"name": name}})},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
            },
        },
    }


def test_the_applied_kinds_the_snapshot_lists_are_listed_once_and_their_old_api_uses_kept(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory("small", speed=0.0, seed=1)
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim)))
    path = "/apis/apps/v1/namespaces/default/deployments"
    cluster.send_json(
        "POST", path, deployment("legacy", {"apiVersion": "extensions/v1beta1", "kind": "Deployment"})
    )
    cluster.send_json("POST", path, deployment("current", {"apiVersion": "apps/v1", "kind": "Deployment"}))
    reader = CountingReader(cluster)
    try:
        snap = take_snapshot(reader, label="x", taken_by="U1", now=datetime.now(UTC))  # type: ignore[arg-type]
    finally:
        reader.close()
    assert {p: n for p, n in reader.lists.items() if n > 1} == {}
    assert reader.lists["/apis/apps/v1/deployments"] == 1
    found = {
        (use["manifest"]["metadata"]["name"], use.get("last_applied", {}).get("apiVersion"))
        for use in snap["api_uses"]["applied"]
        if use["manifest"]["kind"] == "Deployment"
    }
    assert ("legacy", "extensions/v1beta1") in found
    assert not {name for name, _ in found} & {"current"}
    assert snap["gaps"] == []
