"""The AKS adapter (bot/adapters/providers/aks.py) on the sim's ARM facade: the real
azure-mgmt-containerservice client, its real LRO poller following Azure-AsyncOperation, and
ARM's errors as the port's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.providers import aks
from bot.core.providers import PoolStrategy, connect
from bot.sim import SimCluster
from tests.support.azure import RESOURCE_GROUP, aks_provider, aks_scenario, azure_calls


def test_the_adapter_reads_versions_pools_and_planned_maintenance(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    provider = connect(aks_provider(sim))
    assert provider.kind == "aks"
    versions = provider.versions()
    assert (versions.current, versions.offered) == ("1.25.11", ("1.25.15", "1.26.6", "1.26.10"))
    assert sorted(p["name"] for p in provider.node_pools()) == ["apps", "batch", "system"]
    assert provider.node_pool("apps")["properties"]["upgradeSettings"] == {"maxSurge": "33%"}
    policy = provider.maintenance()
    assert policy.windows == ("aksManagedAutoUpgradeSchedule: every 1 week(s) on Sunday at 01:00 UTC for 4h",)
    assert [(e.name, e.start, e.end) for e in policy.exclusions] == [
        ("default", "2026-12-24T00:00:00Z", "2026-12-27T00:00:00Z")
    ]


def test_a_planned_maintenance_window_names_its_offset_only_when_it_has_one(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # ARM writes "+00:00" for none: "at 01:00 UTC", not "at 01:00 UTC+00:00".
    window = {"schedule": {"daily": {"intervalDays": 1}}, "duration_hours": 4, "start_time": "22:00"}
    maintenance = [
        {"name": "aksManagedAutoUpgradeSchedule", **window, "utc_offset": "+05:30"},
        {"name": "aksManagedNodeOSUpgradeSchedule", **window},
    ]
    sim = sim_factory(aks_scenario(maintenance=maintenance), speed=0.0, seed=1)
    assert connect(aks_provider(sim)).maintenance().windows == (
        "aksManagedAutoUpgradeSchedule: every 1 day(s) at 22:00 UTC+05:30 for 4h",
        "aksManagedNodeOSUpgradeSchedule: every 1 day(s) at 22:00 UTC for 4h",
    )


def test_the_sdks_own_lro_poller_follows_the_facades_async_operation(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # The facade speaks ARM's long-running-operation protocol: the SDK's ARMPolling reads the
    # Azure-AsyncOperation header, polls it until Succeeded, and reads the final resource.
    sim = sim_factory(aks_scenario(api_block=False), speed=600.0, seed=1)
    adapter = aks.connect(aks_provider(sim))
    client = adapter._client
    cluster = client.managed_clusters.get(RESOURCE_GROUP, "shop-prod", enforce_https=False)
    cluster.kubernetes_version = "1.25.15"
    poller = client.managed_clusters.begin_create_or_update(
        RESOURCE_GROUP, "shop-prod", cluster, enforce_https=False, polling_interval=0.05
    )
    done = poller.result(timeout=60)
    assert done.kubernetes_version == "1.25.15"
    assert done.provisioning_state == "Succeeded"
    calls = azure_calls(sim)
    assert calls["ManagedClusters_CreateOrUpdate"] == 1
    assert calls["Operations_Get"] >= 1


def test_arm_refusals_become_the_ports_errors_with_arms_subcode(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    adapter = aks.connect(aks_provider(sim))
    with pytest.raises(aks.AzureError) as blocked:
        adapter.update_control_plane("1.26.6", token="")
    assert (blocked.value.code, blocked.value.status) == ("UpgradeBlockedOnDeprecatedAPIUsage", 400)
    assert "usage has been detected on API horizontalpodautoscalers.autoscaling.v2beta2" in str(blocked.value)
    with pytest.raises(aks.AzureError) as surge:
        adapter.update_node_pool("apps", version="1.26.6", strategy=PoolStrategy(kind="replace"), token="")
    assert surge.value.code == "BadRequest"
    with pytest.raises(aks.AzureError) as missing:
        adapter.node_pool("gpu")
    assert (missing.value.code, missing.value.status) == ("NotFound", 404)


def test_the_deprecated_api_insight_says_the_overrides_end_as_the_posts_say_times(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory(aks_scenario(api_block=False), speed=0.0, seed=1)
    provider = connect(aks_provider(sim))
    (before,) = provider.upgrade_insights("1.26.6")
    assert before.status == "UNKNOWN"
    # ARM's override ends by a wall-clock time (the adapter compares it with now): an hour ahead.
    until = (datetime.now(UTC) + timedelta(hours=1)).replace(second=0, microsecond=0)
    provider.update_control_plane("1.25.11", token="", force=True, until=until.strftime("%Y-%m-%dT%H:%M:%SZ"))
    (insight,) = provider.upgrade_insights("1.26.6")
    assert insight.status == "WARNING"
    assert insight.reason == (
        f"the override is set until {until:%Y-%m-%d %H:%M} UTC: AKS does not block on deprecated-API usage"
    )
