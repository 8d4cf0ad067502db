"""The leader's lease settings: defaults, a `leader:` block, and a renew interval too long for it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.errors import ConfigError
from bot.settings import parse_settings


def test_the_lease_defaults_to_15_seconds_renewed_every_5() -> None:
    settings = parse_settings("", source=None, env={})
    assert (settings.lease_duration, settings.lease_renew) == (timedelta(seconds=15), timedelta(seconds=5))


def test_a_leader_block_sets_the_lease_and_its_renewal() -> None:
    settings = parse_settings("leader: {lease_seconds: 30, renew_seconds: 2.5}\n", source=None, env={})
    assert (settings.lease_duration, settings.lease_renew) == (timedelta(seconds=30), timedelta(seconds=2.5))


def test_a_renewal_longer_than_half_the_lease_is_refused_with_its_key() -> None:
    with pytest.raises(
        ConfigError, match=r"leader\.renew_seconds: must be at most half of leader\.lease_seconds"
    ):
        parse_settings("leader: {lease_seconds: 10, renew_seconds: 6}\n", source=None, env={})


def test_an_unknown_leader_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"leader"):
        parse_settings("leader: {lease: 10}\n", source=None, env={})
