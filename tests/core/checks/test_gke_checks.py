"""The GKE checks of `check` (bot/core/checks/gke.py) on the sim's GKE REST facade, through the
real google-cloud-container client."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from bot.core.checks.gke import check_exclusions, check_pools, gke_extra
from bot.core.providers import MaintenanceExclusion
from bot.sim import SimCluster
from tests.support.gcp import gke_provider, gke_scenario

TARGET = "1.30.4-gke.1348000"
#: A moment of the plan's window: before the scenario's holiday freeze (2026-12-20 … 2027-01-04).
BEFORE = datetime(2026, 12, 1, 13, 0, tzinfo=UTC).timestamp()


def test_the_gke_checks_pass_an_offered_target_and_note_the_server_config_and_policy(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    notes: list[str] = []
    findings = gke_extra(gke_provider(sim), now=BEFORE)(None, TARGET, notes)  # type: ignore[arg-type]
    assert findings == []
    assert notes[0] == (
        "GKE cluster shop-prod: 1.29.8-gke.1031000 (RUNNING); get_server_config offers 1.30.5-gke.1014001, "
        "1.30.4-gke.1348000, 1.29.9-gke.1177000 (default 1.30.4-gke.1348000)"
    )
    # Times as the posts say them, the zone named: not GKE's raw ISO.
    assert notes[1].startswith(
        "GKE maintenance policy: recurring FREQ=WEEKLY;BYDAY=SA, first 2026-01-03 01:00 – 2026-01-03 05:00 UTC; "
    )
    assert "exclusion holiday-freeze 2026-12-20 00:00 – 2027-01-04 00:00 UTC (NO_UPGRADES)" in notes[1]
    assert "deprecation insights are the Recommender API's" in notes[2]


def test_an_exclusion_in_force_in_the_window_is_required_naming_it_and_its_end(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    during = datetime(2026, 12, 22, 14, 0, tzinfo=UTC).timestamp()
    (finding,) = gke_extra(gke_provider(sim), now=during)(None, TARGET, [])  # type: ignore[arg-type]
    assert (finding.id, finding.severity) == ("GKE002", "required")
    assert (
        finding.title
        == "maintenance exclusion holiday-freeze would block the window (until 2027-01-04 00:00 UTC)"
    )
    assert "is in force and ends at 2027-01-04 00:00 UTC" in finding.why
    assert finding.fix.startswith("move the window after 2027-01-04 00:00 UTC, or end the exclusion early")


def test_a_target_written_as_kubectl_prints_it_is_the_version_the_server_config_offers(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # It read "offers …, 1.30.4-gke.1348000, … not v1.30.4-gke.1348000" as a Required finding.
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    for target in (f"v{TARGET}", "v1.30.4", "v1.30"):
        assert gke_extra(gke_provider(sim), now=BEFORE)(None, target, []) == [], target  # type: ignore[arg-type]


def test_a_target_the_server_config_does_not_offer_is_required_to_change(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory(gke_scenario(maintenance={}), speed=0.0, seed=1)
    (finding,) = gke_extra(gke_provider(sim), now=BEFORE)(None, "1.31.1-gke.1146000", [])  # type: ignore[arg-type]
    assert (finding.id, finding.severity) == ("GKE001", "required")
    assert "not 1.31.1-gke.1146000" in finding.why


def test_exclusion_scopes_and_starts_decide_what_blocks() -> None:
    now = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)

    def ex(
        scope: str, start: str = "2026-12-01T00:00:00Z", end: str = "2026-12-02T00:00:00Z"
    ) -> MaintenanceExclusion:
        return MaintenanceExclusion(name=scope.lower(), start=start, end=end, scope=scope)

    minor = check_exclusions(
        [ex("NO_MINOR_UPGRADES"), ex("NO_UPGRADES")], "1.29.8-gke.1", "1.30.4-gke.2", now
    )
    assert [f.objects for f in minor] == [
        ("maintenanceExclusions/no_minor_upgrades",),
        ("maintenanceExclusions/no_upgrades",),
    ]
    # A patch upgrade passes a minor-only freeze; a freeze that begins tomorrow evening is not this window's.
    assert check_exclusions([ex("NO_MINOR_UPGRADES")], "1.30.4-gke.1", "1.30.5-gke.2", now) == []
    later = ex("NO_UPGRADES", start="2026-12-02T18:00:00Z", end="2026-12-03T00:00:00Z")
    assert check_exclusions([later], "1.29.8-gke.1", "1.30.4-gke.2", now) == []
    soon = ex("NO_UPGRADES", start="2026-12-01T20:00:00Z", end="2026-12-03T00:00:00Z")
    (finding,) = check_exclusions([soon], "1.29.8-gke.1", "1.30.4-gke.2", now)
    assert "begins at 2026-12-01 20:00 UTC" in finding.why


def test_pools_beyond_the_kubelet_skew_or_not_running_are_named() -> None:
    pools = [
        {"name": "old", "version": "1.26.5-gke.1", "status": "RUNNING"},
        {"name": "busy", "version": "1.29.8-gke.1", "status": "RECONCILING"},
        {"name": "fine", "version": "1.29.8-gke.1", "status": "RUNNING"},
    ]
    (finding,) = check_pools(pools, TARGET)
    assert finding.objects == (
        "nodePools/old (1.26.5-gke.1, 4 minors behind 1.30.4-gke.1348000)",
        "nodePools/busy (RECONCILING)",
    )


def test_the_gke_example_plans_checks_step_says_only_what_the_gke_checks_read(
    sim_factory: Callable[..., SimCluster],
) -> None:
    from bot.core.runs.plans import parse_plan
    from bot.resources import BUILTIN_PLANS

    plan = parse_plan((BUILTIN_PLANS / "gke-managed.yaml").read_text(encoding="utf-8"))
    said = " ".join(plan.step("checks").description.split())
    # It said "its deprecation insights", which no GKE check reads (they are the Recommender API's).
    assert "its deprecation insights" not in said
    assert "GKE's deprecation insights are the Recommender API's, which the checks do not read" in said
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    notes: list[str] = []
    gke_extra(gke_provider(sim), now=BEFORE)(None, TARGET, notes)  # type: ignore[arg-type]
    assert "GKE's deprecation insights are the Recommender API's (not read here)" in notes[-1]
    for finding in ("GKE001", "GKE002", "GKE003"):
        assert finding in said
