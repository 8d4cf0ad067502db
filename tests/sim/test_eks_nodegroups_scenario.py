"""The `eks-nodegroups` scenario is shaped like the runbook, and its upgrade plays out to 1.25."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import urllib.request
from collections.abc import Callable
from typing import Any

from bot.sim import SimCluster
from bot.sim.apiserver.tables import pod_status_reason

Obj = dict[str, Any]
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _get(sim: SimCluster, path: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(sim.url + path, timeout=10) as response:
        return response.status, dict(response.headers), response.read()


def _pods(sim: SimCluster, namespace: str) -> list[Obj]:
    return [e.obj() for e in sim.core.store.entries("pods", namespace)]


def test_node_groups_fargate_and_the_control_plane_start_on_the_old_version(sim_eks: SimCluster) -> None:
    status = sim_eks.control.status()
    assert list(status["nodeGroups"]) == ["control-plane", "istio", "ng-shared", "others", "logging"]
    assert json.loads(_get(sim_eks, "/version")[2])["gitVersion"].startswith("v1.24.17-eks-")
    nodes = [e.obj() for e in sim_eks.core.store.entries("nodes")]
    # Every group on the control plane's version but `others`, left on 1.22 (planted for issue 14).
    by_group = {
        n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"]: n["status"]["nodeInfo"]["kubeletVersion"][:9]
        for n in nodes
        if "eks.amazonaws.com/nodegroup" in n["metadata"].get("labels", {})
    }
    assert {g: v for g, v in by_group.items() if g != "others"} == dict.fromkeys(
        ["control-plane", "istio", "ng-shared", "logging"], "v1.24.17-"
    )
    assert by_group["others"] == "v1.22.17-"
    coredns = [p for p in _pods(sim_eks, "kube-system") if p["metadata"]["name"].startswith("coredns-")]
    assert len(coredns) == 2
    # dns-autoscaler runs on Fargate too (its own profile): the runbook restarts both.
    autoscaler = [
        p for p in _pods(sim_eks, "kube-system") if p["metadata"]["name"].startswith("dns-autoscaler-")
    ]
    assert len(autoscaler) == 1
    assert all(
        p["spec"]["nodeName"].startswith("fargate-ip-") and p["spec"]["schedulerName"] == "fargate-scheduler"
        for p in coredns + autoscaler
    )


def test_sidecars_run_the_old_istio_proxy_and_one_vault_pod_sits_at_two_of_three(sim_eks: SimCluster) -> None:
    payments = _pods(sim_eks, "payments")
    worker = next(p for p in payments if p["metadata"]["name"].startswith("payments-worker-"))
    names = [c["name"] for c in worker["spec"]["containers"]]
    assert names == ["worker", "istio-proxy", "vault-agent"]
    ready = sum(1 for c in worker["status"]["containerStatuses"] if c["ready"])
    assert (ready, len(names)) == (2, 3)
    proxies = {c["image"] for p in payments for c in p["spec"]["containers"] if c["name"] == "istio-proxy"}
    assert proxies == {"docker.io/istio/proxyv2:1.16.1"}
    istiod = next(p for p in _pods(sim_eks, "istio-system") if p["metadata"]["name"].startswith("istiod-"))
    assert istiod["spec"]["containers"][0]["image"] == "docker.io/istio/pilot:1.17.2"
    lines = sim_eks.core.kubelets.logs(worker, "istio-proxy")
    assert any("workload-spiffe-uds/socket: bind: read-only file system" in line for line in lines)


def test_knative_controllers_are_marked_not_safe_to_evict(sim_eks: SimCluster) -> None:
    knative = _pods(sim_eks, "knative-serving")
    assert len(knative) == 5
    assert all(
        p["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
        for p in knative
    )


def test_removed_apis_are_served_with_a_warning_and_counted_on_metrics(sim_eks: SimCluster) -> None:
    # The scenario's old Helm client calls the removed API once a minute of the sim's clock. Counted
    # before any request of the test's own: the server counts a request once its answer is sent,
    # so a loaded machine's reply can reach the test before its count does.
    before = sim_eks.control.request_count("policy", "v1beta1", "poddisruptionbudgets")
    sim_eks.control.advance("3m")
    assert sim_eks.control.request_count("policy", "v1beta1", "poddisruptionbudgets") == before + 3
    status, headers, body = _get(
        sim_eks, "/apis/policy/v1beta1/namespaces/reporting/poddisruptionbudgets/reporting-api"
    )
    assert status == 200
    assert headers["Warning"] == (
        '299 - "policy/v1beta1 PodDisruptionBudget is deprecated in v1.21+, unavailable in v1.25+; '
        'use policy/v1 PodDisruptionBudget"'
    )
    pdb = json.loads(body)
    assert pdb["apiVersion"] == "policy/v1beta1"
    applied = json.loads(pdb["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["apiVersion"] == "policy/v1beta1"
    metrics = _get(sim_eks, "/metrics")[2].decode()
    assert (
        'apiserver_requested_deprecated_apis{group="policy",removed_release="1.25",resource="poddisruptionbudgets",'
        'subresource="",version="v1beta1"} 1'
    ) in metrics
    assert (
        'apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs"'
        in metrics
    )


def test_the_helm_release_is_stored_as_helm_stores_it_and_uses_the_removed_apis(sim_eks: SimCluster) -> None:
    secret = sim_eks.core.store.get("secrets", "reporting", "sh.helm.release.v1.reporting.v3")
    assert secret is not None
    assert secret["type"] == "helm.sh/release.v1"
    assert secret["metadata"]["labels"] == {
        "name": "reporting",
        "owner": "helm",
        "status": "deployed",
        "version": "3",
    }
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(secret["data"]["release"]))))
    assert release["chart"]["metadata"]["version"] == "2.3.1"
    assert "apiVersion: policy/v1beta1" in release["manifest"]
    assert "apiVersion: batch/v1beta1" in release["manifest"]


def test_kubectl_warns_when_asked_for_a_deprecated_group_version(
    sim_eks: SimCluster, kubectl: Kubectl
) -> None:
    result = kubectl(sim_eks, "get", "poddisruptionbudgets.v1beta1.policy", "-n", "reporting")
    assert result.returncode == 0, result.stderr
    assert (
        "Warning: policy/v1beta1 PodDisruptionBudget is deprecated in v1.21+, unavailable in v1.25+"
        in result.stderr
    )
    assert "reporting-api" in result.stdout


def test_the_scripted_upgrade_moves_everything_to_1_25_through_its_known_faults(sim_eks: SimCluster) -> None:
    control = sim_eks.control
    op = control.run_upgrade()
    control.advance("14m")
    assert json.loads(_get(sim_eks, "/version")[2])["gitVersion"].startswith("v1.24.17")
    control.advance("2m")
    assert json.loads(_get(sim_eks, "/version")[2])["gitVersion"].startswith("v1.25.16-eks-")
    # policy/v1beta1 and batch/v1beta1 are gone with 1.25; autoscaling/v2beta2 stays until 1.26.
    groups = json.loads(_get(sim_eks, "/apis")[2])["groups"]
    served = {v["groupVersion"] for g in groups for v in g["versions"]}
    assert "policy/v1beta1" not in served
    assert "batch/v1beta1" not in served
    assert "autoscaling/v2beta2" in served
    control.advance("1m")
    autoscalers = [
        p for p in _pods(sim_eks, "kube-system") if p["metadata"]["name"].startswith("cluster-autoscaler-")
    ]
    autoscaler = max(autoscalers, key=lambda p: p["status"]["containerStatuses"][0]["restartCount"])
    assert autoscaler["status"]["containerStatuses"][0]["restartCount"] >= 1
    assert any(
        "Failed to watch *v1beta1.PodDisruptionBudget" in line
        for line in sim_eks.core.kubelets.logs(autoscaler, "cluster-autoscaler", previous=True)
    )
    result = control.wait_operation(op["id"], timeout=0)
    assert result["state"] == "InProgress"
    for _ in range(24):
        control.advance("5m")
        if control.operation(op["id"])["state"] != "InProgress":
            break
    final = control.operation(op["id"])
    assert final["state"] == "Successful", final
    nodes = [e.obj() for e in sim_eks.core.store.entries("nodes") if not e.name.startswith("fargate-")]
    assert {n["status"]["nodeInfo"]["kubeletVersion"][:9] for n in nodes} == {"v1.25.16-"}
    assert len(nodes) == 11
    # metrics-server could not pull its k8s.gcr.io image on the new control-plane nodes.
    metrics_server = next(
        p for p in _pods(sim_eks, "kube-system") if p["metadata"]["name"].startswith("metrics-server-")
    )
    assert pod_status_reason(metrics_server) in ("ErrImagePull", "ImagePullBackOff")
    # Replacement pods got the new sidecar; the drain of `others` waited for checkout to move.
    checkout = _pods(sim_eks, "checkout")
    assert {c["image"] for p in checkout for c in p["spec"]["containers"] if c["name"] == "istio-proxy"} == {
        "docker.io/istio/proxyv2:1.17.2"
    }
    steps = "\n".join(control.operations()[-1]["steps"]) if control.operations() else ""
    assert "draining" in steps
    events = [e.obj() for e in sim_eks.core.store.entries("events", "logging")]
    assert any(e["reason"] == "FailedScheduling" for e in events)
    shared = [p for p in _pods(sim_eks, "payments") if p["metadata"]["name"].startswith("payments-api-")]
    assert any(
        "Too many open files" in line
        for p in shared
        for line in sim_eks.core.kubelets.logs(p, "istio-proxy", tail_lines=5)
    )
    # Fargate pods keep the kubelet they started with until they are restarted.
    fargate = [e.obj() for e in sim_eks.core.store.entries("nodes") if e.name.startswith("fargate-")]
    assert {n["status"]["nodeInfo"]["kubeletVersion"][:9] for n in fargate} == {"v1.24.17-"}
