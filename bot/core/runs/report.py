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

This module reads the store; the records it fills are in `reportmodel` and the renderings in
`reportrender`, re-exported here where callers have always found them.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.adapters.store import Store
from bot.core.evidence.view import (
    NOT_MEASURED,
    AlertRow,
    AnalysisView,
    alerts_summary,
    alerts_view,
    analysis_view,
    number,
    outcome_of,
)
from bot.core.jobs.gitops import backup_files
from bot.core.people import Directory, display_names, named
from bot.core.runs import reportevents as ev
from bot.core.runs.reportmodel import (
    AUDIT_EXCERPT,
    KEPT_BASELINE,
    POD_EPISODES,
    KnownIssueMark,
    NodeLane,
    PodCount,
    PodEpisode,
    StepBar,
    utc_stamp,
    workload_words,
)
from bot.core.runs.reportmodel import FORMATS as FORMATS
from bot.core.runs.reportmodel import AlertsLane as AlertsLane
from bot.core.runs.reportmodel import EvidenceStep as EvidenceStep
from bot.core.runs.reportmodel import Report as Report
from bot.core.runs.reportrender import attachments as attachments
from bot.core.runs.reportrender import pictures as pictures
from bot.core.runs.reportrender import render as render
from bot.core.runs.reportrender import reply_context as reply_context
from bot.core.runs.reportrender import to_html as to_html
from bot.core.runs.reportrender import to_json as to_json
from bot.core.runs.reportrender import to_markdown as to_markdown
from bot.errors import UserError
from bot.records import Approval, AuditEntry, JobRow, StepRun, WatchRow


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
    shifts = ev.handoffs(audit)
    jobs = store.jobs(states=("live", "interrupted", "done"), run_id=run_id, limit=1000)
    after = ev.after_abort(jobs)
    people = display_names(
        store,
        [
            run.created_by,
            *(p for ps in run.roster.values() for p in ps),
            *(a.user_id for a in approvals),
            *(a.user_id for a in audit),
            *(u for h in shifts for u in (h.to, *h.was)),
            *([after.by] if after is not None and after.by else []),
            *(u for e in audit if e.subcommand == "step_skipped" for u in ev.skip_voters(e)[0]),
        ],
        now=now or datetime.now(UTC),
        directory=directory,
    )
    bars = _step_bars(steps, approvals, titles, audit)
    lanes, findings, backups = _drain_lanes(jobs, people)
    lanes = ev.with_after_abort(lanes, after)
    findings += ev.after_abort_finding(after, people)
    findings += [
        f"{s.step_id} succeeded, leaving for people: {s.left_behind}" for s in steps if s.left_behind
    ]
    run_watches = store.watches(live=False, limit=1000, run_id=run_id)
    episodes, marks, posted = _thread_marks(store, run_id, run_watches, [j.id for j in jobs])
    findings += posted
    sampled = [(w.ended_at, store.watch_samples(w.id)) for w in run_watches]
    series = _pods_over_time(sampled)
    stops = ev.pauses(audit, [s.step_id for s in steps])
    notes = (
        tuple(f"{s.step_id}: {ev.name_ids(named_in(s.note, people), people)}" for s in steps if s.note)
        + run_notes(audit, people)
        + tuple(ev.people_lines(shifts, stops, people))
    )
    for s in steps:
        if str(s.state) == "failed":
            findings.append(f"{s.step_id} failed" + (f": {ev.name_ids(s.note, people)}" if s.note else ""))
    went_past = skipped_failures(audit, {s.step_id for s in steps if str(s.state) == "skipped"}, people)
    findings += went_past.values()
    chosen = forced_past(audit, people)
    findings += chosen
    times = [t for b in bars for t in (b.opened_at, b.started_at, b.finished_at) if t is not None]
    times += [t for b in bars for _, start, stop in b.segments for t in (start, stop) if t is not None]
    started = min([run.created_at, *times])
    ended = max([run.updated_at, *times])
    if now is not None and run.state in ("active", "paused"):
        ended = max(ended, now)  # a run still going: its open bars reach the present
    bars = ev.paused_segments(bars, stops, ended)
    gaps = _gaps(series, lanes, watched=bool(run_watches or episodes))
    scheduled = store.schedule_of_run(run_id)
    window_end = scheduled.window_end if scheduled else plan.window.end if plan else None
    if window_end is not None:
        findings += _past_the_window(bars, window_end, plan.window.zone if plan else ZoneInfo("UTC"))
    return Report(
        run_id=run.id,
        plan=run.plan_name,
        cluster=run.cluster,
        state=run.state,
        outcome=_outcome(run.state, bars, went_past=set(went_past), forced=len(chosen)),
        current_version=plan.current_version if plan else "",
        target_version=plan.target_version if plan else "",
        # The window the run was scheduled in, when it was (`/upgrade schedule --at` any date).
        window_start=scheduled.window_start if scheduled else plan.window.start if plan else None,
        window_end=window_end,
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
        after_abort=after,
        handoffs=tuple(shifts),
        pauses=tuple(stops),
    )


def _past_the_window(bars: Sequence[StepBar], end: datetime, zone: ZoneInfo) -> list[str]:
    """What people did after the window ended: a change record says so, not only its times. One
    finding, each step in it once: "`drain` (02:05–02:09)", "(finished 02:09)", "(started 02:05)".
    A step that never started (its gate timed out, or it was skipped unstarted) did no work: its
    end is no work past the window."""

    def hm(at: datetime) -> str:
        return f"{at.astimezone(zone):%H:%M}"

    late = []
    for b in bars:
        if b.started_at is None:
            continue
        began = b.started_at if b.started_at is not None and b.started_at > end else None
        done = b.finished_at if b.finished_at is not None and b.finished_at > end else None
        if began is not None and done is not None:
            late.append(f"`{b.step_id}` ({hm(began)}–{hm(done)})")
        elif began is not None:
            late.append(f"`{b.step_id}` (started {hm(began)})")
        elif done is not None:
            late.append(f"`{b.step_id}` (finished {hm(done)})")
    if not late:
        return []
    return [
        f"worked past the window's end ({end.astimezone(zone):%Y-%m-%d %H:%M} {zone.key}): {', '.join(late)}"
    ]


def _step_bars(
    steps: Sequence[StepRun],
    approvals: Sequence[Approval],
    titles: Mapping[str, str],
    audit: Sequence[AuditEntry],
) -> list[StepBar]:
    """Each step's bar: its times, its approvals and its wait/work segments from the audit."""
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
    return bars


def _drain_lanes(
    jobs: Sequence[JobRow], people: Mapping[str, str]
) -> tuple[list[NodeLane], list[str], list[tuple[str, str]]]:
    """The drain jobs' nodes as lanes; the jobs' failures and forced or skipped nodes as findings
    (who chose it, by name, and why); and the files the jobs backed up."""
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
        # A drain that stopped unfinished (the run aborted, its job interrupted) left the nodes it
        # was at cordoned, not draining for ever.
        stopped = (job.ended_at or job.updated_at) if job.state != "live" else None
        for name in progress.get("order", []):
            node = progress["nodes"].get(name, {})
            forced = node.get("forced") or {}
            state = str(node.get("state", ""))
            cut = stopped if state in ("cordoned", "draining", "pending") else None
            lanes.append(
                NodeLane(
                    name=name,
                    group=group,
                    state="cordoned" if cut is not None and state != "pending" else state,
                    stopped_at=cut,
                    cordoned_at=_when(node.get("cordoned_at")),
                    began=_when(node.get("began") or node.get("started")),
                    blocked_at=_when(node.get("blocked_at")),
                    ended=_when(node.get("ended")),
                    forced_by=str(forced.get("by", "")),
                )
            )
            if forced:
                findings.append(
                    f"{name}: pods deleted instead of evicted by {named(str(forced.get('by', '')), people)}"
                )
            if node.get("state") == "skipped":
                # A node skipped before people had to give a reason names nobody (`skip` unset).
                skip = node.get("skip") or {}
                by = f" by {named(str(skip['by']), people)}" if skip.get("by") else " by people"
                why = f" ({named_in(str(skip['reason']), people)})" if skip.get("reason") else ""
                findings.append(f"{name}: skipped{by}{why}; it stays cordoned")
    return lanes, findings, backups


def _thread_marks(
    store: Store, run_id: str, run_watches: Sequence[WatchRow], job_ids: Sequence[int] = ()
) -> tuple[list[PodEpisode], list[KnownIssueMark], list[str]]:
    """The pod episodes and known issues posted in the run's thread, its watches' threads and its
    jobs' (a drain posts the budget's KI006 in its own), and the known issues as findings."""
    episodes = []
    marks: list[KnownIssueMark] = []
    findings: list[str] = []
    # The run's thread, then each of its watches' and jobs' own (each keys its known issues `rule:…`).
    threads = [
        store.messages(run_id).items(),
        *(store.messages(f"watch:{w.id}").items() for w in run_watches),
        *(store.messages(f"job:{j}").items() for j in job_ids),
    ]
    for key, ref in (item for thread in threads for item in thread):
        parts = key.split(":")
        kind = next((p for p in parts if p in POD_EPISODES), "")
        workload = parts[parts.index(kind) + 1] if kind and parts.index(kind) + 1 < len(parts) else ""
        if kind and workload and ref.claimed_at is not None:
            # (A watch's `stopped:imagepull` names a kind but no workload: not an episode.)
            episodes.append(PodEpisode(at=ref.claimed_at, kind=kind, workload=workload))
        elif ":rule:" in f":{key}":
            # A known issue a job or a watch posted: `…rule:<id>:<workload>:<episode>`.
            rule = f":{key}".split(":rule:", 1)[1].split(":")
            rule = ["rule", *rule]
            if len(rule) > 2:
                findings.append(f"known issue {rule[1]} on {workload_words(rule[2])}")
                if ref.claimed_at is not None:
                    marks.append(KnownIssueMark(at=ref.claimed_at, rule=rule[1], workload=rule[2]))
    return episodes, marks, findings


def _gaps(series: Sequence[PodCount], lanes: Sequence[NodeLane], *, watched: bool = True) -> list[str]:
    """What the store does not keep for this run, said rather than guessed (`watched`: a watch ran)."""
    gaps = []
    if not watched:
        gaps.append("Unhealthy pods over time: no watch ran in this run, so nothing counted them.")
    elif not series:
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
    return gaps


def _alert_lanes(store: Store, run_id: str, step_ids: Sequence[str], ended: datetime) -> list[AlertsLane]:
    """The run's evidence steps from their jobs' stored progress, in step order."""
    lanes = []
    for step_id in step_ids:
        row = store.job_of_step(run_id, step_id)
        if row is None or row.kind != "alerts" or not row.progress:
            continue
        progress = json.loads(row.progress)
        done, ok = row.state == "done", bool(row.ok)
        view = alerts_view(
            progress, outcome=outcome_of("alerts", progress, done=done, ok=ok, detail=row.detail)
        )
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
            analysis_view(
                json.loads(row.progress),
                name=step_id,
                done=row.state == "done",
                ok=bool(row.ok),
                detail=row.detail,
            )
        )
    return out


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
            outcome = outcome_of(row.kind, progress, done=done, ok=ok, detail=row.detail)
            entry = _evidence_of(
                step_id, row.kind, progress, outcome=outcome, detail=named_in(row.detail), background=False
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
        out.append(f"{utc_stamp(entry.at)} {named(entry.user_id, people or {})}: {_text(entry)}")
    return tuple(out)


def _text(entry: AuditEntry) -> str:
    """A run event's audit detail without the plan's local time the audit row ends with."""
    return ev.text_of(entry)


#: A job's audit rows that record people choosing past a safeguard: a cloud's refusal overridden
#: or forced, a conflict policy that overwrites, evidence waived or judged by eye.
_PAST_SAFEGUARD = ("override chosen: ", "force chosen: ", "conflict policy chosen: ", "evidence:waived: ",
                   "evidence:by-eye: ")  # fmt: skip


#: A Slack mention in a job's words ("waived by <@U0SHADOW>"), as stored or escaped for Slack.
_MENTION = re.compile(r"(?:<|&lt;)@([UW][A-Z0-9]+)(?:>|&gt;)")


def named_in(text: str, people: Mapping[str, str] | None = None) -> str:
    """A job's words with each mention as the person's name (`@Alice`, else the id): a report is
    read outside Slack, where `<@U0SHADOW>` names nobody."""
    return _MENTION.sub(lambda m: named(m[1], people or {}), text)


def forced_past(audit: Sequence[AuditEntry], people: Mapping[str, str] | None = None) -> list[str]:
    """What people chose past a safeguard during the run, each in its job's words ("job 3: override
    chosen: …"), and each gate approved with force ("`delete-pod`: gate approved with force by @A
    (why) and @B (why)"): a run that completed so did not complete cleanly, and its report and a
    rehearsal's last line say so (the audit excerpt keeps only the last rows).

    A gate is forced when every approval that started its step chose force: the votes with force
    since the gate opened count once the step runs, unless the run declined the force (one
    person's force alone: `machine.approve`)."""
    out: list[tuple[str, str]] = []
    votes: dict[str, list[str]] = {}
    for entry in audit:
        if entry.kind == "action" and entry.detail.startswith(_PAST_SAFEGUARD):
            out.append(("", f"{entry.arguments}: {named_in(entry.detail, people)}"))
            continue
        step = entry.arguments
        if entry.kind != "run" or not step:
            continue
        if entry.subcommand == "gate_opened":
            votes.pop(step, None)
        elif entry.subcommand == "approved" and _FORCE_SAID in f" {entry.detail}":
            why = " ".join(_text(entry).split(_FORCE_SAID.strip(), 1)[1].split())
            votes.setdefault(step, []).append(f"{named(entry.user_id, people or {})} ({why})")
        elif entry.subcommand == "step_running" and step in votes:
            out.append((step, f"`{step}`: gate approved with force by {' and '.join(votes.pop(step))}"))
        elif entry.subcommand == "force_declined":
            forced = [i for i, (s, _) in enumerate(out) if s == step]
            if forced:
                del out[forced[-1]]
    return [text for _, text in out]


#: How a gate's approval with force reads in its audit row ("start roles=primary with force: why").
_FORCE_SAID = " with force: "


def skipped_failures(
    audit: Sequence[AuditEntry], skipped: set[str], people: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Each failed-then-skipped step → what it found, from the audit trail: skipping replaces the
    step's note with the skip's reason, so a skipped check's findings (its Required ids and
    objects) and a skipped diff's regressions would otherwise be missing from the report."""
    failed: dict[str, str] = {}
    out: dict[str, str] = {}
    for entry in audit:
        if entry.kind != "run" or entry.arguments not in skipped:
            continue
        if entry.subcommand == "step_failed":
            failed[entry.arguments] = _text(entry)
        elif entry.subcommand == "step_skipped" and entry.arguments in failed:
            why = failed.pop(entry.arguments)
            voters, reason = ev.skip_voters(entry)
            who = " and ".join(named(u, people or {}) for u in voters)
            why = ev.name_ids(why, people or {})
            out[entry.arguments] = f"{entry.arguments} failed and was skipped by {who} ({reason}): {why}"
    return out


_OPENS = {"gate_opened": "wait", "step_running": "work", "step_interrupted": "wait", "step_failed": "wait"}
_CLOSES = frozenset(
    {"step_running", "step_succeeded", "step_failed", "step_skipped", "step_interrupted", "step_stopped"}
)


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


def _outcome(state: str, bars: Sequence[StepBar], *, went_past: set[str], forced: int = 0) -> str:
    """The run's outcome in a line, like "completed: 24 of 28 steps succeeded (4 failed and
    skipped)": a step skipped after it failed (`went_past`, from the audit trail) counts as such,
    as the card's "Completed with 4 failed steps skipped" says it, not as a plain skip."""
    failed = sum(1 for b in bars if b.state == "failed")
    past = sum(1 for b in bars if b.state == "skipped" and b.step_id in went_past)
    skipped = sum(1 for b in bars if b.state == "skipped") - past
    done = sum(1 for b in bars if b.state == "succeeded")
    extra = ", ".join(
        part
        for part in (
            f"{failed} failed" if failed else "",
            f"{past} failed and skipped" if past else "",
            f"{skipped} skipped" if skipped else "",
            f"{forced} past a safeguard by people's choice: see Findings" if forced else "",
        )
        if part
    )
    return f"{state}: {done} of {len(bars)} steps succeeded" + (f" ({extra})" if extra else "")
