"""What happened to the run's people and nodes beside its steps, for the report (`report`): the
roster's hand-offs, the pauses people made, the nodes left cordoned after an abort — read from the
run's audit rows and its after-abort job, from stored data only."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from bot.core.jobs.common import AFTER_ABORT, LEFT_CORDONED
from bot.core.people import named
from bot.core.runs.reportmodel import AfterAbort, Handoff, NodeLane, Pause, StepBar, utc_stamp
from bot.records import AuditEntry, JobRow

#: A skip counted by several voters: its audit detail ends "by U1+U2" (`machine._skip_voted`).
_VOTERS = re.compile(r"^(?P<why>.*?) ?\bby (?P<who>[A-Z0-9]+(?:\+[A-Z0-9]+)+)$", re.DOTALL)


#: Slack user ids in the bot's own words ("skipped by U1+U2: …", "reported failed by U1").
_IDS = re.compile(r"\b[UW][A-Z0-9]{2,}(?:\+[UW][A-Z0-9]{2,})*\b")


def ids_in(text: str) -> list[str]:
    """The user ids `text` names as `name_ids` would name them, to look their names up first."""
    return [u for match in _IDS.findall(text) for u in match.split("+")]


def name_ids(text: str, people: Mapping[str, str]) -> str:
    """`text` with the user ids the report knows by name said by name ("U1+U2" → "@Ann and @Bo");
    an id it has no name for stays as it is (nothing else is guessed to be an id)."""

    def one(match: re.Match[str]) -> str:
        ids = match[0].split("+")
        return " and ".join(named(u, people) for u in ids) if all(u in people for u in ids) else match[0]

    return _IDS.sub(one, text)


#: The plan's local time a run event's audit row ends with ("… [2026-12-06 09:00 Europe/Berlin]"),
#: also when it is all the row says (a resume without a reason).
_LOCAL_TIME = re.compile(r"\s*\[\d{4}-\d\d-\d\d \d\d:\d\d [^\[\]]+\]$")


def text_of(entry: AuditEntry) -> str:
    """A run event's audit detail without the plan's local time the audit row ends with: the
    report says each row's time once, in UTC."""
    return _LOCAL_TIME.sub("", entry.detail)


def skip_voters(entry: AuditEntry) -> tuple[tuple[str, ...], str]:
    """Who skipped a step and why, from its `step_skipped` row: every voter of a skip two people
    voted ("… by U1+U2"), else the row's person; the reason(s) without the voters' ids."""
    text = text_of(entry)
    match = _VOTERS.match(text)
    if match is None:
        return (entry.user_id,), text
    return tuple(match["who"].split("+")), match["why"].strip()


def handoffs(audit: Sequence[AuditEntry]) -> list[Handoff]:
    """The run's `handoff` rows: "U_NEW roles=ROLE was U_OLD[,…]" or "… beside S_GROUP"."""
    out = []
    for entry in audit:
        if entry.kind != "run" or entry.subcommand != "handoff" or entry.outcome != "ok":
            continue
        parts = text_of(entry).split(" ")
        role = next((p.removeprefix("roles=") for p in parts if p.startswith("roles=")), "")
        rest = " ".join(parts[1:]).split(" ", 1)[1] if len(parts) > 2 else ""
        was = tuple(u for u in rest.removeprefix("was ").split(",") if u) if rest.startswith("was ") else ()
        beside = rest.removeprefix("beside ") if rest.startswith("beside ") else ""
        out.append(Handoff(at=entry.at, role=role, to=parts[0], by=entry.user_id, was=was, beside=beside))
    return out


def _by_people(text: str, step_ids: Sequence[str]) -> bool:
    """Whether a `run_paused` row is a pause people made, not one the run made itself (a step
    failed or was interrupted by a restart, evidence Inconclusive: said by the step's own rows)."""
    from bot.core.runs.machine import EVIDENCE_PAUSE

    if text.startswith(EVIDENCE_PAUSE):
        return False
    return not any(
        text.startswith(f"step {s} failed") or text == f"step {s} was interrupted by a restart"
        for s in step_ids
    )


def pauses(audit: Sequence[AuditEntry], step_ids: Sequence[str]) -> list[Pause]:
    """Each pause people made, until the run resumed (or ended: aborted, completed)."""
    out: list[Pause] = []
    open_: Pause | None = None
    for entry in audit:
        if entry.kind != "run" or entry.outcome != "ok":
            continue
        event = entry.subcommand
        if event == "run_paused" and open_ is None and _by_people(text_of(entry), step_ids):
            open_ = Pause(at=entry.at, by=entry.user_id, reason=text_of(entry))
        elif open_ is not None and event in ("run_resumed", "run_aborted", "run_completed"):
            resumed = event == "run_resumed"
            out.append(
                dataclasses.replace(
                    open_,
                    until=entry.at,
                    resumed_by=entry.user_id if resumed else "",
                    resume_reason=text_of(entry) if resumed else f"the run was {event.removeprefix('run_')}",
                )
            )
            open_ = None
    return [*out, *([open_] if open_ is not None else [])]


def paused_segments(bars: Sequence[StepBar], spans: Sequence[Pause], end: datetime) -> list[StepBar]:
    """The steps' bars with the time a pause held a gate open as "paused", not waiting for people."""
    if not spans:
        return list(bars)
    return [dataclasses.replace(b, segments=tuple(_cut(b.segments, spans, end))) for b in bars]


def _cut(
    segments: Sequence[tuple[str, datetime, datetime | None]], spans: Sequence[Pause], end: datetime
) -> list[tuple[str, datetime, datetime | None]]:
    out: list[tuple[str, datetime, datetime | None]] = []
    for kind, start, stop in segments:
        if kind != "wait":
            out.append((kind, start, stop))
            continue
        last = stop or end
        at = start
        for pause in spans:
            p_start, p_stop = max(pause.at, at), pause.until or end
            if p_stop <= at or p_start >= last:
                continue
            if p_start > at:
                out.append(("wait", at, p_start))
            out.append(("paused", p_start, p_stop if p_stop < last else stop))
            at = min(p_stop, last)
        if at < last:
            out.append(("wait", at, stop))
    return out


def after_abort(jobs: Sequence[JobRow]) -> AfterAbort | None:
    """The offer to uncordon after the abort (its `after-abort` job) and its answer."""
    row = next((j for j in jobs if j.step_id == AFTER_ABORT), None)
    if row is None:
        return None
    asked = [n for n in str(json.loads(row.args or "{}").get("node", "")).split(",") if n]
    decision = json.loads(row.decision) if row.decision else {}
    by, reason = str(decision.get("by", "")), str(decision.get("reason", ""))
    progress = json.loads(row.progress) if row.progress else {}
    if row.state != "done":
        return AfterAbort(nodes=tuple(asked), answer="not answered yet")
    if LEFT_CORDONED in progress:
        left = tuple(str(n) for n in progress[LEFT_CORDONED])
        return AfterAbort(nodes=left, answer="left cordoned", by=by, reason=reason, at=row.ended_at)
    if progress.get("uncordoned"):
        done = tuple(str(n) for n in progress["uncordoned"])
        return AfterAbort(nodes=done, answer="uncordoned", by=by, reason=reason, at=row.ended_at)
    return AfterAbort(nodes=(), answer="nothing to uncordon", at=row.ended_at)


def with_after_abort(lanes: Sequence[NodeLane], after: AfterAbort | None) -> list[NodeLane]:
    """The node lanes, each node the offer named marked with its answer."""
    if after is None or not after.nodes:
        return list(lanes)
    named_ = set(after.nodes)
    return [dataclasses.replace(n, after_abort=after.answer) if n.name in named_ else n for n in lanes]


def after_abort_finding(after: AfterAbort | None, people: Mapping[str, str]) -> list[str]:
    """The finding of nodes left cordoned after the abort (or still asked about)."""
    if after is None or not after.nodes or after.answer == "uncordoned":
        return []
    shown = ", ".join(after.nodes[:10]) + (
        f" and {len(after.nodes) - 10} more" if len(after.nodes) > 10 else ""
    )
    if after.answer == "not answered yet":
        return [
            f"{len(after.nodes)} node(s) the run cordoned are still cordoned after the abort; the offer "
            f"to uncordon them is not answered yet: {shown}"
        ]
    why = f": {after.reason}" if after.reason else ""
    return [
        f"{len(after.nodes)} node(s) left cordoned after the abort, by {named(after.by, people)}'s answer"
        f"{why} ({shown})"
    ]


def people_lines(shifts: Sequence[Handoff], stops: Sequence[Pause], people: Mapping[str, str]) -> list[str]:
    """The hand-offs and pauses as the report's notes say them, oldest first."""
    lines: list[tuple[datetime, str]] = []
    for h in shifts:
        from_ = (
            f" from {', '.join(named(u, people) for u in h.was)}"
            if h.was
            else (f" beside {h.beside}" if h.beside else "")
        )
        lines.append(
            (
                h.at,
                f"{utc_stamp(h.at)} {h.role} handed to {named(h.to, people)}{from_} by {named(h.by, people)}",
            )
        )
    for p in stops:
        why = f" ({p.reason})" if p.reason else ""
        if p.until is None:
            end = "; still paused at the report's end"
        elif p.resumed_by:
            again = f" ({p.resume_reason})" if p.resume_reason else ""
            end = f"; resumed by {named(p.resumed_by, people)}{again} at {utc_stamp(p.until)}"
        else:
            end = f"; {p.resume_reason} at {utc_stamp(p.until)}"
        lines.append((p.at, f"{utc_stamp(p.at)} paused by {named(p.by, people)}{why}{end}"))
    return [text for _, text in sorted(lines, key=lambda pair: pair[0])]
