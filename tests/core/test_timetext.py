"""Times and spans a cloud writes, as the bot says them (bot/timetext.py)."""

from __future__ import annotations

import pytest

from bot.timetext import said_duration, said_span, said_time


@pytest.mark.parametrize(
    ("iso", "said"),
    [("PT4H0M0S", "4h"), ("PT4H", "4h"), ("PT30M", "30m"), ("PT1H30M", "1h30m"), ("pt90s", "90s")],
)
def test_a_daily_windows_iso_duration_is_said_as_the_bot_says_spans(iso: str, said: str) -> None:
    """GKE gives a daily maintenance window's length as `PT4H0M0S`; `check` said it raw."""
    assert said_duration(iso) == said
    assert said_duration("PT0S") == "0s"


@pytest.mark.parametrize("text", ["?", "4 hours", "P1D", "PT"])
def test_what_is_not_an_hours_minutes_seconds_duration_is_given_back(text: str) -> None:
    assert said_duration(text) == text


def test_times_and_spans_are_said_in_utc_with_the_zone_named() -> None:
    assert said_time("2027-01-04T09:00:00+09:00") == "2027-01-04 00:00 UTC"
    assert (
        said_span("2026-12-24T00:00:00Z", "2027-01-04T00:00:00Z") == "2026-12-24 00:00 – 2027-01-04 00:00 UTC"
    )
    assert said_time("soon") == "soon"
