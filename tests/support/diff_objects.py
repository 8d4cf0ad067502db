"""Snapshot pairs for the diff tests: a small cluster before and after a clean upgrade."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from bot.core.snapshots.projection import take_snapshot
from tests.support.kube_objects import container_status, deployment, node, pod, replicaset
from tests.support.wire_cluster import WireCluster

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def base_objects() -> dict[str, list[dict[str, Any]]]:
    return {
        "namespaces": [{"metadata": {"name": n}} for n in ("kube-system", "shop", "logging")],
        "nodes": [node("old-1", "ng-shared"), node("old-2", "ng-shared"), node("log-1", "logging")],
        "replicasets": [replicaset("shop", "web-1", "web")],
        "deployments": [deployment("shop", "web", replicas=2, ready=2)],
        "pods": [
            pod(
                "shop",
                "web-1-a",
                owner=("ReplicaSet", "web-1"),
                node_name="old-1",
                containers=[
                    container_status("app"),
                    container_status("vault-agent"),
                    container_status("istio-proxy"),
                ],
            ),
            pod(
                "shop",
                "web-1-b",
                owner=("ReplicaSet", "web-1"),
                node_name="old-2",
                containers=[
                    container_status("app"),
                    container_status("vault-agent"),
                    container_status("istio-proxy"),
                ],
            ),
            pod("kube-system", "kube-proxy-1", owner=("DaemonSet", "kube-proxy"), node_name="old-1"),
            pod("logging", "fluentd-1", owner=("DaemonSet", "fluentd"), node_name="log-1"),
        ],
    }


def snap(objects: dict[str, list[dict[str, Any]]], label: str, version: str = "v1.29.4") -> dict[str, Any]:
    s = take_snapshot(WireCluster(objects=objects, version=version), label=label, taken_by="U1", now=NOW)
    # Stored snapshots go through JSON; compare what the diff will really see.
    return json.loads(json.dumps(s))


def upgraded() -> dict[str, list[dict[str, Any]]]:
    """A clean upgrade: ng-shared replaced with v1.30 nodes, pods rescheduled, nothing broken."""
    o = copy.deepcopy(base_objects())
    o["nodes"] = [
        node("new-1", "ng-shared", kubelet="v1.30.2", kernel="6.1.0"),
        node("new-2", "ng-shared", kubelet="v1.30.2", kernel="6.1.0"),
        node("log-1", "logging"),
    ]
    o["replicasets"] = [replicaset("shop", "web-2", "web")]
    o["pods"] = [
        pod(
            "shop",
            "web-2-x",
            owner=("ReplicaSet", "web-2"),
            node_name="new-1",
            containers=[
                container_status("app"),
                container_status("vault-agent"),
                container_status("istio-proxy"),
            ],
        ),
        pod(
            "shop",
            "web-2-y",
            owner=("ReplicaSet", "web-2"),
            node_name="new-2",
            containers=[
                container_status("app"),
                container_status("vault-agent"),
                container_status("istio-proxy"),
            ],
        ),
        pod("kube-system", "kube-proxy-9", owner=("DaemonSet", "kube-proxy"), node_name="new-1"),
        pod("logging", "fluentd-1", owner=("DaemonSet", "fluentd"), node_name="log-1"),
    ]
    return o
