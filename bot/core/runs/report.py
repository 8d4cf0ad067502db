"""The run report (issue 31): what happened in one run, told from stored data only.

`build_report(store, run_id)` reads the run, its steps and approvals, its audit rows, its cluster
jobs' stored progress (the drain jobs' per-node times) and its watches' thread posts, so a report
can be rebuilt at any time. The picture is drawn by `bot.adapters.charts` (matplotlib, imported only
when a picture is asked for); this module gives JSON, Markdown (with a Mermaid `gantt` of the
steps) and one self-contained HTML file (the charts inline as base64 PNG). matplotlib is the
optional `charts` extra: without it the HTML has its tables and a line saying why there are no
charts, the run's thread gets the HTML and the Markdown, and `-o png` says what to install.

The unhealthy pods over time come from the run's watches' samples (`watch_samples`: each watch's
unhealthy pods by class, written when they changed, at most every 30 s), summed over the run's
watches, with the known issues the watches and jobs posted marked at their times. What the store
does not keep is said in the report (`Report.gaps`), never guessed: a run recorded before the
samples existed has only the episodes the watches posted, not a count over time; a node's deletion
is known only when a drain found it gone.
"""

from __future__ import annotations

import base64
import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from markupsafe import Markup

from bot.adapters.store import Store
from bot.core.evidence.view import (
    NOT_MEASURED,
    AlertRow,
    AlertsView,
    AnalysisView,
    alerts_summary,
    alerts_view,
    analysis_view,
    number,
    sparkline,
)
from bot.core.jobs.gitops import backup_files
from bot.core.markdown import md_text
from bot.core.people import Directory, display_names, named
from bot.core.rendering import Renderer
from bot.errors import UserError
from bot.records import AuditEntry
from bot.resources import BUILTIN_TEMPLATES

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
    #: The gate's line: "Alerts: 0 new since 14:02 · 3 pre-existing · 0 silenced by this run".
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


def _when(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def build_report(
    store: Store, run_id: str, *, now: datetime | None = None, directory: Directory | None = None
) -> Report:
    """The report of one run, from the store alone; UserError if there is no such run. People are
    named by their cached Slack display names, refreshed through `directory` (`users.info`) when
    it is given (`bot.core.people.display_names`)."""
    from bot.core.runs.plans import parse_plan

    rows = store.run_rows(run_id)
    if rows is None:
        raise UserError(f"no run `{run_id}` (see `/upgrade status`)")
    run, steps, approvals = rows
    plan_row = store.plan_by_id(run.plan_id)
    plan = parse_plan(plan_row.text, source=plan_row.name) if plan_row is not None else None
    titles = {s.id: s.title for s in plan.steps} if plan is not None else {}
    audit = store.audit_entries(run_id=run_id)
    people = display_names(
        store,
        [
            run.created_by,
            *(p for ps in run.roster.values() for p in ps),
            *(a.user_id for a in approvals),
            *(a.user_id for a in audit),
        ],
        now=now or datetime.now(UTC),
        directory=directory,
    )
    segments = _segments(audit)
    bars = []
    for s in steps:
        mine = tuple((a.at, a.user_id, a.phase, a.decision) for a in approvals if a.step_id == s.step_id)
        bars.append(
            StepBar(
                step_id=s.step_id,
                title=titles.get(s.step_id, s.step_id),
                state=str(s.state),
                opened_at=s.opened_at,
                started_at=s.started_at,
                finished_at=s.finished_at,
                note=s.note,
                approvals=mine,
                segments=tuple(segments.get(s.step_id, ())),
            )
        )
    jobs = store.jobs(states=("live", "interrupted", "done"), run_id=run_id, limit=1000)
    lanes: list[NodeLane] = []
    findings: list[str] = []
    backups: list[tuple[str, str]] = []
    for job in jobs:
        backups.extend((f.filename, f.content.decode()) for f in backup_files(job.progress or ""))
        if job.detail and job.ok is False:
            findings.append(f"{job.step_id}: {job.kind} failed: {job.detail}")
        if job.kind != "drain" or not job.progress:
            continue
        args = json.loads(job.args or "{}")
        progress = json.loads(job.progress)
        group = str(args.get("nodegroup") or args.get("node") or job.step_id)
        for name in progress.get("order", []):
            node = progress["nodes"].get(name, {})
            forced = node.get("forced") or {}
            lanes.append(
                NodeLane(
                    name=name,
                    group=group,
                    state=str(node.get("state", "")),
                    cordoned_at=_when(node.get("cordoned_at")),
                    began=_when(node.get("began") or node.get("started")),
                    blocked_at=_when(node.get("blocked_at")),
                    ended=_when(node.get("ended")),
                    forced_by=str(forced.get("by", "")),
                )
            )
            if forced:
                findings.append(f"{name}: pods deleted instead of evicted by {forced.get('by')}")
            if node.get("state") == "skipped":
                findings.append(f"{name}: skipped by people; it stays cordoned")
    episodes = []
    marks: list[KnownIssueMark] = []
    run_watches = store.watches(live=False, limit=1000, run_id=run_id)
    # The run's thread, then each of its watches' own (a watch keys its known issues `rule:…`).
    threads = [
        store.messages(run_id).items(),
        *(store.messages(f"watch:{w.id}").items() for w in run_watches),
    ]
    for key, ref in (item for thread in threads for item in thread):
        parts = key.split(":")
        kind = next((p for p in parts if p in POD_EPISODES), "")
        if kind and ref.claimed_at is not None:
            workload = parts[parts.index(kind) + 1] if parts.index(kind) + 1 < len(parts) else ""
            episodes.append(PodEpisode(at=ref.claimed_at, kind=kind, workload=workload))
        elif ":rule:" in f":{key}":
            # A known issue a job or a watch posted: `…rule:<id>:<workload>:<episode>`.
            rule = f":{key}".split(":rule:", 1)[1].split(":")
            rule = ["rule", *rule]
            if len(rule) > 2:
                findings.append(f"known issue {rule[1]} on {rule[2]}")
                if ref.claimed_at is not None:
                    marks.append(KnownIssueMark(at=ref.claimed_at, rule=rule[1], workload=rule[2]))
    sampled = [(w.ended_at, store.watch_samples(w.id)) for w in run_watches]
    series = _pods_over_time(sampled)
    notes = tuple(f"{s.step_id}: {s.note}" for s in steps if s.note) + run_notes(audit, people)
    for s in steps:
        if str(s.state) == "failed":
            findings.append(f"{s.step_id} failed" + (f": {s.note}" if s.note else ""))
    findings += skipped_failures(audit, {s.step_id for s in steps if str(s.state) == "skipped"}, people)
    times = [t for b in bars for t in (b.opened_at, b.started_at, b.finished_at) if t is not None]
    times += [t for b in bars for _, start, stop in b.segments for t in (start, stop) if t is not None]
    started = min([run.created_at, *times])
    ended = max([run.updated_at, *times])
    if now is not None and run.state in ("active", "paused"):
        ended = max(ended, now)  # a run still going: its open bars reach the present
    gaps = []
    if not series:
        gaps.append(
            "Unhealthy pods over time: this run's watches recorded no samples (runs recorded before "
            "upgrade-bot 0.2.0 kept only their latest summary), so the report shows when each workload went unhealthy "
            "(the episodes they posted), not a count over time."
        )
    if lanes and not any(n.ended for n in lanes):
        gaps.append(
            "Drain end times are not in this run's stored progress (recorded since upgrade-bot 0.2.0)."
        )
    if not lanes:
        gaps.append("No drain job ran in this run: there is no node timeline.")
    gaps.append("A node's deletion after its drain is not recorded by the bot (the cloud ends it).")
    return Report(
        run_id=run.id,
        plan=run.plan_name,
        cluster=run.cluster,
        state=run.state,
        outcome=_outcome(run.state, bars),
        current_version=plan.current_version if plan else "",
        target_version=plan.target_version if plan else "",
        window_start=plan.window.start if plan else None,
        window_end=plan.window.end if plan else None,
        timezone=plan.window.timezone if plan else "UTC",
        started_at=started,
        ended_at=ended,
        created_by=run.created_by,
        reason=run.reason,
        roster=run.roster,
        steps=tuple(bars),
        nodes=tuple(lanes),
        episodes=tuple(sorted(episodes, key=lambda e: e.at)),
        findings=tuple(dict.fromkeys(findings)),
        notes=notes,
        audit=tuple(audit[-AUDIT_EXCERPT:]),
        gaps=tuple(gaps),
        pods_over_time=tuple(series),
        sampled_spans=tuple(_sampled_spans(sampled, ended)),
        known_issues=tuple(sorted(dict.fromkeys(marks), key=lambda m: m.at)),
        people=people,
        backups=tuple(backups),
        alert_lanes=tuple(_alert_lanes(store, run_id, [s.step_id for s in steps], ended)),
        analyses=tuple(_analyses(store, run_id, [s.step_id for s in steps])),
        evidence=tuple(evidence_steps(store, run_id, [s.step_id for s in steps])),
    )


def _alert_lanes(store: Store, run_id: str, step_ids: Sequence[str], ended: datetime) -> list[AlertsLane]:
    """The run's evidence steps from their jobs' stored progress, in step order."""
    lanes = []
    for step_id in step_ids:
        row = store.job_of_step(run_id, step_id)
        if row is None or row.kind != "alerts" or not row.progress:
            continue
        outcome = "" if row.state != "done" else ("Successful" if row.ok else "Failed")
        view = alerts_view(json.loads(row.progress), outcome=outcome)
        finished = (row.ended_at or row.updated_at or ended) if row.state == "done" else ended
        lanes.append(AlertsLane(step_id=step_id, started_at=row.started_at, ended_at=finished, view=view))
    return lanes


def _analyses(store: Store, run_id: str, step_ids: Sequence[str]) -> list[AnalysisView]:
    """Each `analysis` step's measurements over time, in step order (named by its step)."""
    out = []
    for step_id in step_ids:
        row = store.job_of_step(run_id, step_id)
        if row is None or row.kind != "analysis" or not row.progress:
            continue
        out.append(
            analysis_view(json.loads(row.progress), name=step_id, done=row.state == "done", ok=bool(row.ok))
        )
    return out


def _outcome_of(progress: Mapping[str, Any], kind: str, *, done: bool, ok: bool, detail: str) -> str:
    if progress.get("no_source"):
        return NOT_MEASURED
    if done and "waived by" in detail:
        return "Waived"
    if kind == "analysis" and str(progress.get("outcome") or "Running") != "Running":
        return str(progress["outcome"])
    if not done:
        return "Inconclusive" if progress.get("unavailable") else "Running"
    return "Successful" if ok else "Failed"


def _baseline_rows(progress: Mapping[str, Any]) -> tuple[AlertRow, ...]:
    raw = progress.get("baseline")
    if not isinstance(raw, Mapping):
        return ()
    return tuple(
        AlertRow(
            fingerprint=str(fp),
            labels={str(k): str(v) for k, v in (a.get("labels") or {}).items()},
            starts_at=_when(a.get("startsAt")) or datetime.min.replace(tzinfo=UTC),
        )
        for fp, a in list(raw.items())[:KEPT_BASELINE]
        if isinstance(a, Mapping)
    )


def _evidence_of(
    step_id: str, kind: str, progress: Mapping[str, Any], *, outcome: str, detail: str, background: bool
) -> EvidenceStep | None:
    if kind == "alerts":
        view = alerts_view(progress, outcome=outcome)
        return EvidenceStep(step_id=step_id, kind=kind, background=background, outcome=outcome,
                            summary=alerts_summary(view), detail=detail, alerts=view,
                            at_baseline=_baseline_rows(progress))  # fmt: skip
    if kind == "analysis":
        a = analysis_view(progress, name=step_id)
        a = replace(a, outcome=outcome)
        summary = (
            f"{NOT_MEASURED}: {progress.get('no_source')}"
            if progress.get("no_source")
            else f"value {number(a.value)} vs baseline {number(a.baseline)} · {len(a.points)}/{a.count} measured"
        )
        return EvidenceStep(step_id=step_id, kind=kind, background=background, outcome=outcome,
                            summary=summary, detail=detail, analysis=a)  # fmt: skip
    if kind == "app-health":
        seen = progress.get("seen") or {}
        summary = (
            f"Apps: {seen.get('healthy', 0)}/{seen.get('apps', 0)} healthy · "
            f"{seen.get('baseline', 0)} unhealthy at the baseline"
        )
        return EvidenceStep(step_id=step_id, kind=kind, background=background, outcome=outcome,
                            summary=summary, detail=detail)  # fmt: skip
    return None


def evidence_steps(store: Store, run_id: str, step_ids: Sequence[str]) -> list[EvidenceStep]:
    """Every evidence check of the run from its jobs' stored progress, in step order: the
    evidence steps, then within a disruptive step each of its `background:` checks."""
    out: list[EvidenceStep] = []
    for step_id in step_ids:
        row = store.job_of_step(run_id, step_id)
        if row is None or not row.progress:
            continue
        progress = json.loads(row.progress)
        done, ok = row.state == "done", bool(row.ok)
        if row.kind in ("alerts", "analysis", "app-health"):
            outcome = _outcome_of(progress, row.kind, done=done, ok=ok, detail=row.detail)
            entry = _evidence_of(
                step_id, row.kind, progress, outcome=outcome, detail=row.detail, background=False
            )
            if entry is not None:
                out.append(entry)
            continue
        bg = progress.get("background") if isinstance(progress, Mapping) else None
        if not isinstance(bg, Mapping):
            continue
        failure = bg.get("failure") or {}
        for index, check in enumerate(bg.get("checks") or ()):
            state = check.get("state") or {}
            if state.get("no_source"):
                outcome = NOT_MEASURED
            elif check.get("waived"):
                outcome = "Waived"
            elif failure.get("check") == index:
                outcome = "Failed" if failure.get("verdict") == "failed" else "Inconclusive"
            elif done:
                # Checked all along the step and never stopped it (an aborted step says so in `detail`).
                outcome = "Successful" if ok else "Passed while the step ran"
            else:
                outcome = "Running"
            entry = _evidence_of(step_id, str(check.get("name")), state, outcome=outcome,
                                 detail=str(check.get("last") or ""), background=True)  # fmt: skip
            if entry is not None:
                out.append(entry)
    return out


def _pods_over_time(
    watches: Sequence[tuple[datetime | None, Sequence[tuple[datetime, Mapping[str, int]]]]],
) -> list[PodCount]:
    """The watches' samples summed by class at every moment one of them sampled: each watch counts
    with its latest sample until it ended (its final sample is taken as it ends)."""
    times = sorted({at for _, samples in watches for at, _ in samples})
    out: list[PodCount] = []
    for t in times:
        total: dict[str, int] = {}
        for ended, samples in watches:
            if not samples or (ended is not None and t > ended):
                continue
            i = bisect.bisect_right([at for at, _ in samples], t) - 1
            if i < 0:
                continue
            for cls, pods in samples[i][1].items():
                total[cls] = total.get(cls, 0) + pods
        out.append(PodCount(at=t, counts=total))
    return out


def _sampled_spans(
    watches: Sequence[tuple[datetime | None, Sequence[tuple[datetime, Mapping[str, int]]]]],
    until: datetime,
) -> list[tuple[datetime, datetime]]:
    """When some watch was sampling: each watch from its first sample to its end (`until` while it
    runs), overlapping spans merged."""
    spans = sorted((samples[0][0], ended or until) for ended, samples in watches if samples)
    merged: list[tuple[datetime, datetime]] = []
    for start, stop in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def run_notes(audit: Sequence[AuditEntry], people: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The `/upgrade note` entries of the run, oldest first: "<UTC time> <who>: <text>".

    A note is an event of the run (bot.core.runs.machine.note) kept only as its audit row, whose
    detail is the text followed by the plan's local time ("… [2026-11-28 22:05 Asia/Tokyo]");
    the report states times in UTC, so that suffix is dropped.
    """
    out = []
    for entry in audit:
        if entry.kind != "run" or entry.subcommand != "note" or entry.outcome != "ok":
            continue
        out.append(f"{_dt(entry.at)} {named(entry.user_id, people or {})}: {_text(entry)}")
    return tuple(out)


def _text(entry: AuditEntry) -> str:
    """A run event's audit detail without the plan's local time the audit row ends with."""
    text = entry.detail
    if text.endswith("]") and " [" in text:
        text = text[: text.rindex(" [")]
    return text


def skipped_failures(
    audit: Sequence[AuditEntry], skipped: set[str], people: Mapping[str, str] | None = None
) -> list[str]:
    """What each failed-then-skipped step found, from the audit trail: skipping replaces the
    step's note with the skip's reason, so a skipped check's findings (its Required ids and
    objects) and a skipped diff's regressions would otherwise be missing from the report."""
    failed: dict[str, str] = {}
    out = []
    for entry in audit:
        if entry.kind != "run" or entry.arguments not in skipped:
            continue
        if entry.subcommand == "step_failed":
            failed[entry.arguments] = _text(entry)
        elif entry.subcommand == "step_skipped" and entry.arguments in failed:
            why = failed.pop(entry.arguments)
            who = named(entry.user_id, people or {})
            out.append(f"{entry.arguments} failed and was skipped by {who} ({_text(entry)}): {why}")
    return out


def peaks(report: Report) -> list[tuple[str, int, datetime]]:
    """Each class's most unhealthy pods at once, and when first; most first."""
    best: dict[str, tuple[int, datetime]] = {}
    for point in report.pods_over_time:
        for cls, pods in point.counts.items():
            if pods > best.get(cls, (0, point.at))[0]:
                best[cls] = (pods, point.at)
    return sorted(((cls, pods, at) for cls, (pods, at) in best.items()), key=lambda p: (-p[1], p[2]))


#: Audit events (bot.core.runs.machine) that open a segment of a step's time, by the segment kind.
_OPENS = {"gate_opened": "wait", "step_running": "work", "step_interrupted": "wait", "step_failed": "wait"}
_CLOSES = frozenset({"step_running", "step_succeeded", "step_failed", "step_skipped", "step_interrupted"})


def _segments(audit: Sequence[AuditEntry]) -> dict[str, list[tuple[str, datetime, datetime | None]]]:
    """Each step's time as the run's audit rows tell it: waiting for people, working, failed."""
    out: dict[str, list[tuple[str, datetime, datetime | None]]] = {}
    open_: dict[str, tuple[str, datetime]] = {}
    for entry in audit:
        if entry.kind != "run" or not entry.arguments:
            continue
        step, event = entry.arguments, entry.subcommand
        if event == "gate_opened" and entry.detail.startswith("done"):
            continue  # a plain step's "done" confirmation: the people are working, not waiting
        current = open_.get(step)
        if current is not None and (event in _CLOSES or event == "gate_opened"):
            kind = "failed" if event == "step_failed" and current[0] == "work" else current[0]
            out.setdefault(step, []).append((kind, current[1], entry.at))
            del open_[step]
        if event in _OPENS and step not in open_:
            open_[step] = (_OPENS[event], entry.at)
    for step, (kind, start) in open_.items():
        out.setdefault(step, []).append((kind, start, None))
    return out


def _outcome(state: str, bars: Sequence[StepBar]) -> str:
    failed = sum(1 for b in bars if b.state == "failed")
    skipped = sum(1 for b in bars if b.state == "skipped")
    done = sum(1 for b in bars if b.state == "succeeded")
    extra = ", ".join(
        part
        for part in (f"{failed} failed" if failed else "", f"{skipped} skipped" if skipped else "")
        if part
    )
    return f"{state}: {done} of {len(bars)} steps succeeded" + (f" ({extra})" if extra else "")


def _dt(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _dur(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def to_json(report: Report) -> str:
    def default(value: object) -> Any:
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
        if isinstance(value, timedelta):
            # An alerts step's settle and timeout windows.
            return value.total_seconds()
        raise TypeError(type(value))

    body = asdict(report)
    body["audit"] = [asdict(a) for a in report.audit]
    for bar, raw in zip(report.steps, body["steps"], strict=True):
        raw["waiting_seconds"] = bar.waiting
        raw["working_seconds"] = bar.working
    return json.dumps(body, default=default, indent=2, sort_keys=True) + "\n"


def _cell(value: object) -> str:
    # Every value that is not the bot's own words: names from the cluster, people's text.
    return md_text(value)


def _mermaid_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in " -_./()" else " " for c in text)[:60]


def mermaid_gantt(report: Report) -> str:
    """The steps as a Mermaid `gantt`: waiting for people, then working; failures `crit`."""
    title = f"    title Run {_mermaid_name(report.run_id)} ({_mermaid_name(report.plan)})"
    lines = ["gantt", title, "    dateFormat YYYY-MM-DDTHH:mm:ss"]
    lines.append("    axisFormat %H:%M")
    fmt = "%Y-%m-%dT%H:%M:%S"
    names = {"wait": "waiting for people", "work": "working", "failed": "failed"}
    for bar in report.steps:
        lines.append(f"    section {_mermaid_name(bar.step_id)}")
        for i, (kind, start, stop) in enumerate(bar.segments):
            seconds = max(1, int(((stop or report.ended_at) - start).total_seconds()))
            tag = (
                "crit, "
                if kind == "failed"
                else ("done, " if bar.state == "skipped" and kind == "work" else "")
            )
            task = names[kind] + (
                " (skipped)" if bar.state == "skipped" and i == len(bar.segments) - 1 else ""
            )
            lines.append(
                f"    {task} :{tag}{_mermaid_name(bar.step_id).replace(' ', '_')}-{i}, "
                f"{start.astimezone(UTC).strftime(fmt)}, {seconds}s"
            )
    return "\n".join(lines)


def to_markdown(report: Report) -> str:
    out = [f"# Upgrade report: run {_cell(report.run_id)}", ""]
    out += [f"- **{k}**: {_cell(v)}" for k, v in _summary(report)]
    out += ["", "## Steps", "", "```mermaid", mermaid_gantt(report), "```", ""]
    out += ["| step | state | waiting for people | working | approvals |", "|---|---|---|---|---|"]
    for b in report.steps:
        who = ", ".join(f"{d} {p} by {report.who(u)}" for _, u, p, d in b.approvals)
        out.append(
            f"| {_cell(b.step_id)} | {_cell(b.state)} | {_dur(b.waiting)} | {_dur(b.working)} | {_cell(who)} |"
        )
    out += ["", "## Nodes", ""]
    for group in report.groups:
        lanes = [n for n in report.nodes if n.group == group]
        out.append(f"### {_cell(group)} ({len(lanes)} nodes)")
        out.append("")
        out += [
            "| node | state | cordoned | drain began | first blocked | ended |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {_cell(n.name)} | {_cell(n.state)} | {_dt(n.cordoned_at)} | {_dt(n.began)} | {_dt(n.blocked_at)} | {_dt(n.ended)} |"
            for n in lanes
        ]
        out.append("")
    out += ["## Unhealthy pods", ""]
    if report.pods_over_time:
        out += [
            f"Sampled {len(report.pods_over_time)} times by the run's watches, "
            f"{_dt(report.pods_over_time[0].at)} – {_dt(report.pods_over_time[-1].at)}; the peaks:",
            "",
            "| class | peak (pods) | first at |",
            "|---|---|---|",
        ]
        out += [f"| {_cell(cls)} | {pods} | {_dt(at)} |" for cls, pods, at in peaks(report)] or [
            "| none | 0 | — |"
        ]
        out += [""]
        gaps = report.unsampled
        if gaps:
            out += [
                "Not sampled (no watch ran; the chart leaves these blank): "
                + ", ".join(f"{_dt(a)} – {_dt(b)}" for a, b in gaps),
                "",
            ]
        out += [
            f"- known issue {_cell(m.rule)} on {_cell(m.workload)} at {_dt(m.at)}"
            for m in report.known_issues
        ]
        out += [""] if report.known_issues else []
    out += [f"- {_dt(e.at)}: {_cell(e.workload)} ({_cell(e.kind)})" for e in report.episodes] or [
        "- none posted"
    ]
    out += ["", "## Evidence", ""] + (evidence_markdown(report) or ["- no evidence step in this run"])
    for title, items in (
        ("Findings", report.findings),
        ("Notes", report.notes),
        ("Not recorded", report.gaps),
    ):
        out += ["", f"## {title}", ""] + ([f"- {_cell(i)}" for i in items] or ["- none"])
    out += ["", "## Audit excerpt", "", "| at | who | what | outcome | detail |", "|---|---|---|---|---|"]
    out += [
        f"| {_dt(a.at)} | {_cell(report.who(a.user_id))} | {_cell(a.subcommand + ' ' + a.arguments)} | {_cell(a.outcome)} | {_cell(a.detail[:160])} |"
        for a in report.audit
    ]
    return "\n".join(out) + "\n"


def evidence_markdown(report: Report) -> list[str]:
    """Each evidence check: its outcome, the alert timeline (new, at the baseline, silenced by the
    run), each analysis' query, conditions, baseline and measurements."""
    out: list[str] = []
    for e in report.evidence:
        where = " (background)" if e.background else ""
        out += [f"### {_cell(e.step_id)}{where}: {_cell(e.kind)} — {_cell(e.outcome)}", "", _cell(e.summary)]
        if e.detail:
            out += ["", f"_{_cell(e.detail)}_"]
        out.append("")
        if e.alerts is not None and not e.alerts.no_source:
            firing = {r.fingerprint for r in e.alerts.new}
            rows = [
                (r, "new, firing" if r.fingerprint in firing else "new, gone since")
                for r in (e.alerts.history or e.alerts.new)
            ]
            rows += [(r, "at the baseline") for r in e.at_baseline]
            if rows:
                out += [
                    "| alert | labels | started | seen as | silenced by this run |",
                    "|---|---|---|---|---|",
                ]
                out += [
                    f"| {_cell(r.name)} | {_cell(', '.join(f'{k}={v}' for k, v in sorted(r.labels.items()) if k != 'alertname'))} "
                    f"| {_dt(r.starts_at)} | {seen} | {'yes' if r.silenced_by_run else 'no'} |"
                    for r, seen in rows
                ]
                more = max(e.alerts.history_count - len(e.alerts.history), 0)
                if more:
                    out.append(f"\n…and {more} more new alerts")
                out.append("")
        a = e.analysis
        if a is not None:
            out.append(f"- query: {_cell(a.query)}")
            for what, expr in (("success", a.success), ("failure", a.failure)):
                if expr:
                    out.append(f"- {what}: {_cell(expr)}")
            out.append(f"- baseline: {number(a.baseline)}")
            if a.reason and not a.no_source:
                out.append(f"- why: {_cell(a.reason)}")
            out.append("")
            if a.points:
                out += ["| at | phase | value |", "|---|---|---|"]
                out += [f"| {_dt(p.at)} | {_cell(p.phase)} | {number(p.value)} |" for p in a.points]
                out.append("")
    return out


def _summary(report: Report) -> list[tuple[str, str]]:
    roster = "; ".join(
        f"{role}: {', '.join(report.who(p) for p in people)}" for role, people in report.roster.items()
    )
    given: dict[str, list[str]] = {}
    for b in report.steps:
        for _, who, phase, decision in b.approvals:
            if decision in ("approve", "force"):
                given.setdefault(report.who(who), []).append(
                    b.step_id if phase == "start" else f"{b.step_id} (done)"
                )
    approvers = [f"{who}: {len(steps)} gate(s) — {', '.join(steps)}" for who, steps in sorted(given.items())]
    return [
        ("Cluster", report.cluster),
        ("Plan", report.plan),
        ("Versions", f"{report.current_version} → {report.target_version}"),
        ("Window", f"{_dt(report.window_start)} – {_dt(report.window_end)} ({report.timezone})"),
        (
            "Actual",
            f"{_dt(report.started_at)} – {_dt(report.ended_at)} ({_dur((report.ended_at - report.started_at).total_seconds())})",
        ),
        ("Outcome", report.outcome),
        ("Started by", report.who(report.created_by) + (f" — {report.reason}" if report.reason else "")),
        ("Roster", roster),
        ("Approved", "; ".join(approvers) or "—"),
    ]


def to_html(report: Report, charts: Mapping[str, bytes] | None) -> str:
    """One self-contained HTML file: the charts inline (base64 PNG), no network, prints well.
    `charts` None: this install draws none (no matplotlib); the file says so, the tables stay."""
    from bot.adapters.charts import INSTALL_HINT

    # The template names each chart (`src="chart:NAME"`); the base64 goes in after rendering, as
    # the renderer bounds what a template may print (a guard for team templates, not for pictures).
    no_charts = charts is None
    charts = charts or {}
    images = {name: Markup(f"chart:{name}") for name in charts}
    renderer = Renderer([BUILTIN_TEMPLATES])
    html = renderer.render_file(
        "report/report.html.j2",
        {
            "r": report,
            "summary": _summary(report),
            "images": images,
            "no_charts": INSTALL_HINT if no_charts else "",
            "steps": [
                {"b": b, "waiting": _dur(b.waiting), "working": _dur(b.working), "dt": _dt}
                for b in report.steps
            ],
            "groups": [(g, [n for n in report.nodes if n.group == g]) for g in report.groups],
            "peaks": peaks(report),
            "dt": _dt,
            "who": report.who,
            "evidence": evidence_panel(report),
        },
    )
    for name, png in charts.items():
        data = base64.b64encode(png).decode("ascii")
        html = html.replace(f'src="chart:{name}"', f'src="data:image/png;base64,{data}"')
    return html


# ----- the evidence panel (inline SVG: no chart library, no network) ------------------------------

_OUTCOME_COLOUR = {
    "Successful": "#2e7d32",
    "Failed": "#b3261e",
    "Inconclusive": "#8a6d00",
    "Running": "#1565c0",
}


def _x(at: datetime, start: datetime, end: datetime, width: float) -> float:
    span = max((end - start).total_seconds(), 1.0)
    return round(min(max((at - start).total_seconds() / span, 0.0), 1.0) * width, 1)


def alert_timeline_svg(report: Report, width: int = 1000) -> Markup:
    """The alert timeline: one lane per evidence step (its watch over Alertmanager, coloured by
    how it ended) with each new alert marked when it started; the run's span across."""
    lane, left = 28, 150
    height = lane * len(report.alert_lanes) + 24
    start, end = report.started_at, report.ended_at
    body = [
        f'<svg id="alert-timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="Alert timeline of run {escape(report.run_id)}" font-size="12" font-family="sans-serif">'
    ]
    plot = width - left - 10
    for i, ln in enumerate(report.alert_lanes):
        y = i * lane + 4
        x0 = left + _x(ln.started_at, start, end, plot)
        x1 = max(left + _x(ln.ended_at, start, end, plot), x0 + 2)
        colour = _OUTCOME_COLOUR.get(ln.view.outcome, "#555")
        body.append(f'<text x="0" y="{y + 15}">{escape(ln.step_id[:22])}</text>')
        body.append(
            f'<rect x="{x0}" y="{y + 4}" width="{round(x1 - x0, 1)}" height="14" rx="3" fill="{colour}" '
            f'fill-opacity="0.25" stroke="{colour}"><title>{escape(alerts_summary(ln.view))} · '
            f"{escape(ln.view.outcome)}</title></rect>"
        )
        for a in ln.view.history:
            ax = left + _x(a.starts_at, start, end, plot)
            body.append(
                f'<circle cx="{ax}" cy="{y + 11}" r="5" fill="#b3261e"><title>{escape(a.name)} since '
                f"{escape(_dt(a.starts_at))}</title></circle>"
            )
    axis = lane * len(report.alert_lanes) + 18
    body.append(f'<text x="{left}" y="{axis}" fill="#555">{escape(_dt(start))}</text>')
    body.append(f'<text x="{width - 10}" y="{axis}" text-anchor="end" fill="#555">{escape(_dt(end))}</text>')
    body.append("</svg>")
    return Markup("".join(body))


def analysis_svg(view: AnalysisView, index: int, width: int = 480, height: int = 90) -> Markup:
    """One analysis over time: its measurements as a line (a gap where a measurement had no
    data), its baseline dashed, a dot per measurement coloured by its phase."""
    points = list(view.points)
    known = [p.value for p in points if p.value is not None]
    if view.baseline is not None:
        known.append(view.baseline)
    body = [
        f'<svg class="analysis-chart" id="analysis-{index}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(view.name)} over time" font-size="11" font-family="sans-serif">'
    ]
    if points and known:
        low, high = min(known), max(known)
        pad = (high - low) * 0.1 or 1.0
        low, high = low - pad, high + pad
        start, end = points[0].at, points[-1].at
        if start == end:
            end = start + _ONE_SECOND

        def y(v: float) -> float:
            return round(height - 14 - (v - low) / (high - low) * (height - 24), 1)

        plot = width - 50
        run: list[str] = []
        lines: list[list[str]] = []
        for p in points:
            if p.value is None:
                if run:
                    lines.append(run)
                run = []
                continue
            run.append(f"{40 + _x(p.at, start, end, plot)},{y(p.value)}")
        if run:
            lines.append(run)
        if view.baseline is not None:
            by = y(view.baseline)
            body.append(
                f'<line x1="40" x2="{width - 10}" y1="{by}" y2="{by}" stroke="#777" stroke-dasharray="4 3"/>'
            )
            body.append(
                f'<text x="{width - 10}" y="{by - 3}" text-anchor="end" fill="#555">baseline {escape(number(view.baseline))}</text>'
            )
        for seg in lines:
            body.append(f'<polyline fill="none" stroke="#1565c0" stroke-width="2" points="{" ".join(seg)}"/>')
        for p in points:
            colour = _OUTCOME_COLOUR.get(p.phase, "#555")
            if p.value is None:
                px = 40 + _x(p.at, start, end, plot)
                body.append(
                    f'<text x="{px}" y="{height - 16}" text-anchor="middle" fill="{colour}">·<title>no data at {escape(_dt(p.at))}</title></text>'
                )
                continue
            body.append(
                f'<circle cx="{40 + _x(p.at, start, end, plot)}" cy="{y(p.value)}" r="3" fill="{colour}">'
                f"<title>{escape(number(p.value))} at {escape(_dt(p.at))} ({escape(p.phase)})</title></circle>"
            )
        body.append(f'<text x="0" y="{y(high - pad) + 4}" fill="#555">{escape(number(high - pad))}</text>')
        body.append(f'<text x="0" y="{y(low + pad) + 4}" fill="#555">{escape(number(low + pad))}</text>')
    else:
        body.append(f'<text x="0" y="{height // 2}" fill="#8a6d00">no measurement with data</text>')
    body.append("</svg>")
    return Markup("".join(body))


_ONE_SECOND = timedelta(seconds=1)


def evidence_panel(report: Report) -> dict[str, Any]:
    """The report's evidence panel: the alert timeline and each analysis over time."""
    return {
        "timeline": alert_timeline_svg(report) if report.alert_lanes else "",
        "lanes": [
            {
                "l": ln,
                "summary": alerts_summary(ln.view),
                "alerts": [
                    {
                        "name": a.name,
                        "labels": ", ".join(
                            f'{k}="{v}"' for k, v in sorted(a.labels.items()) if k != "alertname"
                        ),
                        "at": _dt(a.starts_at),
                        "silenced": a.silenced_by_run,
                    }
                    for a in ln.view.history
                ],
                "more": max(ln.view.history_count - len(ln.view.history), 0),
            }
            for ln in report.alert_lanes
        ],
        "analyses": [
            {
                "a": a,
                "svg": analysis_svg(a, i),
                "value": number(a.value),
                "baseline": number(a.baseline),
                "spark": sparkline(a.series),
            }
            for i, a in enumerate(report.analyses)
        ],
    }


def render(report: Report, fmt: str) -> bytes:
    """The report in one of `FORMATS` (the picture and the HTML's charts draw with matplotlib;
    without it the picture is a `UserError` naming the extra, the HTML comes without charts)."""
    if fmt == "json":
        return to_json(report).encode()
    if fmt == "md":
        return to_markdown(report).encode()
    from bot.adapters import charts

    if fmt == "png":
        if not charts.available():
            raise UserError(
                f"the timeline picture needs matplotlib, which is not installed: {charts.INSTALL_HINT}"
            )
        return charts.timeline_png(report)
    if fmt == "html":
        return to_html(report, charts.html_charts(report) if charts.available() else None).encode()
    raise UserError(f"unknown report format {fmt!r} (one of {', '.join(FORMATS)})")


def pictures() -> bool:
    """Whether this install draws the report's pictures (matplotlib, the `charts` extra)."""
    from bot.adapters import charts

    return charts.available()


def attachments(report: Report) -> list[tuple[str, bytes, str, str]]:
    """(filename, content, title, filetype) of the picture (when matplotlib is installed), the
    HTML, the Markdown, and the manifests GitOps actions kept before changing them."""
    stem = f"upgrade-bot-run-{report.run_id}"
    return [
        *(
            [(f"{stem}.png", render(report, "png"), f"Run {report.run_id}: timeline", "png")]
            if pictures()
            else []
        ),
        (f"{stem}.html", render(report, "html"), f"Run {report.run_id}: report", "html"),
        (f"{stem}.md", render(report, "md"), f"Run {report.run_id}: report (Markdown)", "markdown"),
        *(
            (name, body.encode(), f"Run {report.run_id}: {name} (kept before the change)", "yaml")
            for name, body in report.backups
        ),
    ]


def reply_context(report: Report) -> dict[str, Any]:
    """What the reply's template (`report`) shows: totals and the three slowest drains."""
    took = [
        (n, (n.ended - n.began).total_seconds())
        for n in report.nodes
        if n.began is not None and n.ended is not None
    ]
    slowest = sorted(took, key=lambda pair: -pair[1])[:3]
    return {
        "r": report,
        "waiting": _dur(sum(b.waiting for b in report.steps)),
        "working": _dur(sum(b.working for b in report.steps)),
        "slowest": [{"name": n.name, "group": n.group, "took": _dur(t)} for n, t in slowest],
        "pictures": pictures(),
    }
