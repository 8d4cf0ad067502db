"""What announcements see of a plan and its run: the `plan`, `run` and evidence parts of a
template's context (`templates/announcements/README.md` lists them), built from the run as it is
committed and the store's snapshots and evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.core.announcements.templates import (
    AnnouncementInfo,
    ChosenInfo,
    EvidenceLine,
    LeftBehindInfo,
    Link,
    PlanInfo,
    RunInfo,
    SkippedStepInfo,
    StepInfo,
    WindowSpan,
    build_context,
)
from bot.core.evidence.view import EvidenceSource, alerts_summary, number
from bot.core.runs import machine as R
from bot.core.runs.chosen import run_chosen
from bot.core.runs.paused import ending
from bot.core.runs.plans import Plan

#: Run states → the words announcement templates know.
_RUN_STATE = {
    R.RunState.ACTIVE: "running",
    R.RunState.PAUSED: "paused",
    R.RunState.COMPLETED: "completed",
    R.RunState.ABORTED: "aborted",
}


def plan_info(
    plan: Plan, *, start: datetime | None = None, end: datetime | None = None, tz: str = ""
) -> PlanInfo:
    """What announcements say about `plan`; a scheduled window replaces the plan's own."""
    zone = tz or plan.window.timezone
    begin = start or plan.window.start
    finish = end or (plan.window.end if start is None else begin.astimezone(UTC) + plan.window.length)
    return PlanInfo(
        name=plan.name,
        cluster=plan.cluster,
        current_version=plan.current_version,
        target_version=plan.target_version,
        window=WindowSpan(start=begin, end=finish, tz=zone),
        impact=plan.impact,
        links=tuple(Link(title=link.title, url=link.url) for link in plan.links),
    )


def run_info(
    run: R.Run,
    step_id: str = "",
    evidence: Sequence[EvidenceLine] = (),
    regressions: Sequence[str] = (),
    cordoned: Sequence[str] = (),
) -> RunInfo:
    """The run as announcements see it: its state and `step_id` (default: the step it finished last;
    for an aborted run, the step it stopped at, as its card says)."""
    total = len(run.steps)
    step: StepInfo | None = None
    finished = (R.StepState.SUCCEEDED, R.StepState.SKIPPED)
    done = [i for i, s in enumerate(run.steps) if s.state in finished]
    if not step_id and run.state == R.RunState.ABORTED:
        done = [i for i, s in enumerate(run.steps) if s.state not in finished][:1] or done
    if step_id:
        done = [i for i, s in enumerate(run.steps) if s.step_id == step_id]
    if done:
        index = done[-1]
        sr = run.steps[index]
        confirmed = tuple(dict.fromkeys(a.user_id for a in run.approvals if a.step_id == sr.step_id))
        step = StepInfo(
            index=index + 1, total=total, name=run.plan.step(sr.step_id).title, confirmed_by=confirmed
        )
    end = ending(run)
    return RunInfo(
        id=run.id,
        state=_RUN_STATE.get(run.state, "running"),
        step=step,
        failed_skipped=tuple(
            SkippedStepInfo(
                id=s.step_id,
                name=s.title,
                failure=s.failure,
                skipped_by=tuple(u for u in s.by.split("+") if u),
                reason=s.reason,
            )
            for s in end.skipped
        ),
        open_findings=tuple(end.findings),
        left_behind=tuple(
            LeftBehindInfo(id=step_id, name=run.plan.step(step_id).title, left=left)
            for step_id, left in end.left
        ),
        evidence=tuple(evidence),
        regressions=tuple(regressions),
        cordoned=tuple(cordoned),
        chosen=tuple(
            ChosenInfo(
                id=c.step_id, name=run.plan.step(c.step_id).title, what=c.what, by=c.by, reasons=c.reasons
            )
            for c in run_chosen(run)
        ),
    )


def evidence_lines(source: EvidenceSource, run: R.Run) -> list[EvidenceLine]:
    """The run's evidence steps, one line each, for the completed announcement."""
    lines = []
    for sr in run.steps:
        view = source(run.id, (sr.step_id,))
        if view is not None and view.alerts is not None:
            lines.append(
                EvidenceLine(
                    step_id=sr.step_id, summary=alerts_summary(view.alerts), outcome=view.alerts.outcome
                )
            )
        elif view is not None:
            for an in view.analyses:
                base = f" · baseline {number(an.baseline)}" if an.baseline is not None else ""
                lines.append(
                    EvidenceLine(
                        step_id=sr.step_id,
                        summary=f"Analysis: {len(an.points)} measurement(s) · last {number(an.value)}{base}",
                        outcome=an.outcome,
                    )
                )
    return lines


def plan_context(
    plan: Plan,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    tz: str = "",
    run: R.Run | None = None,
    reason: str | None = None,
    step_id: str = "",
    previous_window: WindowSpan | None = None,
    evidence: Sequence[EvidenceLine] = (),
    regressions: Sequence[str] = (),
    announcement: AnnouncementInfo | None = None,
    cordoned: Sequence[str] = (),
) -> dict[str, Any]:
    """The announcement context for a stored plan (and its run, once there is one)."""
    roster: Mapping[str, Sequence[str]] = run.roster if run is not None else plan.roster
    return build_context(
        plan=plan_info(plan, start=start, end=end, tz=tz),
        roster=roster,
        run=run_info(run, step_id, evidence, regressions, cordoned) if run is not None else None,
        reason=reason if reason is not None else (run.reason if run is not None and run.reason else None),
        previous_window=previous_window,
        announcement=announcement,
    )
