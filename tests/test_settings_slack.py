"""The `slack:` budget settings: defaults, values, and a short answer for a bad one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.settings import parse_settings


def test_defaults_and_values() -> None:
    default = parse_settings("", source=Path("cfg.yaml"), env={})
    assert default.slack_edit_interval == timedelta(seconds=2)
    assert default.slack_updates_per_minute == 50
    chosen = parse_settings(
        "slack: {edit_interval: 5s, updates_per_minute: 20, posts_per_second: 2}\n",
        source=Path("cfg.yaml"),
        env={},
    )
    assert chosen.slack_edit_interval == timedelta(seconds=5)
    assert chosen.slack_updates_per_minute == 20
    assert chosen.slack_posts_per_second == 2.0


def test_a_bad_value_is_named() -> None:
    with pytest.raises(ConfigError, match=r"slack\.updates_per_minute"):
        parse_settings("slack: {updates_per_minute: 0}\n", source=Path("cfg.yaml"), env={})
