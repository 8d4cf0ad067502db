"""What people read of a fleet run: the status text (`fleet status`, the terminal) and the rows of
the fleet card (`bot.core.fleets.card`), from one view of the fleet and its child runs.

Both are Slack markup: the people its reasons name by id ("rejected by U0PRIMARY") as mentions,
which Slack shows by name (`shown`), and the soak's start as a Slack date token each reader sees
in their own zone; the terminal renders them (`bot.frontdoor.termtext`: `@name`, a local time).

A row is one cluster: its stage, state, versions (from its pinned plan), its child run's current
step, and whether it is stalled (a running child with no progress for `stall_after`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from markupsafe import Markup

from bot.core.durations import format_duration
from bot.core.evidence.view import at_time
from bot.core.fleets import machine as M
from bot.core.fleets.plan import ResolvedStage
from bot.core.rendering import people
from bot.errors import clip
from bot.records import RunRow

#: A running child whose run has not changed for this long is shown as stalled.
STALL_AFTER = timedelta(minutes=30)
ICONS = {
    M.PENDING: ":white_circle:",
    M.STARTED: ":large_blue_circle:",
    M.SUCCEEDED: ":large_green_circle:",
    M.FAILED: ":red_circle:",
    M.SKIPPED: ":fast_forward:",
}
FLEET_ICONS = {
    M.ACTIVE: ":arrow_forward:",
    M.PAUSED: ":double_vertical_bar:",
    M.COMPLETED: ":white_check_mark:",
    M.ABORTED: ":no_entry:",
}


@dataclass(frozen=True, kw_only=True)
class Row:
    cluster: str
    stage: str
    state: str
    run_id: str
    versions: str
    step: str
    stalled: bool
    reason: str
    #: Why its child run is paused, while it is (it waits for people: a gate's evidence, a failure).
    paused: str = ""

    @property
    def healthy(self) -> bool:
        """A row that may be collapsed first when the card is too big: nothing to look at."""
        return self.state in (M.PENDING, M.SUCCEEDED) and not self.stalled and not self.loose

    @property
    def loose(self) -> bool:
        """Completed only because people skipped failed steps of its run (`machine.COMPLETED_WITH`)."""
        return self.state == M.SUCCEEDED and self.reason.startswith(M.COMPLETED_WITH)

    def line(self, shown: Callable[[str], str] = str) -> str:
        """The row in one line; `shown` turns its reasons (the bot's words, naming people and
        quoting theirs) into what the reader sees (the card: escaped, people as mentions)."""
        icon = ":large_yellow_circle:" if self.loose else ICONS.get(self.state, "")
        parts = [f"{icon} *{self.cluster}* — {self.state}"]
        if self.versions:
            parts.append(self.versions)
        if self.step:
            parts.append(f"step `{self.step}`")
        if self.run_id:
            parts.append(f"run `{self.run_id}`")
        if self.paused:
            parts.append(f":double_vertical_bar: its run is paused, waiting for people: {shown(self.paused)}")
        if self.stalled:
            parts.append(":hourglass: stalled")
        if self.reason:
            parts.append(shown(self.reason))
        return " · ".join(parts)


def shown(text: str) -> str:
    """A row's or the fleet's reason as people read it: the bot's words, escaped, with the people
    they name by id ("reported failed by U0SHADOW") as mentions, which Slack shows by name."""
    return str(people(text))


class View(Protocol):
    """What the fleet's status and its card read (`bot.core.fleets.service.FleetView`)."""

    @property
    def fleet(self) -> M.Fleet: ...

    @property
    def children(self) -> Mapping[str, RunRow]: ...

    @property
    def versions(self) -> Mapping[str, str]: ...

    @property
    def steps(self) -> Mapping[str, str]: ...


def rows(view: View, now: datetime, stall_after: timedelta = STALL_AFTER) -> list[Row]:
    fleet, versions, steps = view.fleet, view.versions, view.steps
    out = []
    for m in fleet.members:
        run = view.children.get(m.cluster)
        stalled = m.state == M.STARTED and run is not None and now - run.updated_at >= stall_after
        out.append(
            Row(
                cluster=m.cluster,
                stage=fleet.stages[m.stage].stage.name,
                state=m.state,
                run_id=m.run_id,
                versions=versions.get(m.cluster, ""),
                step=steps.get(m.cluster, "") if m.state == M.STARTED else "",
                stalled=stalled,
                reason=m.reason,
                paused=clip(run.reason or "paused", 160)
                if m.state == M.STARTED and run is not None and run.state == "paused"
                else "",
            )
        )
    return out


def headline(fleet: M.Fleet, now: datetime) -> str:
    icon = FLEET_ICONS.get(fleet.state, "")
    stage = fleet.current.stage
    where = f"stage {fleet.stage + 1}/{len(fleet.stages)} `{stage.name}`, {fleet.phase}"
    state = fleet.state
    if fleet.state == M.COMPLETED:
        where = f"all {len(fleet.stages)} stages done"
        if loose := M.loose_ends(fleet):
            icon, state = ":warning:", f"completed, but {loose}"
    return f"{icon} *Fleet {fleet.plan.name}* `{fleet.id}` — {state} · {where}"


def soak_line(fleet: M.Fleet, now: datetime) -> str:
    """The soak clock and its evidence ("" when the current stage is not soaking)."""
    stage = fleet.current.stage
    if fleet.phase != M.SOAKING or not stage.soak or fleet.state in M.ENDED_FLEET:
        return ""
    evidence = ", ".join(stage.evidence) or "no evidence"
    if fleet.reason.startswith(M.NOTHING_SOAKED):
        return (
            f":stopwatch: Soak {format_duration(stage.soak)} has nothing to judge ({evidence} of no upgraded "
            "cluster); `fleet resume` goes on without it"
        )
    if fleet.soak_started_at is None:
        return f":stopwatch: Soak {format_duration(stage.soak)} stopped ({evidence}); `fleet resume` starts it again"
    elapsed = min(now - fleet.soak_started_at, stage.soak)
    return (
        f":stopwatch: Soak {format_duration(elapsed)} of {format_duration(stage.soak)} "
        f"(since {at_time(fleet.soak_started_at, 'UTC')}) · evidence: {evidence}, passing"
    )


def gate_line(fleet: M.Fleet, now: datetime) -> str:
    """Who the next gate waits for ("" when none waits)."""
    waiting = fleet.waiting_for(now)
    if waiting is None:
        return ""
    which, missing = waiting
    return f":raised_hand: The {which} gate of `{fleet.current.stage.name}` waits for {' and '.join(missing)} (`fleet approve`)"


def status_text(view: View, now: datetime) -> Markup:
    """The whole status, for `fleet status` and the terminal: every row, grouped by stage (Slack
    markup, as the card's: see the module's docstring)."""
    fleet = view.fleet
    lines = [headline(fleet, now)]
    if fleet.reason:
        lines.append(f":warning: {shown(fleet.reason)}")
    if nxt := M.over_budget_next(fleet):
        lines.append(f":point_right: {nxt}")
    for extra in (soak_line(fleet, now), gate_line(fleet, now)):
        if extra:
            lines.append(extra)
    all_rows = rows(view, now)
    for i, resolved in enumerate(fleet.stages):
        lines.append(stage_title(i, resolved))
        lines += [f"  {r.line(shown)}" for r in all_rows if r.stage == resolved.stage.name]
    return Markup("\n".join(lines))


def stage_title(i: int, resolved: ResolvedStage) -> str:
    """The `i`th stage's heading (from 0): its number, its name, and how it runs."""
    s = resolved.stage
    marks = [f"max {resolved.concurrency} at once", f"budget {s.failure_budget}"]
    if s.soak:
        marks.append(f"soak {format_duration(s.soak)}")
    return f"*{i + 1}. {s.name}* ({', '.join(marks)})"
