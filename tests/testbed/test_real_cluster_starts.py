"""The testbed's control plane is a working cluster: the real `kubernetes` client and kubectl talk
to it, RBAC and service-account tokens are enforced, kwok's fake nodes turn Ready, and the real
scheduler and controllers place a Deployment's pods on them, which kwok then runs.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.support.testbed import RealCluster, delete_namespace_now, fake_node, pins, wait_until

pytestmark = pytest.mark.testbed

# Fake nodes and pods usually settle within a second or two; this leaves room on a loaded machine.
TIMEOUT = 60.0


@pytest.fixture
def api(real_cluster: RealCluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(real_cluster.kubeconfig), persist_config=False)
    with api_client:
        yield api_client


@pytest.fixture
def node_name(api: client.ApiClient) -> Iterator[str]:
    """A kwok fake node, Ready, removed afterwards."""
    core = client.CoreV1Api(api)
    name = f"kwok-{uuid.uuid4().hex[:8]}"
    core.create_node(body=fake_node(name))
    wait_until(lambda: _node_ready(core, name), timeout=TIMEOUT, what=f"node {name} to be Ready")
    yield name
    core.delete_node(name)


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(api)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(body={"metadata": {"name": name}})
    # Pods are admitted only once the namespace's default service account exists.
    wait_until(
        lambda: core.read_namespaced_service_account("default", name),
        timeout=TIMEOUT,
        what=f"the default service account of {name}",
    )
    yield name
    delete_namespace_now(core, name)


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    node = core.read_node(name)
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_the_apiserver_reports_the_pinned_release(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert info.git_version == pins()["KUBERNETES_VERSION"]


def test_the_real_client_lists_the_system_namespaces(api: client.ApiClient) -> None:
    names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_rbac_is_enforced_for_a_service_account_token(
    api: client.ApiClient, namespace: str, real_cluster: RealCluster
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, body={"metadata": {"name": "reader"}})
    # A bound token signed with the service-account key made at start, checked by the apiserver.
    token = core.create_namespaced_service_account_token(
        "reader", namespace, body={"spec": {"expirationSeconds": 600}}
    ).status.token
    request = urllib.request.Request(
        f"{real_cluster.server}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"}
    )
    context = ssl.create_default_context(cafile=str(real_cluster.ca_file))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=context, timeout=10).close()
    with refused.value as response:
        body = json.loads(response.read())
    assert refused.value.code == 403
    assert f"system:serviceaccount:{namespace}:reader" in body["message"]
    with (
        _client_with_token(real_cluster, "not-a-token") as stranger,
        pytest.raises(ApiException) as unauthenticated,
    ):
        client.CoreV1Api(stranger).list_node()
    assert unauthenticated.value.status == 401


def _client_with_token(cluster: RealCluster, token: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = cluster.server
    configuration.ssl_ca_cert = str(cluster.ca_file)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(configuration)


def test_a_kwok_node_becomes_ready(api: client.ApiClient, node_name: str) -> None:
    node = client.CoreV1Api(api).read_node(node_name)
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
    assert node.status.allocatable["pods"] == "110"
    assert node.status.node_info.kubelet_version  # kwok plays a kubelet and says so
    # Its heartbeat is a Lease, as a kubelet's is: the node controller keeps the node Ready by it.
    leases = client.CoordinationV1Api(api)
    lease = wait_until(
        lambda: leases.read_namespaced_lease(node_name, "kube-node-lease"),
        timeout=TIMEOUT,
        what=f"the heartbeat Lease of {node_name}",
    )
    assert lease.spec.lease_duration_seconds == 40
    assert [ref.name for ref in lease.metadata.owner_references] == [node_name]


def test_a_deployment_is_scheduled_onto_the_fake_node_and_runs(
    api: client.ApiClient, node_name: str, namespace: str
) -> None:
    apps = client.AppsV1Api(api)
    core = client.CoreV1Api(api)
    apps.create_namespaced_deployment(namespace, body=_deployment("web", replicas=2, node=node_name))

    def running_pods() -> list[Any] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        running = [p for p in pods if p.status.phase == "Running"]
        return running if len(running) == 2 else None

    pods = wait_until(running_pods, timeout=TIMEOUT, what="2 Running pods of deployment web")
    assert {p.spec.node_name for p in pods} == {node_name}  # placed by the real scheduler
    assert all(p.status.pod_ip for p in pods)  # kwok hands out IPs from its --cidr
    wait_until(
        lambda: apps.read_namespaced_deployment_status("web", namespace).status.available_replicas == 2,
        timeout=TIMEOUT,
        what="deployment web to report 2 available replicas",
    )


def _deployment(name: str, *, replicas: int, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    # Only kwok's nodes can "run" anything; pin to the test's own node.
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "app", "image": "registry.invalid/app:1"}],
                },
            },
        },
    }


def test_kubectl_gets_nodes_wide(real_cluster: RealCluster, node_name: str) -> None:
    result = real_cluster.kubectl("get", "nodes", "-o", "wide")
    line = next(line for line in result.stdout.splitlines() if line.startswith(node_name))
    assert " Ready " in f" {line} "
    version = json.loads(real_cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == pins()["KUBERNETES_VERSION"]
