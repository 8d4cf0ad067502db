"""What a gate button carries (`ButtonRef`): the run, the step and the step's epoch, so a click on a
button of a gate that has since closed is told it is stale. `bot.core.runs.machine` re-exports it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class ButtonRef:
    """What a gate button carries: enough to find the step and to tell whether it is stale."""

    run_id: str
    step_id: str
    epoch: int
    decision: str = field(default="approve")

    def encode(self) -> str:
        return f"{self.run_id}|{self.step_id}|{self.epoch}"

    @classmethod
    def decode(cls, value: str, decision: str) -> ButtonRef | None:
        """None for anything `encode` does not make: a button value comes from outside (a forged
        or mangled one must not reach `int()`, whose digit limit and Unicode digits raise; Slack
        caps a button value at 2,000 characters)."""
        match = _BUTTON_REF.fullmatch(value) if len(value) <= 2_000 else None
        if match is None:
            return None
        return cls(run_id=match[1], step_id=match[2], epoch=int(match[3]), decision=decision)


#: run id | step id | epoch, each bounded; ASCII digits only (`str.isdigit` accepts "²" and "١").
_BUTTON_REF = re.compile(r"([^|]*)\|([^|]*)\|([0-9]{1,9})", re.ASCII)
