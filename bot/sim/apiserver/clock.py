"""The simulated clock: wall-clock seconds that run `speed` times faster than real time.

Everything in the simulator that has a duration (a pod pulling its image, a node joining, a
control-plane upgrade) is scheduled on this clock, never on `time.sleep`, so `--speed 100` plays a
two-hour upgrade in just over a minute and `speed=0` freezes time for tests that step it with
`advance`. Real time still governs what clients control: watch timeouts and kubectl's retries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime


class SimClock:
    """Simulated Unix time. `now()` = epoch + (real time elapsed) × speed + manual jumps."""

    def __init__(
        self,
        *,
        speed: float = 1.0,
        epoch: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._speed = float(speed)
        self._anchor_real = monotonic()
        self._anchor_sim = time.time() if epoch is None else float(epoch)

    @property
    def speed(self) -> float:
        return self._speed

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        with self._lock:
            self._reanchor()
            self._speed = float(speed)

    def now(self) -> float:
        with self._lock:
            return self._anchor_sim + (self._monotonic() - self._anchor_real) * self._speed

    def jump_to(self, when: float) -> None:
        """Move simulated time forward to `when` (never backwards: resourceVersions and ages rely on it)."""
        with self._lock:
            self._reanchor()
            self._anchor_sim = max(self._anchor_sim, when)

    def real_seconds_until(self, when: float) -> float | None:
        """Real seconds until simulated time reaches `when`; None when the clock is frozen."""
        with self._lock:
            if self._speed == 0:
                return None
            now = self._anchor_sim + (self._monotonic() - self._anchor_real) * self._speed
            return max(0.0, (when - now) / self._speed)

    def _reanchor(self) -> None:
        real = self._monotonic()
        self._anchor_sim += (real - self._anchor_real) * self._speed
        self._anchor_real = real


def rfc3339(when: float) -> str:
    """Kubernetes `Time`: second precision, UTC, `Z`."""
    return datetime.fromtimestamp(int(when), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(when: float) -> str:
    """Kubernetes `MicroTime` (events' eventTime, leases' renewTime)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_nano(when: float) -> str:
    """The kubelet's log timestamp format (nanoseconds, padded from microseconds)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch for a Kubernetes timestamp; None for empty or unparsable values."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


#: kubectl's AGE steps, finest first: a unit's seconds and letter, the next finer unit's seconds and
#: letter, and the counts of the unit below which it is shown with the finer unit's remainder
#: (`2m30s`), then alone (`5m`); past the last, the next coarser step.
_AGE_STEPS = (
    (60, "m", 1, "s", 10, 180),
    (3600, "h", 60, "m", 8, 48),
    (86400, "d", 3600, "h", 8, 365 * 2),
    (86400 * 365, "y", 86400, "d", 8, None),
)


def human_duration(seconds: float) -> str:
    """kubectl's AGE format: 45s, 2m30s, 5m, 3h12m, 2d5h, 120d, 3y20d."""
    if seconds < -1:
        return "<invalid>"
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    for unit, letter, finer, finer_letter, with_rest, alone in _AGE_STEPS:
        count = s // unit
        if count < with_rest:
            rest = s % unit // finer
            return f"{count}{letter}{rest}{finer_letter}" if rest else f"{count}{letter}"
        if alone is None or count < alone:
            return f"{count}{letter}"
    raise AssertionError("unreachable: the last step takes every count")


def parse_duration(value: str | float | int) -> float:
    """`90`, `90s`, `15m`, `2h`, `1d`, `1h30m` → seconds (scenario files use these)."""
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = text[i : i + 2] if text[i : i + 2] == "ms" else ch
        if unit not in units or not number:
            raise ValueError(f"not a duration: {value!r}")
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    if number:
        raise ValueError(f"not a duration (missing unit): {value!r}")
    return total
