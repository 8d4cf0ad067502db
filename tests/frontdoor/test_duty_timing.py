"""The long duties' timing reaches the assembled bot (`duties:` in the configuration): the scans'
interval, the drivers' heartbeat and how stale a driver's heartbeat is before its job or watch is
taken for gone. The `kill -9` tests (`tests/support/crash.py`) rely on it to find a dead driver in
seconds; an operator gets the defaults."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from bot.frontdoor.assemble import Services, assemble
from bot.settings import load_settings
from tests.support.crash import SHORT_DUTIES


def _timing(services: Services) -> tuple[dict[str, float], dict[str, float | None], timedelta, timedelta]:
    scans = {name: seconds for name, seconds, _ in services.duties.scans()}
    beats = {
        name: lane.kind.driver_options.get("heartbeat_seconds")  # type: ignore[attr-defined]
        for name, lane in services.duties.lanes.items()
    }
    return scans, beats, services.jobs.stale_after, services.watches.stale_after


def test_the_assembled_bot_scans_beats_and_takes_drivers_for_gone_as_the_settings_say(
    write_config: Callable[..., Path],
) -> None:
    services = assemble(load_settings(write_config(SHORT_DUTIES), env={}), with_slack=False)
    try:
        scans, beats, jobs_stale, watches_stale = _timing(services)
    finally:
        services.close()
    assert scans == {"watches": 1.0, "jobs": 1.0}
    assert beats == {"watches": 0.5, "jobs": 0.5}
    assert jobs_stale == watches_stale == timedelta(seconds=4)


def test_without_a_duties_block_the_defaults_hold(write_config: Callable[..., Path]) -> None:
    services = assemble(load_settings(write_config(), env={}), with_slack=False)
    try:
        scans, beats, jobs_stale, watches_stale = _timing(services)
    finally:
        services.close()
    assert scans == {"watches": 5.0, "jobs": 5.0}
    assert beats == {"watches": 3.0, "jobs": 3.0}
    assert jobs_stale == watches_stale == timedelta(seconds=15)
