"""The long duties' timing (`duties:`): defaults, a block that shortens them (the crash tests' own),
and a heartbeat too slow for its stale-after interval."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.errors import ConfigError
from bot.settings import parse_settings


def test_the_duties_scan_every_5_seconds_beat_every_3_and_are_stale_after_15() -> None:
    settings = parse_settings("", source=None, env={})
    assert (settings.duty_scan, settings.duty_heartbeat, settings.duty_stale_after) == (
        timedelta(seconds=5),
        timedelta(seconds=3),
        timedelta(seconds=15),
    )


def test_a_duties_block_sets_the_scan_the_heartbeat_and_the_stale_after_interval() -> None:
    settings = parse_settings(
        "duties: {scan_seconds: 0.5, heartbeat_seconds: 0.25, stale_after_seconds: 3}\n", source=None, env={}
    )
    assert (settings.duty_scan, settings.duty_heartbeat, settings.duty_stale_after) == (
        timedelta(seconds=0.5),
        timedelta(seconds=0.25),
        timedelta(seconds=3),
    )


@pytest.mark.parametrize(
    "block",
    [
        "duties: {heartbeat_seconds: 2, stale_after_seconds: 3}\n",
        # The default heartbeat (3 s) does not fit twice in a stale-after interval of 5 s.
        "duties: {stale_after_seconds: 5}\n",
    ],
)
def test_a_heartbeat_longer_than_half_the_stale_after_interval_is_refused_with_its_key(block: str) -> None:
    with pytest.raises(
        ConfigError, match=r"duties\.heartbeat_seconds: must be at most half of duties\.stale_after_seconds"
    ):
        parse_settings(block, source=None, env={})


def test_an_interval_out_of_bounds_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"duties\.scan_seconds"):
        parse_settings("duties: {scan_seconds: 0}\n", source=None, env={})
