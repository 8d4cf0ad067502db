"""What people see of the evidence: small view models (alerts, analyses) and the renderers the
gate, the card's Now line, the run report and the completed announcement share.

The view models are plain data built from what the evidence jobs store (`alerts_view` reads the
`alerts` job's progress; an analysis view is built from the analysis job's stored measurements
by its loader). The renderers never read a clock or the network: `now` is passed in.

Everything here is sized for Slack: a new alert is one line, labels beyond a line's budget are
counted ("+3 labels"), alerts beyond `ALERT_LINES` are counted ("…and 12 more"), and text read from
Alertmanager or a plan is escaped (`inert`) and cut only at whole words or labels, never inside a
code span or an escape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.core.durations import format_duration
from bot.core.rendering import inert, slack_date
from bot.records import JobRow

#: New alerts listed by name and labels; the rest are counted (Slack: 50 blocks, 3,000 a section).
ALERT_LINES = 10
#: Characters of one alert's line; whole labels beyond it are counted.
ALERT_LINE_BUDGET = 150
#: Analyses shown on a gate; the rest are counted.
ANALYSES_SHOWN = 10
#: Measurements in a series (Argo's default count is 5; a long analysis shows its latest).
SERIES_POINTS = 12
#: A query is shown up to this many characters (in a code span, cut at a space, never inside it).
QUERY_CHARS = 160
#: The alerts job keeps this many new alerts in its progress (the count is kept whole).
KEPT_ALERTS = 20

#: The outcome of an evidence step whose cluster names no source for it (`bot.core.jobs.nosource`):
#: nothing was measured, and it is never shown as passed.
NOT_MEASURED = "not measured (no source)"
#: The outcome of evidence people waived (two people, with reasons): it passed on their word,
#: nothing measured it as good, and it is never shown as Successful (`outcome_of`).
WAIVED = "Waived"
#: How an evidence job's last words say people waived it ("alerts: waived by <@U1> (why) and …").
WAIVED_BY = "waived by "

BARS = "▁▂▃▄▅▆▇█"
#: A measurement with no value (Inconclusive: no data) — a gap, never a zero.
GAP = "·"


@dataclass(frozen=True, kw_only=True)
class AlertRow:
    """One new alert: its fingerprint, labels, when it started, and whether only this run's
    silences hold it (it still counts as new)."""

    fingerprint: str
    labels: Mapping[str, str]
    starts_at: datetime
    silenced_by_run: bool = False

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "") or self.fingerprint


@dataclass(frozen=True, kw_only=True)
class AlertsView:
    """An `alerts` step's evidence now: the counts of the gate's line and the new alerts (the
    first `KEPT_ALERTS`; `new_count` is the whole count)."""

    since: datetime
    new: tuple[AlertRow, ...] = ()
    new_count: int = 0
    pre_existing: int = 0
    silenced_by_run: int = 0
    settle: timedelta = timedelta(minutes=10)
    timeout: timedelta = timedelta(minutes=30)
    #: When the settle window began (None while new alerts fire).
    quiet_since: datetime | None = None
    #: "Running", "Successful", "Failed", "Inconclusive" (judge.Outcome's values), or `WAIVED`.
    outcome: str = "Running"
    #: Why it is Inconclusive (Alertmanager's failure, kept once people waived it), empty otherwise:
    #: the counts were then not read, and are never shown as measured.
    unavailable: str = ""
    #: Every new alert the step saw, firing or gone since (the first few; the report's timeline).
    history: tuple[AlertRow, ...] = ()
    history_count: int = 0
    #: Why nothing was measured: the cluster names no Alertmanager (empty when it does).
    no_source: str = ""

    def settle_left(self, now: datetime) -> timedelta | None:
        """Time until the step passes if nothing new fires (None while new alerts fire)."""
        if self.quiet_since is None or self.new_count:
            return None
        return max(self.quiet_since + self.settle - now, timedelta(0))

    def timeout_left(self, now: datetime) -> timedelta:
        return max(self.since + self.timeout - now, timedelta(0))


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measurement of an analysis: when, its value (None: no data) and its phase."""

    at: datetime
    value: float | None
    phase: str = "Successful"


@dataclass(frozen=True, kw_only=True)
class AnalysisView:
    """An `analysis` step's evidence: its query and conditions, the latest value against the
    baseline, its measurements (oldest first) and its outcome so far."""

    name: str
    query: str
    baseline: float | None
    points: tuple[Point, ...] = ()
    outcome: str = "Running"
    success: str = ""
    failure: str = ""
    reason: str = ""
    #: Measurements it takes in all (its `count`), for "3/5 measured".
    count: int = 0
    #: Why nothing was measured: the cluster names no Prometheus (empty when it does).
    no_source: str = ""

    @property
    def value(self) -> float | None:
        """The latest measured value (None when the last measurement had no data)."""
        return self.points[-1].value if self.points else None

    @property
    def series(self) -> tuple[float | None, ...]:
        return tuple(p.value for p in self.points[-SERIES_POINTS:])


@dataclass(frozen=True, kw_only=True)
class EvidenceView:
    """All the evidence of one step (or one run, for the report and the announcement)."""

    alerts: AlertsView | None = None
    analyses: tuple[AnalysisView, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.alerts is not None or bool(self.analyses)


# ----- loading -------------------------------------------------------------------------------------


def _alert_row(fingerprint: object, alert: Mapping[str, Any], since: datetime) -> AlertRow:
    """An alert as an `alerts` job's progress keeps it; one with no start is dated `since`."""
    return AlertRow(
        fingerprint=str(fingerprint),
        labels={str(k): str(v) for k, v in (alert.get("labels") or {}).items()},
        starts_at=parse_iso(alert.get("startsAt")) or since,
        silenced_by_run=bool(alert.get("silenced_by_run")),
    )


def alerts_view(
    progress: Mapping[str, Any], *, outcome: str = "Running", unavailable: str = ""
) -> AlertsView:
    """The view of an `alerts` job from its stored progress (`bot.core.jobs.alerts`); why it could
    not read Alertmanager is the progress's `unavailable` unless given."""
    unavailable = unavailable or str(progress.get("unavailable") or "")
    seen = progress.get("seen") or {}
    since = parse_iso(progress.get("started")) or datetime.min
    rows = tuple(
        _alert_row(a.get("fingerprint", ""), a, since) for a in (progress.get("new") or ())[:KEPT_ALERTS]
    )
    history = tuple(
        _alert_row(fp, a, since) for fp, a in list((progress.get("history") or {}).items())[:KEPT_ALERTS]
    )
    return AlertsView(
        history=history,
        history_count=int(progress.get("history_count", len(history))),
        since=since,
        new=rows,
        new_count=int(seen.get("new", len(rows))),
        pre_existing=int(seen.get("pre_existing", 0)),
        silenced_by_run=int(seen.get("silenced_by_run", 0)),
        settle=timedelta(seconds=float(progress.get("settle", 600))),
        timeout=timedelta(seconds=float(progress.get("timeout", 1800))),
        quiet_since=parse_iso(progress.get("quiet_since")),
        outcome=NOT_MEASURED
        if progress.get("no_source")
        else outcome or ("Inconclusive" if unavailable else "Running"),
        unavailable=unavailable,
        no_source=str(progress.get("no_source") or ""),
    )


def parse_iso(text: object) -> datetime | None:
    """A stored ISO 8601 time ("…Z" included), aware (UTC when it has no zone); None if absent."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class StepJobs(Protocol):
    """The store's one read the loader needs (`bot.adapters.store`)."""

    def job_of_step(self, run_id: str, step_id: str) -> JobRow | None: ...


#: The job kinds whose progress is evidence, and how each loads.
EVIDENCE_KINDS = frozenset({"alerts", "analysis"})


class EvidenceSource(Protocol):
    """The evidence of the first of `step_ids` that has some (the run cards ask it)."""

    def __call__(self, run_id: str, step_ids: Sequence[str]) -> EvidenceView | None: ...


class StoredEvidence:
    """The evidence of a run's steps, read from their jobs' stored progress: the gate of a step
    shows its own evidence, or that of the step just before it (the settle check a next node
    group's gate is decided on). The analysis job's measurements join here (`AnalysisView`)."""

    def __init__(self, store: StepJobs) -> None:
        self.store = store

    def __call__(self, run_id: str, step_ids: Sequence[str]) -> EvidenceView | None:
        for step_id in step_ids:
            row = self.store.job_of_step(run_id, step_id)
            if row is None or row.kind not in EVIDENCE_KINDS or not row.progress:
                continue
            return step_view(
                row.kind,
                json.loads(row.progress),
                done=row.state == "done",
                ok=bool(row.ok),
                name=step_id,
                detail=row.detail,
            )
        return None


def outcome_of(kind: str, progress: Mapping[str, Any], *, done: bool, ok: bool, detail: str = "") -> str:
    """How an evidence job stands, from its stored progress and its end (`detail`: the job's last
    words): not measured (no source), `WAIVED` (people passed it: its detail says "waived by"),
    an analysis's own verdict, Inconclusive or Running while it goes on; else Successful or
    Failed. No data never passes: waived evidence is never called Successful."""
    if progress.get("no_source"):
        return NOT_MEASURED
    if done and WAIVED_BY in detail:
        return WAIVED
    if kind == "analysis" and str(progress.get("outcome") or "Running") != "Running":
        return str(progress["outcome"])
    if not done:
        return "Inconclusive" if progress.get("unavailable") else "Running"
    return "Successful" if ok else "Failed"


def step_view(
    kind: str, progress: Mapping[str, Any], *, done: bool, ok: bool, name: str = "analysis", detail: str = ""
) -> EvidenceView:
    """One evidence job's view from its stored progress (`kind` in `EVIDENCE_KINDS`); an analysis
    is named by its step (`name`); `detail` is the job's last words (it says whether people
    waived it)."""
    if kind == "analysis":
        return EvidenceView(analyses=(analysis_view(progress, name=name, done=done, ok=ok, detail=detail),))
    return EvidenceView(
        alerts=alerts_view(progress, outcome=outcome_of(kind, progress, done=done, ok=ok, detail=detail))
    )


def _scalar(value: Any) -> float | None:
    """A stored measurement or baseline as one number to draw: a list (several series, which the
    condition itself indexes) is drawn as its sum; null, or anything else, is no data."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        return float(sum(value))
    return None


def analysis_view(
    progress: Mapping[str, Any],
    *,
    name: str = "analysis",
    done: bool = False,
    ok: bool = False,
    detail: str = "",
) -> AnalysisView:
    """The view of an `analysis` job from its stored progress (`bot.core.jobs.analysis`; the keys
    are listed in docs/evidence-gate.md, *Stored measurements*)."""
    points = []
    for m in progress.get("measurements") or []:
        at = parse_iso(m.get("at"))
        if at is None:
            continue
        points.append(Point(at=at, value=_scalar(m.get("value")), phase=str(m.get("phase") or "")))
    outcome = outcome_of("analysis", progress, done=done, ok=ok, detail=detail)
    return AnalysisView(
        name=name,
        query=str(progress.get("query") or ""),
        baseline=_scalar(progress.get("baseline")),
        points=tuple(points),
        outcome=outcome,
        success=str(progress.get("success") or ""),
        failure=str(progress.get("failure") or ""),
        reason=str(progress.get("reason") or ""),
        count=int(progress.get("count") or 0),
        no_source=str(progress.get("no_source") or ""),
    )


# ----- small pieces --------------------------------------------------------------------------------


def number(value: float | None) -> str:
    """A measured value in a few characters: 12.5, 0.0123, 1.2k, 3.4M; "no data" for None."""
    if value is None or math.isnan(value):
        return "no data"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    magnitude = abs(value)
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= size:
            return f"{value / size:.3g}{unit}"
    if magnitude == 0 or magnitude >= 0.01:
        text = f"{value:.3f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    return f"{value:.2g}"


def sparkline(values: Sequence[float | None]) -> str:
    """▁▂▃▅▇ over the values' own range; a measurement with no data is a gap (·), never a bar."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    if not known:
        return GAP * len(values)
    low, high = min(known), max(known)
    span = high - low
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(GAP)
        elif span == 0:
            out.append(BARS[len(BARS) // 2 - 1])
        else:
            out.append(BARS[min(int((v - low) / span * len(BARS)), len(BARS) - 1)])
    return "".join(out)


def _t(value: object, markup: bool) -> str:
    """A value from Alertmanager or a plan on one line: escaped for Slack when this renderer makes
    markup; raw when the caller escapes it (a job's card lines and posts are made inert once, by
    the job service and the card template)."""
    text = " ".join(str(value).split())
    return inert(text, multiline=False) if markup else text


def at_time(moment: datetime, zone: str | None = None) -> str:
    """When something on an evidence line happened: for Slack (`zone`, the plan's), a Slack date
    token each reader sees in their own zone, the plan's zone its fallback; else (the report, a
    job's plain lines) its time in UTC, the zone named — never a bare "14:02" a team elsewhere
    would read as its own time."""
    if zone is not None:
        return str(slack_date(moment, zone, "{time}"))
    return f"{moment.astimezone(UTC):%H:%M} UTC"


def _span(d: timedelta) -> str:
    # Seconds matter in the last minutes of a settle window ("4m12s left").
    return format_duration(timedelta(seconds=int(d.total_seconds())))


def alerts_summary(view: AlertsView, *, markup: bool = False, zone: str | None = None) -> str:
    """The gate's line: "Alerts: 0 new since 14:02 UTC · 3 pre-existing · 5 silenced by this run"; when
    Alertmanager could not be read, that (its counts were not measured: never "0 new"). `zone`:
    for Slack, the plan's (`at_time`)."""
    if view.no_source:
        return f"Alerts: {NOT_MEASURED}"
    if view.unavailable:
        return f"Alerts: could not be read ({_t(view.unavailable[:160], markup)})"
    return (
        f"Alerts: {view.new_count} new since {at_time(view.since, zone)} · {view.pre_existing} pre-existing"
        f" · {view.silenced_by_run} silenced by this run"
    )


def label_text(labels: Mapping[str, str], budget: int = ALERT_LINE_BUDGET, *, markup: bool = True) -> str:
    """`{alertname="X", namespace="y", …}` within `budget` characters by whole labels; the labels
    left out are counted. alertname first, then severity, then the rest by name."""
    order = sorted(labels, key=lambda k: (k != "alertname", k != "severity", k))
    shown: list[str] = []
    used = 2
    for i, key in enumerate(order):
        value = labels[key]
        part = f'{_t(key, markup)}="{_t(value if len(value) <= 60 else value[:59] + "…", markup)}"'
        rest = len(order) - i - 1
        room = budget - used - (len(f", +{rest} labels") if rest else 0)
        if shown and len(part) + 2 > room:
            return "{" + ", ".join(shown) + f", +{len(order) - i} labels" + "}"
        shown.append(part)
        used += len(part) + 2
    return "{" + ", ".join(shown) + "}"


def alert_line(row: AlertRow, *, markup: bool = True, zone: str | None = None) -> str:
    """• `KubeAPIDown` {labels} since 14:05 (silenced by this run)"""
    held = " _(silenced by this run: still counted)_" if row.silenced_by_run else ""
    labels = {k: v for k, v in row.labels.items() if k != "alertname"}
    return f"• `{_t(row.name, markup).replace('`', 'ˋ')}` {label_text(labels, markup=markup)} since {at_time(row.starts_at, zone)}{held}"


def alert_lines(
    view: AlertsView, limit: int = ALERT_LINES, *, markup: bool = True, zone: str | None = None
) -> list[str]:
    """Each new alert on a line with its labels; beyond `limit` (or what was kept), a count."""
    lines = [alert_line(r, markup=markup, zone=zone) for r in view.new[:limit]]
    left = view.new_count - len(lines)
    if left > 0:
        lines.append(f"…and {left} more new alert{'s' if left != 1 else ''} (see Alertmanager)")
    return lines


def gone_lines(
    view: AlertsView, limit: int = 5, *, markup: bool = True, zone: str | None = None
) -> list[str]:
    """The new alerts the step saw that are gone now: a gate decides on them too."""
    firing = {r.fingerprint for r in view.new}
    gone = [r for r in view.history if r.fingerprint not in firing]
    if not gone:
        return []
    lines = [
        "_Seen during the step, gone since:_",
        *(alert_line(r, markup=markup, zone=zone) for r in gone[:limit]),
    ]
    if len(gone) > limit:
        lines.append(f"…and {len(gone) - limit} more")
    return lines


def query_span(query: str, limit: int = QUERY_CHARS, *, markup: bool = True) -> str:
    """The query as a code span, cut at a space before `limit` (never inside the span's quotes)."""
    text = " ".join(query.split()).replace("`", "'")
    if len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        text = text[: cut if cut > limit // 2 else limit].rstrip() + " …"
    return f"`{_t(text, markup)}`"


_OUTCOME_EMOJI = {
    "Successful": ":white_check_mark:",
    WAIVED: ":warning:",
    "Failed": ":x:",
    "Inconclusive": ":grey_question:",
    "Error": ":warning:",
    "Running": ":hourglass_flowing_sand:",
    NOT_MEASURED: ":heavy_minus_sign:",
}


def analysis_lines(view: AnalysisView, *, markup: bool = True) -> list[str]:
    """An analysis on the gate: outcome, value against baseline, the condition, the query, and
    the last measurements as a sparkline and a short series."""
    emoji = _OUTCOME_EMOJI.get(view.outcome, ":grey_question:")
    if view.no_source:
        return [
            f"{emoji} *{_t(view.name, markup)}* — {NOT_MEASURED}",
            f"query {query_span(view.query, markup=markup)} · {_t(view.no_source.split(':', 1)[0], markup)}",
        ]
    measured = f" · {_measured(len(view.points), view.count)} measured" if view.count else ""
    head = (
        f"{emoji} *{_t(view.name, markup)}* — {view.outcome}{measured} · "
        f"value *{number(view.value)}* vs baseline {number(view.baseline)}"
    )
    if view.reason:
        head += f" · {_t(view.reason[:200], markup)}"
    conditions = " · ".join(
        f"{what}: {query_span(expr, 120, markup=markup)}"
        for what, expr in (("success", view.success), ("failure", view.failure))
        if expr
    )
    lines = [
        head,
        f"query {query_span(view.query, markup=markup)}" + (f" · {conditions}" if conditions else ""),
    ]
    if view.points:
        series = view.series
        values = " ".join(number(v) if v is not None else "–" for v in series[-6:])
        lines.append(f"last {len(series)}: {sparkline(series)}  {values}")
    return lines


def _measured(taken: int, count: int) -> str:
    """ "3/5" of an analysis's `count`; "7" once it measured more (a background analysis measures
    before every node, so its `count` is one round's, not a cap: "7/5" read as an error)."""
    return f"{taken}/{count}" if taken <= count else str(taken)


#: How a job's card line begins while its step waits on evidence (the rest says which and why).
WAITING_ON_EVIDENCE = "Waiting on evidence: "


def now_line(view: EvidenceView, now: datetime, *, markup: bool = True) -> str:
    """The card's Now line while a step waits on evidence: "Waiting on evidence: alerts settle
    4m12s left · 0 new" (or the new alerts firing, or why it is Inconclusive)."""
    parts: list[str] = []
    a = view.alerts
    if a is not None:
        if a.no_source:
            parts.append(f"alerts {NOT_MEASURED} — confirm by eye")
        elif a.unavailable:
            parts.append(f"alerts Inconclusive — {_t(a.unavailable[:160], markup)}")
        elif a.new_count:
            names = sorted({r.name for r in a.new})[:3]
            more = "…" if a.new_count > len(names) else ""
            parts.append(
                f"alerts {a.new_count} new firing ({', '.join(_t(n, markup) for n in names)}{more})"
                f" · fails in {_span(a.timeout_left(now))} unless they clear"
            )
        else:
            left = a.settle_left(now)
            parts.append(f"alerts settle {_span(left if left is not None else a.settle)} left · 0 new")
    for an in view.analyses[:3]:
        if an.no_source:
            parts.append(f"{_t(an.name, markup)} {NOT_MEASURED} — confirm by eye")
            continue
        measured = f" {_measured(len(an.points), an.count)}" if an.count else ""
        parts.append(f"{_t(an.name, markup)}{measured} · last {number(an.value)}")
    if len(view.analyses) > 3:
        parts.append(f"+{len(view.analyses) - 3} analyses")
    return WAITING_ON_EVIDENCE + " · ".join(parts) if parts else ""


# ----- Block Kit -------------------------------------------------------------------------------------

#: Characters of one section (Slack refuses a section over 3,000).
SECTION = 2900


def _fit_lines(lines: Sequence[str], limit: int = SECTION) -> str:
    """Whole lines within `limit`, the rest counted — never a line cut in half."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        tail = len(f"\n…and {len(lines) - i} more lines")
        if used + len(line) + 1 + tail > limit:
            out.append(f"…and {len(lines) - i} more lines")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _unread_line(a: AlertsView, markup: bool) -> str:
    """Why the alerts are not measured: Inconclusive, or waived by people on that."""
    if a.outcome == WAIVED:
        return ":warning: Waived by people: it passed on their word, not on a measurement"
    return f":grey_question: Inconclusive — {_t(a.unavailable[:300], markup)}"


def _alerts_lines(a: AlertsView, *, markup: bool, zone: str | None = None) -> list[str]:
    """The alerts' part of the evidence: the summary, why they are not measured, each new alert
    and each gone one (times as Slack dates when there is a `zone`)."""
    lines = [f":rotating_light: *{alerts_summary(a, markup=markup, zone=zone)}*"]
    if a.no_source:
        lines.append(f":heavy_minus_sign: {_t(a.no_source, markup)}")
    if a.unavailable:
        lines.append(_unread_line(a, markup))
    lines.extend(alert_lines(a, markup=markup, zone=zone))
    lines.extend(gone_lines(a, markup=markup, zone=zone))
    return lines


def _analyses_lines(analyses: Sequence[AnalysisView], *, markup: bool) -> list[str]:
    """The analyses' part of the evidence: the first `ANALYSES_SHOWN`, and how many more."""
    lines = [line for an in analyses[:ANALYSES_SHOWN] for line in analysis_lines(an, markup=markup)]
    if len(analyses) > ANALYSES_SHOWN:
        lines.append(f"…and {len(analyses) - ANALYSES_SHOWN} more analyses (the run report has them all)")
    return lines


def evidence_text(view: EvidenceView, *, markup: bool = True) -> list[str]:
    """The evidence as mrkdwn lines (the gate's section, the thread, the announcement)."""
    lines = _alerts_lines(view.alerts, markup=markup) if view.alerts is not None else []
    return lines + _analyses_lines(view.analyses, markup=markup)


def evidence_blocks(view: EvidenceView, zone: str = "UTC") -> list[dict[str, Any]]:
    """The gate's evidence blocks: a section for the alerts (the summary and each new alert) and
    one for the analyses, each within Slack's section limit; at most 3 blocks. Times are Slack
    dates, the plan's `zone` their fallback."""
    sections = [
        _alerts_lines(view.alerts, markup=True, zone=zone) if view.alerts is not None else [],
        _analyses_lines(view.analyses, markup=True),
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _fit_lines(lines)}}
        for lines in sections
        if lines
    ]
    if blocks:
        blocks.insert(0, {"type": "context", "elements": [{"type": "mrkdwn", "text": "*Evidence*"}]})
    return blocks
