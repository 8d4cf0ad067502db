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


def test_the_slack_timeout_and_the_takeover_margin_fit_the_lease_by_default() -> None:
    settings = parse_settings("", source=None, env={})
    assert settings.slack_timeout == 6.0
    assert settings.lease_grace == timedelta(seconds=5)
    short = parse_settings("leader: {lease_seconds: 3, renew_seconds: 0.5}\n", source=None, env={})
    # What is left of a lease between two renewals (2.5 s) holds a whole call, with room to spare.
    assert short.slack_timeout == 1.5
    assert short.lease_grace == timedelta(seconds=0.5)


def test_a_slack_timeout_and_a_margin_can_be_chosen() -> None:
    settings = parse_settings(
        "leader: {lease_seconds: 30, renew_seconds: 5, takeover_margin_seconds: 8}\nslack: {timeout_seconds: 12}\n",
        source=None,
        env={},
    )
    assert (settings.slack_timeout, settings.lease_grace) == (12.0, timedelta(seconds=8))


def test_a_slack_timeout_that_does_not_fit_between_two_renewals_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"slack\.timeout_seconds: must be shorter than leader\.lease_seconds"
    ):
        parse_settings("slack: {timeout_seconds: 10}\n", source=None, env={})


def test_the_outbox_limits_default_to_10_failures_or_5_minutes_and_can_be_set() -> None:
    settings = parse_settings("", source=None, env={})
    assert (settings.outbox_dead_after_failures, settings.outbox_dead_after) == (10, timedelta(minutes=5))
    chosen = parse_settings("outbox: {dead_after_failures: 4, dead_after: 2m}\n", source=None, env={})
    assert (chosen.outbox_dead_after_failures, chosen.outbox_dead_after) == (4, timedelta(minutes=2))
    with pytest.raises(ConfigError, match=r"outbox\.dead_after: must be at least 10s"):
        parse_settings("outbox: {dead_after: 1s}\n", source=None, env={})
    with pytest.raises(ConfigError, match=r"outbox"):
        parse_settings("outbox: {after: 1m}\n", source=None, env={})
