"""The pre-flight checks against the real control plane: the structs decode what the real API
serves, the real disruption controller's status is read, and the skew rules see kwok's kubelets.

A budget with a matchExpressions selector over one replica (the real controller sets it to zero),
a fail-closed webhook whose Service has no endpoints (scoped to a kind nobody creates, so it blocks
nothing here), and a node whose kubelet is three minors behind the target.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.checks import service as checks
from bot.core.checks.preflight import kubelet_skew_allowed, minor_of
from bot.records import ClusterConfig
from tests.support.testbed import RealCluster, delete_namespace_now, fake_node, wait_until

pytestmark = pytest.mark.testbed


@pytest.fixture(scope="module")
def api(real_cluster: RealCluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(real_cluster.kubeconfig), persist_config=False)
    with api_client:
        yield api_client


def test_check_reads_the_real_apis_shapes(api: client.ApiClient, real_cluster: RealCluster) -> None:
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    admission = client.AdmissionregistrationV1Api(api)
    ns = f"check-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    version = client.VersionApi(api).get_code().git_version
    cp = minor_of(version)
    assert cp is not None, version
    target = f"1.{cp[1] + 1}"
    # As old as the control plane allows now, one minor too old once it is on the target.
    old = f"v1.{cp[1] - kubelet_skew_allowed(cp[1])}.0"
    node = f"old-{uuid.uuid4().hex[:4]}"
    core.create_node(body=fake_node(node, kubelet_version=old))
    apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "ledger"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "ledger"}},
                "template": {
                    "metadata": {"labels": {"app": "ledger", "tier": "backend"}},
                    "spec": {
                        "containers": [{"name": "ledger", "image": "registry.example.com/ledger:1"}],
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                    },
                },
            },
        },
    )
    policy.create_namespaced_pod_disruption_budget(
        ns,
        {
            "metadata": {"name": "ledger"},
            "spec": {
                "minAvailable": 1,
                "selector": {
                    "matchExpressions": [
                        {"key": "app", "operator": "In", "values": ["ledger"]},
                        {"key": "tier", "operator": "Exists"},
                    ]
                },
            },
        },
    )
    core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "policy-webhook"},
            "spec": {"selector": {"app": "nothing"}, "ports": [{"port": 443}]},
        },
    )
    hook = f"{ns}.policy.example.com"
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": ns},
            "webhooks": [
                {
                    "name": hook,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "clientConfig": {"service": {"namespace": ns, "name": "policy-webhook"}},
                    "rules": [
                        {
                            "apiGroups": ["example.com"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["widgets"],
                        }
                    ],
                }
            ],
        }
    )
    try:
        wait_until(
            lambda: policy.read_namespaced_pod_disruption_budget("ledger", ns).status.expected_pods,
            timeout=60,
            what="the disruption controller to count the ledger pod",
        )
        reader = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=real_cluster.kubeconfig))
        try:
            report = checks.run_check(reader, target=target)
        finally:
            reader.close()
        by_id: dict[str, list[tuple[str, ...]]] = {}
        for f in report.findings:
            by_id.setdefault(f.id, []).append(f.objects)
        assert (f"PodDisruptionBudget {ns}/ledger", f"Deployment {ns}/ledger") in by_id["PDB001"]
        assert (f"ValidatingWebhookConfiguration {ns}", f"Service {ns}/policy-webhook") in by_id["HOOK001"]
        assert any(f"Node {node} (kubelet {old}" in o for objs in by_id["SKEW004"] for o in objs)
        assert report.failed
    finally:
        admission.delete_validating_webhook_configuration(ns)
        delete_namespace_now(core, ns)
        core.delete_node(node)
