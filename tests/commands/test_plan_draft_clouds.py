"""`plan draft --style eks-managed` on a cluster whose provider is AKS or GKE is refused before the
cluster is read, in Slack as at the terminal: it drafted "Start the EKS control-plane update" and
"EKS replaces a managed group's nodes" for an AKS cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.kubeconfigs import refusing_kubeconfig

PROVIDERS = {
    "aks": "aks: {subscription_id: 3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d, resource_group: rg, name: shop}",
    "gke": "gke: {project: shop-project, location: europe-west1, name: shop}",
}


@pytest.fixture(params=sorted(PROVIDERS))
def cloud(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def services(write_config: Callable[..., Path], tmp_path: Path, cloud: str) -> Iterator[Services]:
    kubeconfig = refusing_kubeconfig(tmp_path / "kubeconfig", context="dead-ctx")
    config = write_config(
        f"clusters:\n  prod:\n    kubeconfig: {kubeconfig}\n    request_timeout: 2\n"
        f"    provider:\n      {PROVIDERS[cloud]}\n"
    )
    built = assemble(load_settings(config, {}), with_slack=False)
    yield built
    built.close()


def test_eks_managed_is_refused_for_an_aks_or_gke_cluster_before_it_is_read(
    services: Services, cloud: str
) -> None:
    out = services.router.handle(
        CommandRequest(
            text="plan draft --to 1.26 --style eks-managed", user_id="U0PRIMARY", source="terminal"
        )
    )
    assert not out.ok
    assert f"prod's provider is {cloud.upper()}" in out.rendered.text
    assert "--style pipeline or generic" in out.rendered.text
    assert "refused the connection" not in out.rendered.text
    # Another style goes on to read the cluster (here: refused, as it is down).
    other = services.router.handle(
        CommandRequest(text="plan draft --to 1.26 --style generic", user_id="U0PRIMARY", source="terminal")
    )
    assert "refused the connection" in other.rendered.text
