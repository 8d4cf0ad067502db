"""`Writes`: the bot's writes, the few kubectl makes for the same job, on raw JSON: cordon and
uncordon (strategic merge patch of `spec.unschedulable`), node labels and Events, eviction through
the `eviction` subresource (a 429 from a PodDisruptionBudget is `EvictionBlocked`, to be retried),
pod deletion, rollout restart (the `kubectl.kubernetes.io/restartedAt` template annotation) and
`set image`."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.adapters.kube.pages import Lists
from bot.errors import (
    ClusterError,
    RolloutRefused,
)

#: The annotation `kubectl rollout restart` sets on the pod template.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
#: Where Events about Nodes (cluster-scoped) are recorded, as the kubelet does.
NODE_EVENTS_NAMESPACE = "default"
EVENT_COMPONENT = "upgrade-bot"


#: `restart_workload`'s kinds (as plans and kubectl write them) → their apps/v1 resource.
_WORKLOAD_RESOURCES = {
    "deployment": "deployments",
    "daemonset": "daemonsets",
    "statefulset": "statefulsets",
}


def _dry(dry_run: bool) -> dict[str, str] | None:
    """The query of a server-side dry run: admission and validation run, nothing is persisted."""
    return {"dryRun": "All"} if dry_run else None


class Writes(Lists):
    """Lists, with the bot's writes."""

    def cordon(
        self, node: str, *, dry_run: bool = False, annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Mark a node unschedulable (`kubectl cordon`); returns the node. Idempotent.

        `annotations` are set in the same patch (who cordoned it and why: bot.core.jobs.trail), so
        the node is never cordoned without them. `dry_run` asks the server to validate the patch
        and answer as if applied (`dryRun=All`), persisting nothing."""
        body: dict[str, Any] = {"spec": {"unschedulable": True}}
        if annotations:
            body["metadata"] = {"annotations": dict(annotations)}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def uncordon(
        self, node: str, *, dry_run: bool = False, remove_annotations: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Make a node schedulable again (`kubectl uncordon`); returns the node. Idempotent.

        kubectl's two-way patch removes the field (false is its zero value), so this does too;
        `remove_annotations` go in the same patch (a null removes a key)."""
        body: dict[str, Any] = {"spec": {"unschedulable": None}}
        if remove_annotations:
            body["metadata"] = {"annotations": dict.fromkeys(remove_annotations)}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def label_node(
        self, node: str, labels: Mapping[str, str | None], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Set (a value) or remove (None) labels of a node in one strategic merge patch, as
        `kubectl label node NODE key=value` / `key-` do; returns the node. Idempotent."""
        body: dict[str, Any] = {"metadata": {"labels": dict(labels)}}
        return self.send_json(
            "PATCH", f"/api/v1/nodes/{node}", body, content_type=STRATEGIC_MERGE, query=_dry(dry_run)
        )

    def node_event(
        self, node: str, *, uid: str, name: str, reason: str, message: str, action: str, at: datetime
    ) -> bool:
        """Record a core/v1 Event about a Node, where `kubectl describe node` finds it: namespace
        `default` (where the kubelet records node events) and the Node's UID in involvedObject.
        True when recorded; False when an Event of that `name` exists already (the same one,
        recorded before a crash)."""
        stamp = at.astimezone(UTC)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": NODE_EVENTS_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid},
            "reason": reason,
            "message": message,
            "type": "Normal",
            "action": action,
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": socket.gethostname(),
            "firstTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        if not uid:
            del body["involvedObject"]["uid"]
        try:
            self.send_json("POST", f"/api/v1/namespaces/{NODE_EVENTS_NAMESPACE}/events", body)
        except ClusterError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def evict(self, namespace: str, pod: str, *, uid: str = "", dry_run: bool = False) -> bool:
        """Evict a pod through the eviction API, which enforces its PodDisruptionBudgets.

        True when the eviction was accepted, False when the pod was already gone (404) or, with
        `uid`, is no longer that pod (409: a StatefulSet pod recreated under the same name — the
        UID precondition keeps the eviction from hitting the new one). Raises EvictionBlocked on
        429 (a budget allows no disruption now: retry later); any other refusal (500 when several
        budgets select the pod, 403) is a ClusterError. `dry_run` is the server's `dryRun=All`:
        the budgets are checked, nothing is evicted.
        """
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        }
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}
        try:
            self.send_json(
                "POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", body, query=_dry(dry_run)
            )
        except ClusterError as exc:
            if exc.status == 404 or (uid and exc.status == 409):
                return False
            raise
        return True

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, dry_run: bool = False, grace_seconds: int | None = None
    ) -> bool:
        """Delete one pod, bypassing its PodDisruptionBudgets (only when people chose it).

        The UID precondition makes the delete hit exactly the pod that was decided on, never a
        pod recreated under the same name. `grace_seconds` 0 is `kubectl delete --grace-period=0
        --force`: the object goes at once, without the kubelet's confirmation (a pod stuck
        Terminating on a dead node); None keeps the pod's own grace period. True when the delete
        was accepted; False when the pod was already gone (404) or is another pod now (409).
        """
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
        }
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self.send_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body, query=_dry(dry_run))
        except ClusterError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to `node` (raw dicts: a node holds about 110), as `kubectl drain` lists them."""
        pods: list[dict[str, Any]] = []
        for page in self.list_pages("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}):
            pods.extend(page.items)
        return pods

    def rollout_restart(self, namespace: str, name: str, *, at: datetime) -> dict[str, Any]:
        """`kubectl rollout restart deployment/NAME`: stamp the pod template so every pod is replaced.

        `at` is the restart time (RFC 3339 in the annotation, as kubectl writes it). A paused
        Deployment is refused, as kubectl refuses it: the restart would not start until resumed.
        Returns the patched Deployment.
        """
        return self.restart_workload("deployment", namespace, name, at=at)

    def restart_workload(
        self, kind: str, namespace: str, name: str, *, at: datetime, dry_run: bool = False
    ) -> dict[str, Any]:
        """`kubectl rollout restart KIND/NAME` for a deployment, daemonset or statefulset.

        As `rollout_restart`; `dry_run` is the server's `dryRun=All` (validated, not persisted).
        Returns the patched (or, dry, the would-be) workload.
        """
        resource = _WORKLOAD_RESOURCES.get(kind.lower())
        if resource is None:
            raise ValueError(f"rollout restart: unknown workload kind {kind!r}")
        path = f"/apis/apps/v1/namespaces/{namespace}/{resource}/{name}"
        current = self.get_json(path)
        if resource == "deployments" and (current.get("spec") or {}).get("paused"):
            raise RolloutRefused(
                f"cluster {self.name}: deployment {namespace}/{name} is paused; resume it before restarting",
                cluster=self.name,
            )
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
        return self.send_json("PATCH", path, patch, content_type=STRATEGIC_MERGE, query=_dry(dry_run))

    def set_image(
        self, kind: str, namespace: str, name: str, *, container: str, image: str, dry_run: bool = False
    ) -> dict[str, Any]:
        """`kubectl set image KIND/NAME CONTAINER=IMAGE` for a deployment, daemonset or statefulset:
        a strategic merge patch of the one container (containers merge by name). Returns the
        patched (or, dry, the would-be) workload."""
        resource = _WORKLOAD_RESOURCES.get(kind.lower())
        if resource is None:
            raise ValueError(f"set image: unknown workload kind {kind!r}")
        path = f"/apis/apps/v1/namespaces/{namespace}/{resource}/{name}"
        patch = {"spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}}
        return self.send_json("PATCH", path, patch, content_type=STRATEGIC_MERGE, query=_dry(dry_run))
