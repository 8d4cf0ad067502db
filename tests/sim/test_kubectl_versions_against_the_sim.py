"""Every kubectl the machine has finds the sim's resources, whatever the scenario's version.

The machine's kubectl (Google Cloud SDK's) runs the kubectl of the API server's minor: against a
1.29 sim that is kubectl 1.29, which asks for aggregated discovery in v2beta1 only. A sim that
answered v2 anyway left it without groups ("the server doesn't have a resource type "nodes"").
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from bot.sim import SimCluster
from tests.support.sim_fixtures import GCLOUD_MINORS, KUBECTL, gcloud_kubectl

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

#: One shipped scenario per form of the server's version, with the kubectl minor the machine's
#: dispatcher runs for it (its default, 1.32, for servers older than the kubectls it ships).
SCENARIOS = {
    "gke-nodepools": ("v1.29.8-gke.", "1.29"),
    "small": ("v1.29.4-eks-", "1.29"),
    "eks-nodegroups": ("v1.24.17-eks-", "1.32"),
    "aks-nodepools": ("v1.25.11", "1.32"),
}


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


def _stored(sim: SimCluster, resource: str) -> list[tuple[str, str]]:
    """The (namespace, name) of each object of a resource the sim holds, sorted."""
    return sorted(e.key for e in sim.core.store.entries(resource))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_machines_kubectl_gets_nodes_and_pods_on_every_form_of_server_version(
    sim_factory: Callable[..., SimCluster], kubectl: Kubectl, scenario: str
) -> None:
    sim = sim_factory(scenario, speed=0.0, seed=1)
    prefix, minor = SCENARIOS[scenario]
    dispatcher = gcloud_kubectl()
    version = _ok(kubectl(sim, "version", binary=dispatcher))
    assert f"Client Version: v{minor}." in version
    assert f"Server Version: {prefix}" in version
    nodes = _ok(kubectl(sim, "get", "nodes", "-o", "name", binary=dispatcher)).split()
    assert sorted(nodes) == [f"node/{name}" for _, name in _stored(sim, "nodes")]
    pods = _ok(kubectl(sim, "get", "pods", "-A", "--no-headers", binary=dispatcher)).splitlines()
    assert sorted(tuple(line.split()[:2]) for line in pods) == _stored(sim, "pods")


def test_every_kubectl_minor_the_machine_has_and_the_projects_list_the_gke_sims_nodes(
    sim_factory: Callable[..., SimCluster], kubectl: Kubectl
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    expected = [f"node/{name}" for _, name in _stored(sim, "nodes")]
    for binary in [*(gcloud_kubectl(m) for m in GCLOUD_MINORS), KUBECTL]:
        result = kubectl(sim, "get", "nodes", "-o", "name", binary=binary)
        assert result.returncode == 0, f"{binary}: {result.stderr}"
        assert sorted(result.stdout.split()) == expected, binary
