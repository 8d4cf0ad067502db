"""The sim's AGE column (`clock.human_duration`) reads as kubectl's HumanDuration: the unit grows
with the age, shown with the next finer unit's remainder while the count is small, and each
threshold falls where kubectl puts it."""

from __future__ import annotations

import pytest

from bot.sim.apiserver.clock import human_duration

M, H, D, Y = 60, 3600, 86400, 86400 * 365


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-2, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (601, "10m"),
        (3 * H - 1, "179m"),
        (3 * H, "3h"),
        (3 * H + 12 * M, "3h12m"),
        (8 * H - 1, "7h59m"),
        (8 * H + 30 * M, "8h"),
        (48 * H - 1, "47h"),
        (48 * H, "2d"),
        (2 * D + 5 * H, "2d5h"),
        (8 * D - 1, "7d23h"),
        (8 * D, "8d"),
        (120 * D, "120d"),
        (730 * D - 1, "729d"),
        (730 * D, "2y"),
        (3 * Y + 20 * D, "3y20d"),
        (8 * Y - 1, "7y364d"),
        (8 * Y, "8y"),
        (20 * Y + 5 * D, "20y"),
    ],
)
def test_age_is_shown_as_kubectl_shows_it(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown
