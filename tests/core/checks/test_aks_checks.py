"""The AKS checks of `check` (bot/core/checks/aks.py) on the sim's ARM facade, through the real
azure-mgmt-containerservice client."""

from __future__ import annotations

from collections.abc import Callable

from bot.core.checks.aks import aks_extra, check_override, check_pools
from bot.core.providers import ProviderUnavailable
from bot.sim import SimCluster
from tests.support.azure import aks_provider


def test_the_aks_checks_pass_an_offered_target_and_note_the_profile_and_maintenance(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    notes: list[str] = []
    findings = aks_extra(aks_provider(sim))(None, "1.26.6", notes)  # type: ignore[arg-type]
    assert findings == []
    assert notes[0] == (
        "AKS cluster shop-prod: 1.25.11 (Succeeded); its upgrade profile offers 1.25.15, 1.26.6, 1.26.10"
    )
    assert notes[1].startswith(
        "AKS planned maintenance (bounds AKS's own upgrades, not this one): aksManagedAutoUpgradeSchedule: "
        "every 1 week(s) on Sunday at 01:00 UTC for 4h; not allowed 2026-12-24 00:00 – 2026-12-27 00:00 UTC"
    )


def test_a_target_written_as_kubectl_prints_it_is_the_version_the_profile_offers(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # It read "offers 1.25.15, 1.26.6, 1.26.10 …, not v1.26.6" as a Required finding.
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    assert aks_extra(aks_provider(sim))(None, "v1.26.6", []) == []  # type: ignore[arg-type]
    (finding,) = aks_extra(aks_provider(sim))(None, "v1.26.7", [])  # type: ignore[arg-type]
    assert (finding.title, finding.why.rpartition(", not ")[2]) == (
        "AKS cluster shop-prod is not ready for 1.26.7",
        "1.26.7",
    )


def test_a_target_the_upgrade_profile_does_not_offer_is_required_to_change(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    (finding,) = aks_extra(aks_provider(sim))(None, "1.27.3", [])  # type: ignore[arg-type]
    assert (finding.id, finding.severity) == ("AKS001", "required")
    assert finding.why == "its upgrade profile offers 1.25.15, 1.26.6, 1.26.10 from 1.25.11, not 1.27.3"


def test_pools_beyond_the_kubelet_skew_and_a_left_on_override_are_named() -> None:
    pools = [
        {"name": "old", "properties": {"orchestratorVersion": "1.22.6", "provisioningState": "Succeeded"}},
        {"name": "busy", "properties": {"orchestratorVersion": "1.26.6", "provisioningState": "Upgrading"}},
        {"name": "fine", "properties": {"orchestratorVersion": "1.24.9", "provisioningState": "Succeeded"}},
    ]
    (finding,) = check_pools(pools, "1.26.6")
    assert finding.objects == (
        "agentPools/old (1.22.6, 4 minors behind 1.26.6)",
        "agentPools/busy (Upgrading)",
    )
    cluster = {
        "name": "shop-prod",
        "properties": {
            "upgradeSettings": {"overrideSettings": {"forceUpgrade": True, "until": "2026-12-01T15:00:00Z"}}
        },
    }
    (override,) = check_override(cluster)
    assert (override.id, override.severity) == ("AKS003", "recommended")
    assert "until 2026-12-01 15:00 UTC" in override.why
    assert check_override({"name": "x", "properties": {}}) == []


def test_without_the_sdk_the_aks_checks_are_skipped_with_a_note(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)

    def no_sdk(config: object) -> object:
        raise ProviderUnavailable(
            "azure-mgmt-containerservice is not installed (pip install 'upgrade-bot[aks]')"
        )

    notes: list[str] = []
    assert aks_extra(aks_provider(sim), connect=no_sdk)(None, "1.26.6", notes) == []  # type: ignore[arg-type]
    assert notes == [
        "AKS checks skipped: azure-mgmt-containerservice is not installed (pip install 'upgrade-bot[aks]')"
    ]
