"""`/upgrade plan load` of a hostile plan answers with the specific reason, never "an internal
error occurred": through the real router, with plans in the team's templates directory."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.plans import GOOD


@pytest.fixture
def plans_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "team-templates" / "plans"
    directory.mkdir(parents=True)
    return directory


@pytest.fixture
def load(write_config: Callable[..., Path], plans_dir: Path) -> Callable[[str], tuple[bool, str]]:
    config = write_config(f"templates_dir: {plans_dir.parent}\n")

    def run(name: str) -> tuple[bool, str]:
        services = assemble(load_settings(config, {}), with_slack=False)
        try:
            outcome = services.router.handle(
                CommandRequest(text=f"plan load {name}", user_id="U0PRIMARY", source="terminal")
            )
            return outcome.ok, outcome.rendered.text
        finally:
            services.close()

    return run


def refused(result: tuple[bool, str]) -> str:
    ok, text = result
    assert not ok
    assert "internal error" not in text
    assert "Traceback" not in text
    return text


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'target_version: "1.30"',
            'target_version: "1.' + "9" * 5000 + '"',
            "hostile.yaml:4: target_version:",
        ),
        (
            "cluster: prod",
            "cluster: " + "[" * 3000 + "]" * 3000,
            "hostile.yaml:2: cluster[0][0][0]…: nested deeper",
        ),
        (
            "name: small",
            "name: !!python/name:os.system small",
            "hostile.yaml:1: name: unknown tag !!python/name",
        ),
        ("    title: Do it", "    title:", "hostile.yaml:15: steps[1](work).title: missing value"),
        (
            'end: "2026-11-29T02:00"',
            'end: "9999-12-31T02:00"',
            "hostile.yaml:5: window.end: 9999-12-31T02:00:00",
        ),
        (
            "    escalate_after: 10m",
            "    timeout: 99999999999999d",
            "hostile.yaml:18: steps[1](work).timeout:",
        ),
    ],
)
def test_loading_a_hostile_plan_names_file_line_and_key(
    load: Callable[[str], tuple[bool, str]], plans_dir: Path, old: str, new: str, expected: str
) -> None:
    assert old in GOOD
    (plans_dir / "hostile.yaml").write_text(GOOD.replace(old, new, 1), encoding="utf-8")
    text = refused(load("hostile"))
    assert expected in text
    # Chat names the plan file, not where the server keeps it.
    assert str(plans_dir) not in text


def test_loading_a_fifo_from_the_plans_directory_is_refused_without_blocking(
    load: Callable[[str], tuple[bool, str]], plans_dir: Path
) -> None:
    os.mkfifo(plans_dir / "stuck.yaml")
    assert "stuck.yaml: the plan must be a regular file, not a FIFO" in refused(load("stuck"))


def test_loading_a_plan_that_is_not_utf8_names_the_byte(
    load: Callable[[str], tuple[bool, str]], plans_dir: Path
) -> None:
    (plans_dir / "latin.yaml").write_bytes(b"name: caf\xe9\n")
    assert "latin.yaml:1: the plan is not UTF-8 text (byte 9)" in refused(load("latin"))


def test_a_plan_name_too_long_for_a_file_name_is_a_usage_error_naming_the_limit(
    load: Callable[[str], tuple[bool, str]],
) -> None:
    text = refused(load("p" * 300))
    assert "plan name too long: at most 100 characters" in text


def test_a_plan_for_a_cluster_the_bot_does_not_know_is_refused_at_load_not_at_start(
    write_config: Callable[..., Path], plans_dir: Path, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    config = write_config(
        f"templates_dir: {plans_dir.parent}\nclusters:\n  prod:\n    kubeconfig: {kubeconfig}\n"
    )
    (plans_dir / "typo.yaml").write_text(
        GOOD.replace("name: small", "name: typo").replace("cluster: prod", "cluster: prd")
    )
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(
            CommandRequest(text="plan load typo", user_id="U0PRIMARY", source="terminal")
        )
        stored = services.store.plan("typo")
    finally:
        services.close()
    text = refused((outcome.ok, outcome.rendered.text))
    assert "`typo` is for cluster `prd`, which this bot does not know (configured: prod)" in text
    assert "Start it" not in text
    assert stored is None  # nothing stored: there is nothing to start


def test_a_window_read_in_utc_by_a_team_in_another_zone_is_warned_of_at_load(
    write_config: Callable[..., Path], plans_dir: Path
) -> None:
    # No `window.timezone`: 14:00 is 14:00 UTC, 15:00 in Berlin, where the team is.
    plan = GOOD.replace(
        'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
        'window: {start: "2026-12-01T14:00", end: "2026-12-01T17:00"}',
    )
    (plans_dir / "berlin.yaml").write_text(plan.replace("name: small", "name: berlin"))
    config = write_config(f"templates_dir: {plans_dir.parent}\ntimezone: Europe/Berlin\n")
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(
            CommandRequest(text="plan load berlin", user_id="U0PRIMARY", source="terminal")
        )
    finally:
        services.close()
    assert outcome.ok, outcome.rendered.text
    assert (
        "the window is read in UTC (2026-12-01 14:00 UTC is 15:00 Europe/Berlin, the configured `timezone`); "
        "if 14:00 was meant in Europe/Berlin, set `window.timezone: Europe/Berlin`"
    ) in outcome.rendered.text
    # The window itself as Slack dates (each reader's zone), not ISO text with an offset.
    assert "· window <!date^1796133600^{date_short_pretty} {time}|2026-12-01 14:00 UTC> – <!date^" in (
        outcome.rendered.text
    )
    assert "T14:00:00+00:00" not in outcome.rendered.text
    # The roster on a line of its own, not run on after the window's end.
    assert "UTC>\nRoster: primary <@U0PRIMARY>" in outcome.rendered.text


def test_a_window_drawn_across_a_clock_change_is_warned_of_at_load(
    write_config: Callable[..., Path], plans_dir: Path
) -> None:
    # 01:30–03:30 New York the night the clocks go forward: one hour of real time, two written.
    plan = GOOD.replace(
        'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
        'window: {start: "2026-03-08T01:30", end: "2026-03-08T03:30", timezone: America/New_York}',
    )
    (plans_dir / "nydst.yaml").write_text(plan.replace("name: small", "name: nydst"))
    config = write_config(f"templates_dir: {plans_dir.parent}\n")
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(
            CommandRequest(text="plan load nydst", user_id="U0PRIMARY", source="terminal")
        )
    finally:
        services.close()
    assert outcome.ok, outcome.rendered.text
    assert (
        "• the window spans a clock change (2026-03-08 in America/New_York, 01:30 EST to 03:30 EDT): 1h of "
        "real time, 2h on the wall clock; scheduled on another day (`/upgrade schedule nydst --at …`) it "
        "lasts 2h, 01:30–03:30"
    ) in outcome.rendered.text
