"""A disruption budget that allows nothing now, over a pod on given nodes: created with the real
`kubernetes` client against the sim, as a team's manifest would put it there."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config


def hold_a_pod(kubeconfig: Path, nodes: set[str]) -> tuple[str, str]:
    """A PodDisruptionBudget (`maxUnavailable: 0`) selecting a pod that runs on one of `nodes`:
    (the budget as namespace/name, the pod as namespace/name)."""
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    pod = next(
        p
        for p in core.list_pod_for_all_namespaces().items
        if p.spec.node_name in nodes
        and p.metadata.labels
        and not any(o.kind == "DaemonSet" for o in p.metadata.owner_references or ())
    )
    namespace, labels = pod.metadata.namespace, dict(pod.metadata.labels)
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        namespace,
        {"metadata": {"name": "hold"}, "spec": {"maxUnavailable": 0, "selector": {"matchLabels": labels}}},
    )
    return f"{namespace}/hold", f"{namespace}/{pod.metadata.name}"
