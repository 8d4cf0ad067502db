"""The run report rendered: JSON, Markdown (with a Mermaid `gantt`), one self-contained HTML file
with its inline SVG evidence panel, and the attachments and reply context for Slack.

Everything here reads a built `Report` (`bot.core.runs.reportmodel`) and nothing else: the store is
`bot.core.runs.report.build_report`'s business. The charts come from `bot.adapters.charts`, imported
only when a picture is asked for (matplotlib is the optional `charts` extra).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

from markupsafe import Markup

from bot.core.evidence.view import (
    AnalysisView,
    alerts_summary,
    number,
    sparkline,
)
from bot.core.markdown import md_text
from bot.core.rendering import Renderer, inert
from bot.core.runs.reportevents import text_of
from bot.core.runs.reportmodel import FORMATS, Report, utc_stamp, workload_words
from bot.errors import UserError
from bot.resources import BUILTIN_TEMPLATES


def peaks(report: Report) -> list[tuple[str, int, datetime]]:
    """Each class's most unhealthy pods at once, and when first; most first."""
    best: dict[str, tuple[int, datetime]] = {}
    for point in report.pods_over_time:
        for cls, pods in point.counts.items():
            if pods > best.get(cls, (0, point.at))[0]:
                best[cls] = (pods, point.at)
    return sorted(((cls, pods, at) for cls, (pods, at) in best.items()), key=lambda p: (-p[1], p[2]))


#: Audit events (bot.core.runs.machine) that open a segment of a step's time, by the segment kind.


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
        raw["paused_seconds"] = bar.paused
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
    names = {
        "wait": "waiting for people",
        "work": "working",
        "failed": "failed",
        "paused": "paused by people",
    }
    for bar in report.steps:
        lines.append(f"    section {_mermaid_name(bar.step_id)}")
        for i, (kind, start, stop) in enumerate(bar.segments):
            seconds = max(1, int(((stop or report.ended_at) - start).total_seconds()))
            tag = (
                "crit, "
                if kind == "failed"
                else (
                    "done, "
                    if bar.state == "skipped" and kind == "work"
                    else ("active, " if kind == "paused" else "")
                )
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
    paused = bool(report.pauses)
    out += [
        "| step | state | waiting for people | working |" + (" paused |" if paused else "") + " approvals |",
        "|---|---|---|---|" + ("---|" if paused else "") + "---|",
    ]
    for b in report.steps:
        # With the time: a gate opened again after a failure is approved again, beside its first.
        who = ", ".join(
            f"{vote_words(d, p)} by {report.who(u)} at {at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
            for at, u, p, d in b.approvals
        )
        out.append(
            f"| {_cell(b.step_id)} | {_cell(b.state)} | {_dur(b.waiting)} | {_dur(b.working)} |"
            + (f" {_dur(b.paused)} |" if paused else "")
            + f" {_cell(who)} |"
        )
    out += ["", "## Nodes", ""]
    for group in report.groups:
        lanes = [n for n in report.nodes if n.group == group]
        out.append(f"### {_cell(group)} ({_node_count(lanes)})")
        out.append("")
        out += [
            "| node | state | cordoned | drain began | first blocked | ended |",
            "|---|---|---|---|---|---|",
        ]
        out += [
            f"| {_cell(n.name)} | {_cell(n.state_words)} | {utc_stamp(n.cordoned_at)} | {utc_stamp(n.began)} | {utc_stamp(n.blocked_at)} | {utc_stamp(n.ended)} |"
            for n in lanes
        ]
        out.append("")
    out += ["## Unhealthy pods", ""]
    if report.pods_over_time:
        out += [
            f"Sampled {len(report.pods_over_time)} times by the run's watches, "
            f"{utc_stamp(report.pods_over_time[0].at)} – {utc_stamp(report.pods_over_time[-1].at)}; the peaks:",
            "",
            "| class | peak (pods) | first at |",
            "|---|---|---|",
        ]
        out += [f"| {_cell(cls)} | {pods} | {utc_stamp(at)} |" for cls, pods, at in peaks(report)] or [
            "| none | 0 | — |"
        ]
        out += [""]
        gaps = report.unsampled
        if gaps:
            out += [
                "Not sampled (no watch ran; the chart leaves these blank): "
                + ", ".join(f"{utc_stamp(a)} – {utc_stamp(b)}" for a, b in gaps),
                "",
            ]
        out += [
            f"- known issue {_cell(m.rule)} on {_cell(workload_words(m.workload))} at {utc_stamp(m.at)}"
            for m in report.known_issues
        ]
        out += [""] if report.known_issues else []
    out += [f"- {utc_stamp(e.at)}: {_cell(e.workload)} ({_cell(e.kind)})" for e in report.episodes] or [
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
        f"| {utc_stamp(a.at)} | {_cell(report.who(a.user_id))} | {_cell(a.subcommand + ' ' + a.arguments)} | {_cell(a.outcome)} | {_cell(text_of(a)[:160])} |"
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
                    f"| {utc_stamp(r.starts_at)} | {seen} | {'yes' if r.silenced_by_run else 'no'} |"
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
                out += [f"| {utc_stamp(p.at)} | {_cell(p.phase)} | {number(p.value)} |" for p in a.points]
                out.append("")
    return out


#: A vote in words, by (decision, phase); one not named here reads "DECISION (PHASE)".
_VOTES = {
    ("approve", "start"): "approved the start",
    ("approve", "done"): "confirmed done",
    ("force", "start"): "approved with force",
    ("reject", "start"): "rejected the start",
    ("reject", "done"): "reported a failure",
    ("skip", "skip"): "voted to skip",
    ("evidence_waive", "evidence_waive"): "voted to waive the evidence",
}


def vote_words(decision: str, phase: str) -> str:
    """An approval row as the report says it: "voted to skip", not "skip skip"."""
    return _VOTES.get((decision, phase), f"{decision} ({phase})" if phase and phase != decision else decision)


def _summary(report: Report) -> list[tuple[str, str]]:
    roster = "; ".join(
        f"{role}: {', '.join(report.who(p) for p in people)}" for role, people in report.roster.items()
    )
    # Person → step → the gates of it they passed ("start", "done"; one more each time it reopened).
    given: dict[str, dict[str, list[str]]] = {}
    for b in report.steps:
        for _, who, phase, decision in b.approvals:
            if decision in ("approve", "force"):
                given.setdefault(report.who(who), {}).setdefault(b.step_id, []).append(phase)
    approvers = [f"{who}: {_approved(steps)}" for who, steps in sorted(given.items())]
    # The roster as it changed (`Roster` is the one at the end): who held each role from when.
    handoffs = "; ".join(
        f"{h.role}: {', '.join(report.who(u) for u in h.was) or h.beside or '—'} → {report.who(h.to)} "
        f"at {utc_stamp(h.at)} (by {report.who(h.by)})"
        for h in report.handoffs
    )
    held = sum((((p.until or report.ended_at) - p.at).total_seconds() for p in report.pauses), 0.0)
    paused = (
        f"{len(report.pauses)} time(s), {_dur(held)} in all, not counted as waiting for people: "
        + "; ".join(
            f"{utc_stamp(p.at)} – {utc_stamp(p.until)} by {report.who(p.by)}"
            + (f", resumed by {report.who(p.resumed_by)}" if p.resumed_by else "")
            for p in report.pauses
        )
        if report.pauses
        else ""
    )
    return [
        ("Cluster", report.cluster),
        ("Plan", report.plan),
        ("Versions", f"{report.current_version} → {report.target_version}"),
        ("Window", _window(report)),
        (
            "Actual",
            f"{utc_stamp(report.started_at)} – {utc_stamp(report.ended_at)} ({_dur((report.ended_at - report.started_at).total_seconds())})",
        ),
        ("Outcome", report.outcome),
        ("Started by", report.who(report.created_by)),
        # The run's own reason is why it stopped, not why it started (it once read "Started by:
        # U0PRIMARY — the upgrade: checks failed" for an abort).
        *([(_STOPPED.get(report.state, "Reason"), report.reason)] if report.reason else []),
        ("Roster", roster),
        *([("Hand-offs", handoffs)] if handoffs else []),
        *([("Paused", paused)] if paused else []),
        ("Approved", "; ".join(approvers) or "—"),
    ]


def _window(report: Report) -> str:
    """The window as the team planned it, in the plan's zone, then in UTC as the report's other
    times: "2026-12-05 23:00 – 2026-12-06 02:00 Europe/Berlin (22:00 – 01:00 UTC)"."""
    start, end = report.window_start, report.window_end
    if start is None or end is None:
        return f"{utc_stamp(start)} – {utc_stamp(end)}"
    zone = ZoneInfo(report.timezone)
    here = (
        f"{start.astimezone(zone):%Y-%m-%d %H:%M} – {end.astimezone(zone):%Y-%m-%d %H:%M} {report.timezone}"
    )
    if report.timezone == "UTC":
        return here
    return f"{here} ({start.astimezone(UTC):%Y-%m-%d %H:%M} – {end.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"


def _approved(steps: dict[str, list[str]]) -> str:
    """One person's approvals in the summary: how many, on how many steps, and each step with the
    gates that were not only its start ("4 approvals on 3 steps — drain, settle, review (start and
    done)"): a step's start and done gates are two approvals of one step, not two steps."""
    total = sum(len(phases) for phases in steps.values())
    named = []
    for step_id, phases in steps.items():
        said = [
            phase if (n := phases.count(phase)) == 1 else f"{phase} ×{n}"
            for phase in dict.fromkeys(sorted(phases, key=lambda p: p != "start"))
        ]
        named.append(step_id if said == ["start"] else f"{step_id} ({' and '.join(said)})")
    count = f"{total} approval{'s' if total != 1 else ''}"
    if total != len(steps):
        count += f" on {len(steps)} step{'s' if len(steps) != 1 else ''}"
    return f"{count} — {', '.join(named)}"


#: The summary's label for the run's reason, by its state.
_STOPPED = {"aborted": "Why it was aborted", "paused": "Why it is paused"}


#: A `code` span in the bot's words (a step id, a query, a command): `<code>` in the HTML report.
_CODE = re.compile(r"`([^`\n]+)`")


def code_spans(text: object) -> Markup:
    """`text` as HTML: escaped, its `code` spans set as code, as the Markdown report and Slack
    show them (the backticks were printed as they are)."""
    return Markup(_CODE.sub(r"<code>\1</code>", str(inert(text))))


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
                {
                    "b": b,
                    "waiting": _dur(b.waiting),
                    "working": _dur(b.working),
                    "paused": _dur(b.paused),
                    "dt": utc_stamp,
                }
                for b in report.steps
            ],
            "groups": [(g, [n for n in report.nodes if n.group == g]) for g in report.groups],
            "peaks": peaks(report),
            "dt": utc_stamp,
            # A row's detail without the plan's local time: its time is said once, in UTC.
            "detail": text_of,
            "code": code_spans,
            "who": report.who,
            "vote_words": vote_words,
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
    # Passed on people's word, not measured: never the green of Successful.
    "Waived": "#8a6d00",
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
                f"{escape(utc_stamp(a.starts_at))}</title></circle>"
            )
    axis = lane * len(report.alert_lanes) + 18
    body.append(f'<text x="{left}" y="{axis}" fill="#555">{escape(utc_stamp(start))}</text>')
    body.append(
        f'<text x="{width - 10}" y="{axis}" text-anchor="end" fill="#555">{escape(utc_stamp(end))}</text>'
    )
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
                    f'<text x="{px}" y="{height - 16}" text-anchor="middle" fill="{colour}">·<title>no data at {escape(utc_stamp(p.at))}</title></text>'
                )
                continue
            body.append(
                f'<circle cx="{40 + _x(p.at, start, end, plot)}" cy="{y(p.value)}" r="3" fill="{colour}">'
                f"<title>{escape(number(p.value))} at {escape(utc_stamp(p.at))} ({escape(p.phase)})</title></circle>"
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
                        "at": utc_stamp(a.starts_at),
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
    # "replace": a stored text no file can hold (a lone UTF-16 surrogate in a plan stored before
    # plans were refused for it) costs one character, not the report.
    if fmt == "json":
        return to_json(report).encode(errors="replace")
    if fmt == "md":
        return to_markdown(report).encode(errors="replace")
    from bot.adapters import charts

    if fmt == "png":
        if not charts.available():
            raise UserError(
                f"the timeline picture needs matplotlib, which is not installed: {charts.INSTALL_HINT}"
            )
        return charts.timeline_png(report)
    if fmt == "html":
        return to_html(report, charts.html_charts(report) if charts.available() else None).encode(
            errors="replace"
        )
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


def _node_count(lanes: Sequence[Any]) -> str:
    """ "2 nodes", or "2 nodes, drained 4 times" when a later step drained them again."""
    names = len({n.name for n in lanes})
    return f"{names} nodes" + (f", drained {len(lanes)} times" if len(lanes) > names else "")
