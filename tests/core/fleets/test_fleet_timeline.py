"""The fleet's timeline for its post-run report: clusters as lanes, with stages and soaks, built from
the audit log of a real fleet run (the service over real child runs), looked at in headless Chromium."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.core.fleets import timeline
from bot.core.runs.service import Actor
from bot.frontdoor.assemble import Services, assemble
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.browser import chromium, console_errors
from tests.support.clock import FakeClock
from tests.support.fleets import T0, complete, fail_step, fleet_config, go_past_failed_step

__all__ = ["chromium"]

PRIMARY, SHADOW = Actor(user_id="U0PRIMARY", source="terminal"), Actor(user_id="U0SHADOW", source="terminal")


@pytest.fixture
def played(
    write_config: Callable[..., Path], tmp_path: Path, sim_small: SimCluster
) -> Iterator[tuple[Services, str]]:
    """Twelve clusters: the canary, its hour of soak and gate; four labs (one fails, its drain
    reported failed by the shadow, within the budget; one completes only because its people
    skipped its failed step); the devs half at a time, each completing a quarter of an hour apart."""
    clock = FakeClock(T0)
    bot = assemble(
        load_settings(write_config(fleet_config(tmp_path, sim=sim_small)), env={}),
        with_slack=False,
        clock=clock,
    )
    fleet = bot.fleets.start("twelve", PRIMARY)

    def members() -> dict[str, str]:
        return {m.cluster: m.run_id for m in bot.fleets.load(fleet.id).members}

    clock.advance(timedelta(minutes=20))
    complete(bot.runs, members()["ci"])
    bot.fleets.tick()
    clock.advance(timedelta(hours=1, minutes=1))
    bot.fleets.tick()
    bot.fleets.approve(fleet.id, SHADOW)
    bot.fleets.approve(fleet.id, PRIMARY)
    for i, lab in enumerate(("lab-1", "lab-2", "lab-3", "lab-4")):
        clock.advance(timedelta(minutes=10))
        (fail_step if i == 1 else go_past_failed_step if i == 2 else complete)(bot.runs, members()[lab])
        bot.fleets.tick()
    for _ in range(8):
        clock.advance(timedelta(minutes=15))
        for cluster, run_id in members().items():
            if cluster.startswith("dev-") and run_id and bot.runs.load(run_id).state.value == "active":
                complete(bot.runs, run_id)
                break
        bot.fleets.tick()
    # Slack's display names, as the bot caches them: the report names people by them.
    bot.store.save_people_names({"U0PRIMARY": "ann", "U0SHADOW": "bo"}, at=clock())
    yield bot, fleet.id
    bot.close()


def test_the_timeline_has_a_lane_per_cluster_in_stage_order_with_the_stages_and_the_soak(
    played: tuple[Services, str],
) -> None:
    bot, fleet_id = played
    tl = bot.fleets.timeline(fleet_id)
    assert [lane.cluster for lane in tl.lanes][:5] == ["ci", "lab-1", "lab-2", "lab-3", "lab-4"]
    assert len(tl.lanes) == 12
    assert [b.stage for b in tl.bands] == ["canary", "lab", "dev"]
    canary = tl.bands[0]
    assert canary.soak_start is not None
    assert canary.soak_end is not None
    assert canary.soak_end - canary.soak_start >= timedelta(hours=1)
    outcomes = {lane.cluster: [b[2] for b in lane.bars] for lane in tl.lanes}
    assert outcomes["lab-2"] == ["failed"]
    assert outcomes["ci"] == ["succeeded"]
    # lab-3 completed only because its people skipped its failed drain: not a plain success, and
    # said as its run's own card says it (`ending`), naming the step and who skipped it.
    assert outcomes["lab-3"] == [timeline.LOOSE]
    lab3 = next(lane for lane in tl.lanes if lane.cluster == "lab-3")
    run_id = lab3.bars[0][3]
    assert lab3.ends == {
        run_id: (
            "completed with 1 failed step skipped",
            (
                "drain (Drain the old nodes) failed: reported failed by @bo: the PDB blocks eviction — "
                "skipped by @ann: drained by hand",
            ),
        )
    }
    # lab-2 failed: why is on its lane, people by name (the audit row keeps the id).
    lab2 = next(lane for lane in tl.lanes if lane.cluster == "lab-2")
    assert (
        lab2.note == f"drain failed in run {lab2.bars[0][3]}: reported failed by @bo: the PDB blocks eviction"
    )
    assert all(outcomes[f"dev-{i}"] == ["succeeded"] for i in range(1, 8))
    # The canary's lane ends before the lab stage starts: the bars are the children's real times.
    assert tl.lanes[0].bars[0][1] is not None
    assert tl.lanes[0].bars[0][1] <= tl.bands[1].start


def test_the_timeline_page_draws_every_lane_in_chromium(
    played: tuple[Services, str], chromium: Any, tmp_path: Path
) -> None:
    bot, fleet_id = played
    tl = bot.fleets.timeline(fleet_id)
    page = tmp_path / "fleet.html"
    page.write_text(timeline.to_html(tl, title="Fleet twelve"), encoding="utf-8")
    chromium.get(page.as_uri())

    def run_of(cluster: str) -> str:
        return next(lane.bars[0][3] for lane in tl.lanes if lane.cluster == cluster)

    lanes = [e.text for e in chromium.find_elements("css selector", "svg text.lane")]
    assert lanes[:2] == ["ci", "lab-1"]
    assert len(lanes) == 12
    bars = chromium.find_elements("css selector", "svg rect.bar")
    assert len(bars) == 12
    # The child that went past a failed step is amber, says so on its lane, in the legend and in
    # the list under the picture, with the step and who skipped it.
    loose = chromium.find_elements("css selector", "svg rect.bar.loose")
    assert len(loose) == 1
    assert loose[0].value_of_css_property("fill") == "rgb(249, 168, 37)"
    assert [e.text for e in chromium.find_elements("css selector", "svg text.ending")] == [
        "completed with 1 failed step skipped"
    ]
    assert (
        "completed with failed steps skipped (or steps not all done)"
        in chromium.find_element("css selector", ".legend").text
    )
    (said,) = [e.text for e in chromium.find_elements("css selector", "ul.ends > li")]
    assert said.startswith("lab-3 (run R")
    assert "Completed with 1 failed step skipped" in said
    assert "drain (Drain the old nodes) failed" in said
    assert "skipped by @ann: drained by hand" in said
    # lab-2's failure says why where it can be read without hovering: on its lane, after its
    # bar and inside the picture, and in a list under it, with its run.
    (why,) = chromium.find_elements("css selector", "svg text.reason.failed")
    assert (
        why.text == f"drain failed in run {run_of('lab-2')}: reported failed by @bo: the PDB blocks eviction"
    )
    svg = chromium.find_element("css selector", "svg")
    box = chromium.execute_script("const b = arguments[0].getBBox(); return [b.x, b.width];", why)
    assert box[0] > bars[2].location["x"] - svg.location["x"]  # after lab-2's bar
    assert box[0] + box[1] <= svg.size["width"]  # and inside the picture
    (listed,) = [e.text for e in chromium.find_elements("css selector", "ul.whys > li")]
    assert listed == (
        f"lab-2 (run {run_of('lab-2')}): failed: drain failed in run {run_of('lab-2')}: reported failed by @bo: "
        "the PDB blocks eviction"
    )
    assert all(b.size["width"] >= 3 for b in bars)
    assert len(chromium.find_elements("css selector", "svg rect.soak")) == 1
    assert console_errors(chromium) == []
    chromium.save_screenshot(str(tmp_path / "fleet-timeline.png"))
    assert (tmp_path / "fleet-timeline.png").stat().st_size > 10_000
