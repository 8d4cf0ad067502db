"""The one fake clock of the tests: time is an input, so a test names the instant and moves it.

Pass a `FakeClock` wherever the bot takes a `clock` (a callable returning an aware `datetime`);
the test then `.set()`s or `.advance()`s it instead of sleeping.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class FakeClock:
    """A clock that stands still until the test moves it."""

    def __init__(self, now: datetime) -> None:
        self._now = self._aware(now)

    def __call__(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> datetime:
        """Jump to `moment` (forwards or back); the new now."""
        self._now = self._aware(moment)
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move on by `delta`; the new now."""
        self._now += delta
        return self._now

    @staticmethod
    def _aware(moment: datetime) -> datetime:
        # A naive datetime would compare unequal to every stored (aware) one and fail far away.
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ValueError(f"a fake clock needs a timezone-aware datetime, not {moment!r}")
        return moment


class FakeMonotonic:
    """A monotonic clock in seconds whose `sleep` moves it on at once (for budgets and intervals)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(seconds, 0.0)

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
