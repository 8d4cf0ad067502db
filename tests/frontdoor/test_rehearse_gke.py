"""`upgrade-bot rehearse gke-managed --auto-approve` (issue 46): the GKE runbook through the sim's
GKE REST surface — the master, then each node pool by surge or blue-green, every call made once."""

from __future__ import annotations

import re

from tests.support.rehearsing import gate_text, rehearse


def test_the_gke_managed_plan_upgrades_the_master_then_each_pool_through_gkes_api() -> None:
    result = rehearse("gke-managed", "--auto-approve", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    # The plan's own scenario, and the cluster's provider pointed at the sim's GKE REST surface.
    assert out.startswith("sim gke-nodepools at http://127.0.0.1:")
    assert re.search(r"^gke: http://127\.0\.0\.1:\d+/gke \(GKE cluster shop-prod\)$", out, re.MULTILINE)
    accepted = re.findall(r"↳ (control plane|node pool \S+) \S+ → \S+: GKE accepted (\w+)", out)
    assert accepted == [
        ("control plane", "UpdateMaster"),
        ("node pool system", "UpdateNodePool"),
        ("node pool apps", "UpdateNodePool"),
        ("node pool batch", "UpdateNodePool"),
    ]
    # Each gate shows the exact call; a pool's shows its surge or blue-green settings.
    assert (
        "• would call UpdateMaster (POST projects/shop-project/locations/europe-west1/clusters/shop-prod:updateMaster) "
        "with masterVersion=1.30.4-gke.1348000" in gate_text(out, "control-plane")
    )
    system = gate_text(out, "nodepool-system")
    assert "upgradeSettings strategy=SURGE maxSurge=1 maxUnavailable=0" in system
    assert "• surge (set by the plan): max_surge 1, max_unavailable 0" in system
    assert "• surge (the pool's own): max_surge 2, max_unavailable 0" in gate_text(out, "nodepool-batch")
    apps = gate_text(out, "nodepool-apps")
    assert "upgradeSettings strategy=BLUE_GREEN nodePoolSoakDuration=1h" in apps
    assert "keeps it for a soak of 1h" in apps
    # The blue-green soak asks people, with its evidence; the rehearsal lets it finish.
    assert re.search(
        r"node pool apps \S+ → \S+: the green pool soaks for 1h \(the blue one is kept until then\); the soak's "
        r"evidence holds: 3 green node\(s\) Ready on 1\.30\.4-gke\.1348000",
        out,
    ), "\n".join(line for line in out.splitlines() if "soak" in line)
    assert "↳ @U0PRIMARY (primary) answers job 4: Let the soak finish" in out
    for pool, n in (("system", 2), ("apps", 3), ("batch", 2)):
        assert re.search(
            rf"`nodepool-{pool}` succeeded: gke-update-nodepool job \d+: node pool {pool} 1\.29\.8-gke\.1031000 → "
            rf"1\.30\.4-gke\.1348000: GKE operation \S+ Successful — {n}/{n} node\(s\) Ready on 1\.30\.4-gke\.1348000",
            out,
        )
    assert out.rstrip().endswith("completed")
