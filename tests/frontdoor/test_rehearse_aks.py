"""`upgrade-bot rehearse aks-managed --auto-approve` (issue 46): the AKS runbook through the sim's
ARM surface, the deprecated-API block overridden by two people, every PUT made once."""

from __future__ import annotations

import re

from tests.support.rehearsing import gate_text, rehearse


def test_the_aks_managed_plan_upgrades_the_control_plane_then_each_pool_through_arm() -> None:
    result = rehearse("aks-managed", "--auto-approve", timeout=600)
    # Completed, but past AKS's block by two people's override: "found something", not a clean 0.
    assert result.returncode == 3, result.stderr[-3000:]
    out = result.stdout
    # The plan's own scenario, and the cluster's provider pointed at the sim's ARM surface.
    assert out.startswith("sim aks-nodepools at http://127.0.0.1:")
    assert re.search(r"^azure: http://127\.0\.0\.1:\d+/azure \(AKS cluster shop-prod\)$", out, re.MULTILINE)
    # The checks step runs the AKS checks with the cluster's; it finds the HPA dashboard's
    # autoscaling/v2beta2 calls (API001, Required), and the roster reviews and skips it.
    assert "❌ *`checks` failed* in run R" in out
    assert (
        "pre-flight check for 1.26 FAILED: 1 Required — API001 (requests to "
        "horizontalpodautoscalers.v2beta2.autoscaling)" in out
    )
    assert "↳ rehearsal: @U0PRIMARY reviewed why `checks` failed and skips it" in out
    # AKS refuses the minor upgrade over the same calls; two people
    # override it, with an expiry; only then is the PUT accepted.
    assert (
        "AKS refused ManagedClusters_CreateOrUpdate (UpgradeBlockedOnDeprecatedAPIUsage): deprecated APIs "
        "used in the last 12 hours that 1.26.6 removes: horizontalpodautoscalers.autoscaling.v2beta2" in out
    )
    assert "↳ @U0PRIMARY (primary) answers job 1: Override for 1h…" in out
    assert "↳ @U0SHADOW (shadow) answers job 1: Confirm the override" in out
    assert re.search(
        r"override of AKS's deprecated-API block \(\S+\) until \d{4}-\d\d-\d\d \d\d:\d\d UTC, asked by @U0PRIMARY",
        out,
    )
    accepted = re.findall(r"↳ (control plane|agent pool \S+) \S+ → \S+: AKS accepted (\w+)", out)
    assert accepted == [
        ("control plane", "ManagedClusters_CreateOrUpdate"),
        ("agent pool system", "AgentPools_CreateOrUpdate"),
        ("agent pool apps", "AgentPools_CreateOrUpdate"),
        ("agent pool batch", "AgentPools_CreateOrUpdate"),
    ]
    # Each gate shows the exact call; a pool's shows the max surge it upgrades with.
    assert (
        "• would call ManagedClusters_CreateOrUpdate (PUT managedClusters/shop-prod) with kubernetesVersion=1.26.6, "
        "every agent pool kept on its version" in gate_text(out, "control-plane")
    )
    apps = gate_text(out, "nodepool-apps")
    assert (
        "• would call AgentPools_CreateOrUpdate (PUT agentPools/apps) with orchestratorVersion=1.26.6" in apps
    )
    assert "• max surge 33% (the pool's own)" in apps
    assert "upgradeSettings.maxSurge=1" in gate_text(out, "nodepool-system")
    for pool in ("system", "apps", "batch"):
        assert re.search(
            rf"`nodepool-{pool}` succeeded: aks-upgrade-nodepool job \d+: agent pool {pool} 1\.25\.11 → 1\.26\.6: "
            r"AKS operation \S+ Succeeded — (\d+)/\1 node\(s\) Ready on 1\.26\.6",
            out,
        )
    assert out.rstrip().endswith(
        "completed with 1 failed step skipped, 1 past a safeguard by people's choice"
    )
    assert re.search(
        r"^past a safeguard by people's choice: job 1: override chosen: control plane 1\.25\.11 → 1\.26\.6: "
        r"override of AKS's deprecated-API block",
        out,
        re.MULTILINE,
    )
