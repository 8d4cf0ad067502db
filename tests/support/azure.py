"""The sim's AKS cluster for tests: its provider record, the call counts its ARM facade keeps,
and the `aks-nodepools` scenario with `azure:` keys overridden."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from bot.records import AksProvider
from bot.sim.world.scenario import Scenario, load_scenario

SUBSCRIPTION = "3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d"
RESOURCE_GROUP = "rg-shop-prod"
AKS_NAME = "shop-prod"


def aks_provider(sim: Any) -> AksProvider:
    return AksProvider(
        subscription_id=SUBSCRIPTION,
        resource_group=RESOURCE_GROUP,
        name=AKS_NAME,
        endpoint_url=sim.provider_url("aks"),
    )


def azure_calls(sim: Any) -> dict[str, int]:
    """How often each ARM operation was called (`GET /azure/sim/calls`)."""
    with urllib.request.urlopen(f"{sim.provider_url('aks')}/sim/calls", timeout=10) as response:
        return dict(json.load(response))


def azure_post(sim: Any, what: str, body: dict[str, str] | None = None) -> None:
    """`POST /azure/sim/hold` or `/azure/sim/release`."""
    request = urllib.request.Request(
        f"{sim.provider_url('aks')}/sim/{what}", data=json.dumps(body or {}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def aks_scenario(**azure: Any) -> Scenario:
    """`aks-nodepools` with its `azure:` keys overridden."""
    scenario = load_scenario("aks-nodepools")
    assert scenario.azure is not None
    scenario.azure = {**scenario.azure, **azure}
    return scenario
