"""The sim's GKE cluster for tests: its provider record, the call counts its REST facade keeps,
and the `gke-nodepools` scenario with `gcp:` keys overridden."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from bot.records import GkeProvider
from bot.sim.world.scenario import Scenario, load_scenario

PROJECT = "shop-project"
LOCATION = "europe-west1"
GKE_NAME = "shop-prod"


def gke_provider(sim: Any) -> GkeProvider:
    return GkeProvider(
        project=PROJECT, location=LOCATION, name=GKE_NAME, endpoint_url=sim.provider_url("gke")
    )


def gke_calls(sim: Any) -> dict[str, int]:
    """How often each GKE method was called (`GET /gke/sim/calls`)."""
    with urllib.request.urlopen(f"{sim.provider_url('gke')}/sim/calls", timeout=10) as response:
        return dict(json.load(response))


def gke_post(sim: Any, what: str, body: dict[str, str] | None = None) -> None:
    """`POST /gke/sim/hold` or `/gke/sim/release`."""
    request = urllib.request.Request(
        f"{sim.provider_url('gke')}/sim/{what}", data=json.dumps(body or {}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def gke_scenario(**gcp: Any) -> Scenario:
    """`gke-nodepools` with its `gcp:` keys overridden."""
    scenario = load_scenario("gke-nodepools")
    assert scenario.gcp is not None
    scenario.gcp = {**scenario.gcp, **gcp}
    return scenario
