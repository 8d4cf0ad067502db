"""The `upgrade-bot rehearse` command line as the rehearsal tests run it, and what its gates print."""

from __future__ import annotations

import subprocess

from tests.support.bot_process import bot_command


def rehearse(*args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "rehearse", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def gate_text(out: str, step: str) -> str:
    """What the gate of `step` printed when it opened (its dry run), up to the first approval."""
    return out.split(f"(`{step}`) — ready to start", 1)[1].split("approved the start of", 1)[0]
