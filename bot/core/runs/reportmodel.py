"""The run report's data: the frozen records `bot.core.runs.report.build_report` fills from the store.

Nothing here reads the store or renders; `bot.core.runs.reportrender` turns a `Report` into JSON,
Markdown, HTML and the Slack attachments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.core.evidence.view import (
    AlertRow,
    AlertsView,
    AnalysisView,
)
from bot.core.people import named
from bot.records import AuditEntry

#: The report's formats (`upgrade-bot report -o …`, `/upgrade report RUN`).
FORMATS = ("html", "md", "json", "png")
#: How many audit rows the report quotes (the whole trail is `/upgrade audit RUN`).
AUDIT_EXCERPT = 40
#: The watch milestones that are pods going unhealthy (bot.core.watches.milestones).
POD_EPISODES = ("crashloop", "imagepull", "error", "init")


@dataclass(frozen=True, kw_only=True)
class StepBar:
    """One step on the Gantt: waiting for people (opened → started), working (started → finished)."""

    step_id: str
    title: str
    state: str
    opened_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    note: str = ""
    #: (time, who, phase, decision) of each approval or rejection.
    approvals: tuple[tuple[datetime, str, str, str], ...] = ()
    #: From the audit trail: (kind, start, end) with kind "wait" (a gate open, or a failure
    #: waiting for people), "work" or "failed" (working that ended in a failure); `end` None
    #: while still open.
    segments: tuple[tuple[str, datetime, datetime | None], ...] = ()

    def _total(self, kinds: tuple[str, ...]) -> float:
        return sum(
            ((end or start) - start).total_seconds() for kind, start, end in self.segments if kind in kinds
        )

    @property
    def waiting(self) -> float:
        return self._total(("wait",))

    @property
    def working(self) -> float:
        return self._total(("work", "failed"))

    @property
    def paused(self) -> float:
        """Time a gate of this step stood open while people had paused the run (`Report.pauses`)."""
        return self._total(("paused",))


@dataclass(frozen=True, kw_only=True)
class NodeLane:
    """One node in a drain: cordoned → draining → drained (or skipped); blocked evictions marked."""

    name: str
    group: str
    state: str
    cordoned_at: datetime | None = None
    began: datetime | None = None
    blocked_at: datetime | None = None
    ended: datetime | None = None
    forced_by: str = ""
    #: When its drain stopped unfinished (the run aborted, or its job interrupted): the node stays
    #: cordoned from then, not draining.
    stopped_at: datetime | None = None
    #: What became of it after the run's abort (`AfterAbort.answer`), for a node still cordoned then.
    after_abort: str = ""

    @property
    def state_words(self) -> str:
        """Its state as the report's tables say it: "cordoned (its drain stopped by the abort; left
        cordoned)" rather than a `draining` that never ended."""
        if self.state == "pending" and self.stopped_at:
            return "pending (not drained: its drain stopped before it)"
        why = [
            *(
                ["its drain stopped by the abort" if self.after_abort else "its drain stopped"]
                if self.stopped_at
                else []
            ),
            *([self.after_abort] if self.after_abort else []),
        ]
        return f"{self.state} ({'; '.join(why)})" if why else self.state


@dataclass(frozen=True, kw_only=True)
class AfterAbort:
    """The nodes the run's jobs cordoned and that were still cordoned when it was aborted, and the
    answer to the offer to uncordon them (the `after-abort` job, `bot.core.jobs.service`)."""

    nodes: tuple[str, ...]
    #: "left cordoned", "uncordoned", "not answered yet" or "nothing to uncordon".
    answer: str
    by: str = ""
    reason: str = ""
    at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Handoff:
    """A role of the run given to someone else (`/upgrade handoff`): by whom, from whom, when."""

    at: datetime
    role: str
    to: str
    by: str
    #: Who no longer holds it (a holder handing over their own part, or the coordinator's replacing).
    was: tuple[str, ...] = ()
    #: The user group the new holder was added beside ("" when they replaced someone).
    beside: str = ""


@dataclass(frozen=True, kw_only=True)
class Pause:
    """The run paused by someone (`/upgrade pause`) until resumed (`until` None: still paused, or
    it ended paused); not time spent waiting for people at a gate."""

    at: datetime
    by: str
    reason: str
    until: datetime | None = None
    resumed_by: str = ""
    resume_reason: str = ""


@dataclass(frozen=True, kw_only=True)
class PodEpisode:
    """A workload going unhealthy, as a watch posted it (kind: crashloop, imagepull, error, init)."""

    at: datetime
    kind: str
    workload: str


@dataclass(frozen=True, kw_only=True)
class PodCount:
    """The run's unhealthy pods by class (the watches' classes: CrashLoopBackOff, Not ready, …) at
    one moment, summed over the run's watches."""

    at: datetime
    counts: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True, kw_only=True)
class KnownIssueMark:
    """A known issue (a rule) a watch or a job posted, at the time it was posted."""

    at: datetime
    rule: str
    workload: str


@dataclass(frozen=True, kw_only=True)
class AlertsLane:
    """One evidence step of the run on the alert timeline: when it watched Alertmanager, how it
    ended, and the new alerts it saw (the first few, with the whole count)."""

    step_id: str
    started_at: datetime
    ended_at: datetime
    view: AlertsView


@dataclass(frozen=True, kw_only=True)
class EvidenceStep:
    """One evidence check of the run, as the Markdown and JSON reports tell it: an `alerts`,
    `analysis` or `app-health` step, or a check in a disruptive step's `background:`. `outcome`
    is Successful, Failed, Inconclusive, Error, Waived, Running or "not measured (no source)"."""

    step_id: str
    kind: str
    background: bool = False
    outcome: str
    #: The gate's line: "Alerts: 0 new since 14:02 UTC · 3 pre-existing · 0 silenced by this run".
    summary: str
    #: How it ended, in the job's words (who waived it and why; who checked it by eye).
    detail: str = ""
    alerts: AlertsView | None = None
    #: The alerts firing at the baseline (the first `KEPT_BASELINE`; the count is `alerts.pre_existing`).
    at_baseline: tuple[AlertRow, ...] = ()
    analysis: AnalysisView | None = None


#: Alerts of the baseline the report lists by name (the rest are counted).
KEPT_BASELINE = 20


@dataclass(frozen=True, kw_only=True)
class Report:
    run_id: str
    plan: str
    cluster: str
    state: str
    outcome: str
    current_version: str
    target_version: str
    window_start: datetime | None
    window_end: datetime | None
    timezone: str
    started_at: datetime
    ended_at: datetime
    created_by: str
    reason: str
    roster: Mapping[str, tuple[str, ...]]
    steps: tuple[StepBar, ...]
    nodes: tuple[NodeLane, ...]
    episodes: tuple[PodEpisode, ...]
    findings: tuple[str, ...]
    notes: tuple[str, ...]
    audit: tuple[AuditEntry, ...]
    gaps: tuple[str, ...] = field(default=())
    #: The unhealthy pods over time (empty for a run recorded before the watches sampled).
    pods_over_time: tuple[PodCount, ...] = ()
    #: When some watch of the run was sampling (its first sample → its end, merged); outside them
    #: nothing was sampled, and the chart leaves a gap there rather than draw a count.
    sampled_spans: tuple[tuple[datetime, datetime], ...] = ()
    known_issues: tuple[KnownIssueMark, ...] = ()
    #: Slack user id → display name, for the people the report names (`bot.core.people`); the
    #: ids stay in the data (JSON), the texts show the names.
    people: Mapping[str, str] = field(default_factory=dict)

    def who(self, user_id: str) -> str:
        """A person as the report's texts show them: `@Alice`, else the id."""
        return named(user_id, self.people)

    #: (filename, YAML) of each object's manifest a GitOps action kept before changing it
    #: (`bot.core.jobs.gitops`): attached to the report as they were to the step's thread line.
    backups: tuple[tuple[str, str], ...] = ()
    #: The evidence panel: each alerts step on the alert timeline, and each analysis over time
    #: (the analysis job's measurements are loaded by its own loader; empty until then).
    alert_lanes: tuple[AlertsLane, ...] = ()
    analyses: tuple[AnalysisView, ...] = ()
    #: Every evidence check of the run, steps and `background:` checks, in step order.
    evidence: tuple[EvidenceStep, ...] = ()
    #: The nodes still cordoned at the abort and what people answered the offer to uncordon them.
    after_abort: AfterAbort | None = None
    #: The roster's changes during the run, oldest first (`roster` is the roster at the end).
    handoffs: tuple[Handoff, ...] = ()
    #: The run's pauses by people, oldest first.
    pauses: tuple[Pause, ...] = ()

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(n.group for n in self.nodes))

    @property
    def sampled(self) -> tuple[tuple[datetime, datetime], ...]:
        """`sampled_spans`, or one span over the samples for a report built without them."""
        if self.sampled_spans or not self.pods_over_time:
            return self.sampled_spans
        return ((self.pods_over_time[0].at, max(self.ended_at, self.pods_over_time[-1].at)),)

    @property
    def unsampled(self) -> list[tuple[datetime, datetime]]:
        """The stretches of the run when no watch sampled (the chart's gaps), once any watch did."""
        if not self.pods_over_time:
            return []
        out = []
        at = self.started_at
        for start, stop in self.sampled:
            if start > at:
                out.append((at, start))
            at = max(at, stop)
        if at < self.ended_at:
            out.append((at, self.ended_at))
        return out


def utc_stamp(value: datetime | None) -> str:
    """A time as the report prints it, in UTC to the second; a dash when there is none."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def workload_words(key: str) -> str:
    """A workload key ("payments/Deployment/payments-worker") as people write it: "Deployment
    payments/payments-worker" (anything else as it is)."""
    parts = key.split("/")
    return f"{parts[1]} {parts[0]}/{parts[2]}" if len(parts) == 3 and all(parts) else key
