"""`clusters.NAME.provider: {eks: {name, region, endpoint_url?}}`, `{aks: {subscription_id,
resource_group, name, endpoint_url?}}` or `{gke: {project, location, name, endpoint_url?}}`:
validated like every other key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.records import AksProvider, EksProvider, GkeProvider
from bot.settings import parse_settings

BASE = "clusters:\n  prod:\n    kubeconfig: kc\n"


def test_an_eks_provider_is_read_with_its_endpoint() -> None:
    text = (
        BASE
        + "    provider:\n      eks: {name: runbook-prod, region: ap-northeast-1, endpoint_url: 'http://127.0.0.1:8080/aws'}\n"
    )
    settings = parse_settings(text, source=Path("cfg.yaml"), env={})
    assert settings.clusters["prod"].eks == EksProvider(
        name="runbook-prod", region="ap-northeast-1", endpoint_url="http://127.0.0.1:8080/aws"
    )


def test_an_aks_provider_is_read_with_its_endpoint() -> None:
    text = (
        BASE
        + "    provider:\n      aks: {subscription_id: 3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d, resource_group: rg-shop,"
        " name: shop-prod, endpoint_url: 'http://127.0.0.1:8080/azure'}\n"
    )
    cluster = parse_settings(text, source=Path("cfg.yaml"), env={}).clusters["prod"]
    assert cluster.aks == AksProvider(
        subscription_id="3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d",
        resource_group="rg-shop",
        name="shop-prod",
        endpoint_url="http://127.0.0.1:8080/azure",
    )
    assert cluster.eks is None


def test_a_gke_provider_is_read_with_its_endpoint() -> None:
    text = (
        BASE + "    provider:\n      gke: {project: shop-project, location: europe-west1, name: shop-prod,"
        " endpoint_url: 'http://127.0.0.1:8080/gke'}\n"
    )
    cluster = parse_settings(text, source=Path("cfg.yaml"), env={}).clusters["prod"]
    assert cluster.gke == GkeProvider(
        project="shop-project",
        location="europe-west1",
        name="shop-prod",
        endpoint_url="http://127.0.0.1:8080/gke",
    )
    assert (cluster.eks, cluster.aks) == (None, None)


def test_a_cluster_without_a_provider_has_none() -> None:
    assert parse_settings(BASE, source=Path("cfg.yaml"), env={}).clusters["prod"].eks is None


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("    provider:\n      gcp: {name: x}\n", "cfg.yaml:5: clusters.prod.provider.gcp: unknown key"),
        (
            "    provider:\n      gke: {project: shop-project, location: europe, name: shop}\n",
            "clusters.prod.provider.gke.location: 'europe' is not a GKE region or zone",
        ),
        (
            "    provider:\n      gke: {project: shop-project, name: shop}\n",
            "cfg.yaml:5: clusters.prod.provider.gke.location: missing key",
        ),
        (
            "    provider:\n      eks: {name: runbook-prod}\n",
            "cfg.yaml:5: clusters.prod.provider.eks.region: missing key",
        ),
        (
            "    provider:\n      eks: {name: runbook-prod, region: tokyo}\n",
            "cfg.yaml:5: clusters.prod.provider.eks.region: 'tokyo' is not an AWS region",
        ),
        (
            "    provider:\n      eks:\n        name: 'a b'\n        region: eu-west-1\n",
            "cfg.yaml:6: clusters.prod.provider.eks.name: 'a b' is not an EKS cluster name",
        ),
        (
            "    provider:\n      eks: {name: x, region: eu-west-1, endpoint_url: localhost}\n",
            "clusters.prod.provider.eks.endpoint_url: expected an http(s) URL",
        ),
        ("    provider: {}\n", "clusters.prod.provider: name a provider: eks, aks or gke"),
        (
            "    provider:\n      aks: {subscription_id: nope, resource_group: rg, name: shop}\n",
            "clusters.prod.provider.aks.subscription_id: 'nope' is not an Azure subscription id (a GUID)",
        ),
        (
            "    provider:\n      aks: {subscription_id: 3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d, name: shop}\n",
            "cfg.yaml:5: clusters.prod.provider.aks.resource_group: missing key",
        ),
        (
            "    provider:\n      eks: {name: a, region: eu-west-1}\n      aks: {subscription_id: x, resource_group: rg, name: s}\n",
            "clusters.prod.provider: name one provider: eks, aks or gke",
        ),
    ],
)
def test_a_bad_provider_is_named_with_its_file_line_and_key(provider: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(BASE + provider, source=Path("cfg.yaml"), env={})
    assert expected in caught.value.user_message
