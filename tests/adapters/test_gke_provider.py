"""The GKE adapter (bot/adapters/providers/gke.py) on the sim's REST facade: the real
google-cloud-container client on its REST transport, GKE's operations and errors as the port's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from bot.adapters.providers import gke
from bot.core.providers import PoolStrategy, connect, reading
from bot.sim import SimCluster
from tests.support.gcp import gke_calls, gke_provider
from tests.support.testbed import wait_until


def test_the_adapter_reads_versions_pools_and_the_maintenance_policy(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    provider = connect(gke_provider(sim))
    assert provider.kind == "gke"
    versions = provider.versions()
    assert versions.current == "1.29.8-gke.1031000"
    assert versions.offered == ("1.30.5-gke.1014001", "1.30.4-gke.1348000", "1.29.9-gke.1177000")
    assert versions.default == "1.30.4-gke.1348000"
    assert sorted(p["name"] for p in provider.node_pools()) == ["apps", "batch", "system"]
    assert provider.node_pool("batch")["upgradeSettings"] == {"maxSurge": 2, "strategy": "SURGE"}
    assert provider.node_pool("apps")["upgradeSettings"]["strategy"] == "BLUE_GREEN"
    policy = provider.maintenance()
    # Times as the posts say them, the zone named: not GKE's raw ISO.
    assert policy.windows == (
        "recurring FREQ=WEEKLY;BYDAY=SA, first 2026-01-03 01:00 – 2026-01-03 05:00 UTC",
    )
    assert [(e.name, e.end, e.scope) for e in policy.exclusions] == [
        ("holiday-freeze", "2027-01-04T00:00:00Z", "NO_UPGRADES")
    ]


def test_update_master_is_one_call_followed_by_get_operation(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    provider = gke.connect(gke_provider(sim))
    op = provider.update_control_plane("1.30.4-gke.1348000", token="")
    assert (op.kind, op.status) == ("UPGRADE_MASTER", "InProgress")
    assert provider.operations() == [op.id]
    sim.control.advance(700)
    done = provider.operation(op.id)
    assert done.status == "Successful"
    assert provider.control_plane()["currentMasterVersion"] == "1.30.4-gke.1348000"
    assert gke_calls(sim)["UpdateMaster"] == 1


def test_a_blue_green_upgrade_soaks_and_rolls_back_on_request(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    provider = gke.connect(gke_provider(sim))
    master = provider.update_control_plane("1.30.4-gke.1348000", token="")
    sim.control.advance(700)
    assert provider.operation(master.id).status == "Successful"
    op = provider.update_node_pool(
        "apps",
        version="1.30.4-gke.1348000",
        strategy=PoolStrategy(kind="replace", soak_seconds=600),
        token="",
    )

    def phase() -> str:
        sim.control.advance(10)
        info = provider.node_pool("apps").get("updateInfo") or {}
        return str((info.get("blueGreenInfo") or {}).get("phase", ""))

    wait_until(lambda: phase() == "NODE_POOL_SOAKING", timeout=60, what="the soak")
    back = provider.rollback_node_pool("apps", token="")
    assert (back.kind, back.status) == ("UPGRADE_NODES", "InProgress")
    assert back.id != op.id
    assert provider.operation(op.id).status == "Failed"
    wait_until(
        lambda: sim.control.advance(10) or provider.operation(back.id).status == "Successful",
        timeout=60,
        what="the rollback",
    )
    assert provider.node_pool("apps")["version"] == "1.29.8-gke.1031000"
    assert gke_calls(sim)["RollbackNodePoolUpgrade"] == 1


def test_gke_refusals_become_the_ports_errors_with_googles_status(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    provider = gke.connect(gke_provider(sim))
    with pytest.raises(gke.GcpError) as newer:
        provider.update_node_pool("apps", version="1.30.4-gke.1348000", strategy=PoolStrategy(), token="")
    assert (newer.value.code, newer.value.status) == ("INVALID_ARGUMENT", 400)
    with pytest.raises(gke.GcpError) as missing:
        provider.node_pool("gpu")
    assert (missing.value.code, missing.value.status) == ("NOT_FOUND", 404)


def test_what_only_reads_the_cloud_connects_to_it_once_per_configuration(
    sim_factory: Callable[..., SimCluster],
) -> None:
    """A snapshot's cloud side and a check's cloud findings read through `reading`: the SDK's
    clients are built once per provider configuration and process (building them was about half a
    second of CPU, paid again at every snapshot and check), another configuration gets its own."""
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    config = gke_provider(sim)
    first = reading(config)
    assert reading(config) is first
    assert reading(replace(config)) is first  # equal configurations: the same clients
    other = reading(replace(config, name="another-cluster"))
    assert other is not first
    assert (other.kind, other.name) == ("gke", "another-cluster")
    assert first.versions().current == "1.29.8-gke.1031000"
    assert connect(config) is not first  # the update calls' clients stay their own (ProviderAccess)
