"""The `windows:`, `freezes:` and `announcements:` configuration keys, with line-numbered errors."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.core.windows import _links
from bot.errors import ConfigError
from bot.settings import Settings, parse_settings

SOURCE = Path("/etc/upgrade-bot.yaml")


def parse(text: str) -> Settings:
    return parse_settings(text, source=SOURCE, env={})


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value.user_message


def test_windows_and_freezes_load_with_the_team_zone_as_default() -> None:
    settings = parse(
        "timezone: Asia/Tokyo\n"
        "windows:\n"
        "  - days: mon-fri\n"
        "    start: 14:00\n"  # unquoted: YAML 1.1 would read this as 840
        '    end: "17:00"\n'
        "freezes:\n"
        "  - from: 2026-12-25\n"
        "    to: 2027-01-04\n"
        "    reason: year-end freeze\n"
    )
    (window,) = settings.windows.windows
    assert window.weekdays == frozenset(range(5))
    assert (window.start, window.end, window.zone) == (time(14), time(17), "Asia/Tokyo")
    (freeze,) = settings.windows.freezes
    assert freeze.start == datetime(2026, 12, 25, tzinfo=ZoneInfo("Asia/Tokyo"))
    assert freeze.end == datetime(2027, 1, 5, tzinfo=ZoneInfo("Asia/Tokyo"))
    tokyo = ZoneInfo("Asia/Tokyo")
    assert settings.windows.check(
        datetime(2026, 12, 1, 14, tzinfo=tokyo), datetime(2026, 12, 1, 16, tzinfo=tokyo)
    ).ok


def test_no_windows_means_any_time_and_default_announcement_offsets() -> None:
    settings = parse("timezone: UTC\n")
    assert settings.windows.windows == ()
    assert settings.windows.freezes == ()
    assert settings.announcement_offsets == (timedelta(hours=-24), timedelta(hours=-1), timedelta(0))
    assert settings.announcement_grace == timedelta(minutes=30)


def test_announcement_offsets_and_grace_are_configurable() -> None:
    settings = parse("announcements:\n  offsets: [-48h, -2h, 0]\n  grace: 0m\n")
    assert settings.announcement_offsets == (timedelta(hours=-48), timedelta(hours=-2), timedelta(0))
    assert settings.announcement_grace == timedelta(0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "windows:\n  - days: mon-fry\n    start: '14:00'\n    end: '17:00'\n",
            ":3: windows[0].days: 'mon-fry' is not a weekday",
        ),
        (
            "windows:\n  - days: mon\n    start: 2pm\n    end: '17:00'\n",
            ":4: windows[0].start: '2pm' is not a time like 14:00",
        ),
        ("windows:\n  - days: mon\n    start: '14:00'\n", ":3: windows[0].end: missing key"),
        (
            "windows:\n  - days: mon\n    start: '14:00'\n    end: '17:00'\n    zone: Mars/Base\n",
            ":6: windows[0].zone: unknown time zone 'Mars/Base'",
        ),
        (
            "windows:\n  - days: mon\n    start: '14:00'\n    ends: '17:00'\n",
            ":5: windows[0].ends: unknown key (did you mean 'end'?)",
        ),
        (
            "freezes:\n  - from: 2026-12-25\n    to: 2026-12-01\n    reason: x\n",
            ":4: freezes[0].to: a freeze's last day is before its first day",
        ),
        (
            "freezes:\n  - from: christmas\n    to: 2026-12-26\n    reason: x\n",
            ":3: freezes[0].from: 'christmas' is not a date like 2026-12-25",
        ),
        ("freezes:\n  - from: 2026-12-25\n    to: 2026-12-26\n", ":3: freezes[0].reason: missing key"),
        ("windows: mon-fri\n", ":2: windows: expected a list"),
        ("announcements:\n  offsets: [24h]\n", ":3: announcements.offsets: '24h': offsets count back"),
        ("announcements:\n  grace: soon\n", ":3: announcements.grace: 'soon' is not a duration"),
    ],
)
def test_bad_window_freeze_and_announcement_keys_name_file_line_and_key(text: str, expected: str) -> None:
    assert error_of("timezone: UTC\n" + text).startswith(f"{SOURCE}{expected}")


def test_an_unknown_timezone_is_said_once_not_again_on_the_windows_and_freezes_that_default_to_it() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(
            "timezone: EST5\n"
            "windows:\n  - {days: fri-sun, start: '22:00', end: '06:00'}\n"
            "freezes:\n  - {from: 2026-12-24, to: 2027-01-04, reason: year-end freeze}\n"
        )
    (problem,) = caught.value.problems
    assert problem.startswith(f"{SOURCE}:1: timezone: unknown time zone 'EST5'")


def test_a_misspelt_zone_is_answered_with_the_nearest_iana_name() -> None:
    assert error_of("timezone: Europe/Berln\n").startswith(
        f"{SOURCE}:1: timezone: unknown time zone 'Europe/Berln' (use an IANA name such as Asia/Tokyo); "
        "did you mean Europe/Berlin?"
    )
    # A city alone, or the wrong case, is the zone it names.
    assert "did you mean Asia/Tokyo?" in error_of(
        "timezone: UTC\nwindows:\n  - {days: mon, start: '14:00', end: '17:00', zone: tokyo}\n"
    )
    # An old alias near the typo is given as its current name (where the system's tzdata says which).
    calcutta = error_of("timezone: Asia/Calcuta\n")
    assert "did you mean Asia/Kolkata?" in calcutta or (
        not _links() and "did you mean Asia/Calcutta?" in calcutta
    ), calcutta
    assert "did you mean" not in error_of("timezone: Mars/Base\n")
