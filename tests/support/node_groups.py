"""The cloud pipeline's part of a node-group replacement, played by a test through the real API.

What an EKS-style managed node group update does: new nodes of the new version join, the old ones
are cordoned, their pods evicted through the eviction API one by one (the API enforces the
PodDisruptionBudgets: a 429 means wait for the replacement pod), and the drained nodes removed.
DaemonSet pods are skipped, as `kubectl drain --ignore-daemonsets` and the cloud's drain skip them.
It uses the official client as cluster admin: it is the cloud, not the bot.
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.testbed import wait_until

TIMEOUT = 90.0


def replace_node_group(
    api: client.ApiClient,
    old: list[str],
    *,
    add_nodes: Callable[[int], list[str]],
    remove_node: Callable[[str], None],
    timeout: float = TIMEOUT,
) -> list[str]:
    """Join as many new nodes as `old`, cordon and drain the old ones, remove them; returns the new."""
    core = client.CoreV1Api(api)
    new = add_nodes(len(old))
    for name in old:
        core.patch_node(name, {"spec": {"unschedulable": True}})
    for name in old:
        for pod in _drainable(core, name):
            wait_until(
                lambda p=pod: _evict(core, p.metadata.namespace, p.metadata.name),
                timeout=timeout,
                what=f"eviction of {pod.metadata.namespace}/{pod.metadata.name}",
            )
        wait_until(lambda n=name: not _drainable(core, n), timeout=timeout, what=f"{name} drained")
        remove_node(name)
    return new


def _drainable(core: client.CoreV1Api, node: str) -> list[client.V1Pod]:
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    return [
        p
        for p in pods
        if not any(ref.kind == "DaemonSet" and ref.controller for ref in p.metadata.owner_references or [])
    ]


def _evict(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    try:
        core.create_namespaced_pod_eviction(name, namespace, body)
        return True
    except ApiException as exc:
        if exc.status == 429:  # a PodDisruptionBudget allows no disruption yet
            return False
        if exc.status == 404:  # already gone
            return True
        raise
