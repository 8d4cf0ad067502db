"""`kubectl_age` prints AGE as kubectl's HumanDuration does, the simulator's API server's own copy
of it (`bot.sim.apiserver.clock.human_duration`, which the sim's `kubectl get` columns show) agreeing
at every boundary where the format changes unit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.core.durations import kubectl_age
from bot.sim.apiserver.clock import human_duration

MINUTE, HOUR, DAY, YEAR = 60, 3600, 86400, 365 * 86400
#: Where HumanDuration changes: 2 minutes, 10 m, 3 h, 8 h, 2 d, 8 d, 2 y, 8 y, and whole units.
BOUNDARIES = [
    2 * MINUTE, 10 * MINUTE, 180 * MINUTE, 8 * HOUR, 48 * HOUR, 8 * DAY, 730 * DAY, 8 * YEAR,
    HOUR, DAY, YEAR,
]  # fmt: skip


@pytest.mark.parametrize("seconds", sorted({b + d for b in BOUNDARIES for d in (-61, -1, 0, 1, 59, 3601)}))
def test_kubectl_age_agrees_with_humanduration_around_each_boundary(seconds: int) -> None:
    assert kubectl_age(timedelta(seconds=seconds)) == human_duration(seconds)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "0s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * HOUR + 12 * MINUTE, "3h12m"),
        (2 * DAY + 5 * HOUR, "2d5h"),
        (120 * DAY, "120d"),
        (3 * YEAR + 20 * DAY, "3y20d"),
        (9 * YEAR + 20 * DAY, "9y"),
    ],
)
def test_kubectl_age_examples(seconds: int, shown: str) -> None:
    assert kubectl_age(timedelta(seconds=seconds)) == shown
