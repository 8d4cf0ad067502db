"""An evidence step on a cluster whose configuration names no source for it: a person check.

The shipped plans carry `alerts` and `analysis` steps, and teams run them on clusters that name no
Alertmanager or Prometheus (`clusters.NAME.alertmanager` / `.prometheus`). Such a step is neither
refused when the plan is loaded (the plan is the team's runbook whatever the cluster) nor passed
silently (nothing was measured, and no data never passes). It asks people instead, in the thread,
with the reason in plain words:

    No Alertmanager configured for prod: nothing measured. Confirm no new alerts by eye

and two answers: **Confirmed by eye** (the step is done on that person's word; the thread, the
audit log (`evidence:by-eye`), the card, the report and the announcement say "not measured (no
source)", never Successful) or **Not fine** (the step fails). The job's progress keeps
`no_source` (the reason) and `outcome` = `NOT_MEASURED`, which `bot.core.evidence.view` reads.

In the `background:` of a disruptive step a check with no source does not pause anything: the
thread says once "not measured: no source" and the card's live section keeps the line
(`bot.core.jobs.background`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.evidence.view import NOT_MEASURED
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.errors import UserError, clip

__all__ = ["KIND", "NOT_MEASURED", "NoSource", "person_check", "unmeasured"]

#: The choice keys of the person check (`evidence_no_source:alerts`): not the Inconclusive pause
#: kind, so the run does not pause; the question waits in the thread like a drain's.
KIND = "evidence_no_source"
#: How long a tick waits before asking again is moot (people answer); the engine's ceiling applies.
WAIT = 3600.0


class NoSource(UserError):
    """The cluster names no source for an evidence kind; the message is the person check's
    question ("No Alertmanager configured for prod: nothing measured. Confirm … by eye")."""

    def __init__(self, server: str, cluster: str, confirm: str) -> None:
        super().__init__(f"No {server} configured for {cluster}: nothing measured. {confirm}")
        self.server = server
        self.cluster = cluster


def unmeasured(progress: Progress, exc: NoSource) -> Progress:
    """`progress` marked as measuring nothing, with why."""
    return {**progress, "no_source": exc.user_message, "outcome": NOT_MEASURED, "reason": exc.user_message}


def person_check(kind: str, progress: Mapping[str, Any], decision: Decision | None) -> Tick:
    """The tick of an evidence job whose cluster names no source: ask, or end on the answer."""
    reason = str(progress.get("no_source") or "")
    key = f"{KIND}:{kind}"
    if decision is not None and decision.choice_key == key:
        if decision.option == "confirm":
            text = f"{kind}: {NOT_MEASURED} — checked by eye by <@{decision.by}>"
            done = {**progress, "confirmed_by": decision.by}
            return Tick(progress=done, posts=(Post(key=key + ":confirmed", text=text, people=(decision.by,)),), done=True, ok=True,
                        detail=text, audit=(("evidence:by-eye", f"{text}: {reason}"),), wait=0.0)  # fmt: skip
        text = f"{kind}: {NOT_MEASURED} — <@{decision.by}> did not confirm it by eye"
        return Tick(progress={**progress, "refused_by": decision.by}, done=True, ok=False, detail=text,
                    audit=(("evidence:by-eye", f"{text}: {reason}"),), wait=0.0)  # fmt: skip
    return Tick(
        progress=dict(progress),
        card=(f"Not measured: {clip(reason, 200)}",),
        choice=Choice(
            key=key,
            question=reason,
            options=(
                ChoiceOption(id="confirm", label="Confirmed by eye"),
                ChoiceOption(id="refuse", label="Not fine: fail the step"),
            ),
        ),
        wait=WAIT,
    )
