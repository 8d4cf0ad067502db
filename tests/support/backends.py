"""One small interface over the two clusters the contract suite runs on: the sim and the testbed.

    backend.kubeconfig, backend.api (official ApiClient), backend.kubectl(*args)   as cluster admin
    backend.bot()                      the bot's kube adapter, as the bot's own identity
    backend.namespace                  a fresh namespace for this test
    backend.add_nodes(group, n, version=...), backend.remove_node(name)
    backend.expire_history()           compact: watches from older versions of Events get 410

On the sim the nodes come from its control API (a managed node group); on the real control
plane they are kwok fake nodes. On the real one the bot's adapter authenticates with the token of
the ServiceAccount bound by deploy/rbac.yaml, so every contract operation is also an RBAC check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.support.testbed import RealCluster, delete_namespace_now, fake_node, wait_until

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "deploy" / "rbac.yaml"
KUBECTL = Path(sys.executable).parent / "kubectl"
#: The node-group label both backends put on their nodes (EKS managed node groups).
GROUP_LABEL = "eks.amazonaws.com/nodegroup"
TIMEOUT = 90.0


class Backend(Protocol):
    name: str
    kubeconfig: Path
    namespace: str
    api: client.ApiClient

    def kubectl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]: ...

    def bot(self) -> Cluster: ...

    def add_nodes(self, group: str, count: int, *, version: str) -> list[str]: ...

    def remove_node(self, name: str) -> None: ...

    def expire_history(self) -> None: ...

    def close(self) -> None: ...


def _kubectl(kubeconfig: Path, cache: Path, args: tuple[str, ...], timeout: float) -> Any:
    cmd = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _new_namespace(api: client.ApiClient) -> str:
    core = client.CoreV1Api(api)
    name = f"contract-{uuid.uuid4().hex[:6]}"
    core.create_namespace(body={"metadata": {"name": name}})
    # Pods are refused until the namespace's default ServiceAccount exists (real admission).
    wait_until(
        lambda: core.read_namespaced_service_account("default", name), timeout=TIMEOUT, what="default SA"
    )
    return name


@dataclass
class SimBackend:
    sim: SimCluster
    workdir: Path
    name: str = "sim"
    kubeconfig: Path = field(init=False)
    api: client.ApiClient = field(init=False)
    namespace: str = field(init=False)
    _clusters: list[Cluster] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kubeconfig = self.sim.write_kubeconfig(self.workdir / "sim.kubeconfig")
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig), persist_config=False)
        self.namespace = _new_namespace(self.api)

    def kubectl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        result: subprocess.CompletedProcess[str] = _kubectl(
            self.kubeconfig, self.workdir / "kubectl-cache", args, timeout
        )
        return result

    def bot(self) -> Cluster:
        cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=self.kubeconfig))
        self._clusters.append(cluster)
        return cluster

    def add_nodes(self, group: str, count: int, *, version: str) -> list[str]:
        control = self.sim.control
        if group not in control.status()["nodeGroups"]:
            return control.add_node_group(group, count=count, version=version)
        return [control.add_node(group, version=version) for _ in range(count)]

    def remove_node(self, name: str) -> None:
        self.sim.control.remove_node(name)

    def expire_history(self) -> None:
        self.sim.control.compact()

    def close(self) -> None:
        for cluster in self._clusters:
            cluster.close()
        self.api.close()


@dataclass
class RealBackend:
    real: RealCluster
    bot_kubeconfig: Path
    workdir: Path
    name: str = "real"
    kubeconfig: Path = field(init=False)
    api: client.ApiClient = field(init=False)
    namespace: str = field(init=False)
    nodes: list[str] = field(default_factory=list)
    _clusters: list[Cluster] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kubeconfig = self.real.kubeconfig
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig), persist_config=False)
        self.namespace = _new_namespace(self.api)

    def kubectl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        result: subprocess.CompletedProcess[str] = _kubectl(
            self.kubeconfig, self.workdir / "kubectl-cache", args, timeout
        )
        return result

    def bot(self) -> Cluster:
        cluster = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=self.bot_kubeconfig))
        self._clusters.append(cluster)
        return cluster

    def add_nodes(self, group: str, count: int, *, version: str) -> list[str]:
        core = client.CoreV1Api(self.api)
        names = [f"{group}-{uuid.uuid4().hex[:6]}" for _ in range(count)]
        for name in names:
            core.create_node(body=fake_node(name, labels={GROUP_LABEL: group}, kubelet_version=version))
            self.nodes.append(name)
        for name in names:
            wait_until(lambda n=name: node_is_ready(core, n), timeout=TIMEOUT, what=f"node {name} Ready")
        return names

    def remove_node(self, name: str) -> None:
        client.CoreV1Api(self.api).delete_node(name)
        self.nodes.remove(name)

    def expire_history(self) -> None:
        """Compact etcd at its current revision, as kube-apiserver does every 5 minutes.

        Watches served from etcd (Events: they have no watch cache) from an older version then get
        410. Cached kinds (pods, deployments) keep serving older versions from the API server's
        watch cache until they fall out of its window, which compaction does not shorten.
        """
        revision = _etcd(self.real.etcd_url, "/v3/kv/range", {"key": "AA=="})["header"]["revision"]
        _etcd(self.real.etcd_url, "/v3/kv/compaction", {"revision": revision, "physical": True})

    def close(self) -> None:
        core = client.CoreV1Api(self.api)
        # Background deletion: the session's control plane cleans up while the next test runs.
        delete_namespace_now(core, self.namespace)
        for name in self.nodes:
            core.delete_node(name)
        for cluster in self._clusters:
            cluster.close()
        self.api.close()


def _etcd(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """etcd's v3 JSON gateway (no etcdctl needed)."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


def node_is_ready(core: client.CoreV1Api, name: str) -> bool:
    node = core.read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


#: The opt-in roles of deploy/rbac.yaml that the contract suite binds, as a team that opted in:
#: its drains may delete a pod when people choose it, its checks read container logs.
OPT_IN = ("upgrade-bot-pod-logs", "upgrade-bot-pod-delete")


def bot_role_kubeconfig(
    real: RealCluster, path: Path, *, account: str = "upgrade-bot", opt_in: tuple[str, ...] = ()
) -> Path:
    """Apply deploy/rbac.yaml (binding the `opt_in` roles too, as its comments say) and write a
    kubeconfig with a token of the bot's ServiceAccount."""
    real.kubectl("create", "namespace", "upgrade-bot", check=False)
    real.kubectl("apply", "-f", str(RBAC))
    for role in opt_in:
        real.kubectl(
            "create", "clusterrolebinding", role, f"--clusterrole={role}",
            "--serviceaccount=upgrade-bot:upgrade-bot", check=False,
        )  # fmt: skip
    token = real.kubectl("create", "token", account, "-n", "upgrade-bot").stdout.strip()
    return token_kubeconfig(real, token, path)


def token_kubeconfig(real: RealCluster, token: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "testbed",
                        "cluster": {"server": real.server, "certificate-authority": str(real.ca_file)},
                    }
                ],
                "users": [{"name": "upgrade-bot", "user": {"token": token}}],
                "contexts": [{"name": "bot", "context": {"cluster": "testbed", "user": "upgrade-bot"}}],
                "current-context": "bot",
            }
        )
    )
    return path
