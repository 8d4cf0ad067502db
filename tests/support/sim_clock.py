"""The simulated clock as the sim's running engine plays it, for tests that compare it with time
moved on at once (`advance`, which catches up a repeated timer in one call)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.sim import SimCluster


def play_seconds(sim: SimCluster, seconds: int) -> None:
    """`seconds` of the sim's clock played as its running engine plays them: a second at a time,
    every timer due by then fired."""
    core = sim.core
    with core.store.lock:
        start = core.clock.now()
        for second in range(1, seconds + 1):
            core.clock.jump_to(start + second)
            core.engine.run_due()


def stamp_seconds(text: str) -> float:
    """An object's RFC 3339 timestamp (`2026-12-01T19:24:03Z`) as Unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()
