"""The `check` action: the pre-flight checks and known-issue rules; a Required finding fails the step.

The step's thread gets one line — the verdict, each Required finding id with the objects it
concerns, the counts, and the waivers and ignore-list entries it relied on (a Required finding
accepted by one does not fail the step: it passes when every Required finding is fixed, waived
or ignored) — and the full report (why and how to fix each finding) uploaded under it.

`only: EKS006,EKS009` runs the same checks and keeps only those ids' findings: a plan's check
after the roll-out (leftover Auto Scaling groups, launch-template drift) names them, Recommended
ones included, where the pre-flight line only counts the Recommended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.core.checks.findings import REQUIRED, Finding, Report, summary_lines, valid_id
from bot.core.checks.ids import builtin_findings
from bot.core.checks.service import report_attachment
from bot.core.checks.waivers import cover_labels
from bot.errors import UserError, clip
from bot.records import ActionRequest

#: About how long the thread line's list of Required findings may grow (the event line is clipped
#: at 500 characters; whole findings are dropped before that, with "…and N more").
LISTED_CHARS = 300
#: How long the ids past LISTED_CHARS may run, named without their objects.
NAMED_CHARS = 80


def only_ids(args: Mapping[str, str]) -> tuple[str, ...]:
    """`only`'s finding ids (comma-separated), each one the checks report; () without it."""
    ids = tuple(dict.fromkeys(i.strip().upper() for i in str(args.get("only", "")).split(",") if i.strip()))
    known = builtin_findings()
    for fid in ids:
        if not valid_id(fid) or fid not in known:
            raise UserError(f"only: {clip(fid, 20)!r} is not a finding id the checks report (e.g. EKS009)")
    return ids


def _only(report: Report, ids: tuple[str, ...]) -> Report:
    keep = set(ids)
    return replace(
        report,
        findings=tuple(f for f in report.findings if f.id in keep),
        covered=tuple(c for c in report.covered if c.finding.id in keep),
        notes=(*report.notes, f"only {', '.join(ids)} kept (the step's `only`)"),
    )


def _named(findings: list[Finding]) -> str:
    """Each finding id with its first object, for a step that names its Recommended findings."""
    by_id: dict[str, list[str]] = {}
    for line in summary_lines(findings, shown=1000):
        by_id.setdefault(line.id, []).extend(line.objects)
    entries = [
        f"{fid} ({names[0]}{f' …and {len(names) - 1} more' if len(names) > 1 else ''})" if names else fid
        for fid, names in by_id.items()
    ]
    return clip(", ".join(entries), LISTED_CHARS)


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.run_check is None:
        raise UserError("this front door cannot run the pre-flight checks")
    only = only_ids(request.call.args)
    report = ctx.run_check(request.cluster, request.call.args.get("to") or None)
    if only:
        report = _only(report, only)
    required = [f for f in report.findings if f.severity == REQUIRED]
    recommended = len(report.findings) - len(required)
    files = (report_attachment(report),)
    relied = cover_labels(report, severity=REQUIRED)
    accepted = f"; relied on {'; '.join(relied)}" if relied else ""
    if not required:
        unfixed = "no Required findings left unaccepted" if relied else "no Required findings"
        if only:
            found = [f for f in report.findings if f.severity != REQUIRED]
            listing = f": {_named(found)}" if found else ""
            return ActionResult(
                ok=True,
                detail=(
                    f"check of {', '.join(only)} for {report.target} passed: {unfixed}, {recommended} "
                    f"Recommended{listing} — the full report is attached{accepted}"
                ),
                files=files,
            )
        return ActionResult(
            ok=True,
            detail=(
                f"pre-flight check for {report.target} passed: {unfixed}, {recommended} "
                f"Recommended — the full report is attached{accepted}"
            ),
            files=files,
        )
    # One entry per finding id (titles differ for API001's APIs; the report has them apart).
    by_id: dict[str, list[str]] = {}
    for line in summary_lines(required, shown=1000):
        names = by_id.setdefault(line.id, [])
        names.extend(n for n in line.objects if n not in names)
    entries = [
        f"{fid} ({names[0]}{f' …and {len(names) - 1} more' if len(names) > 1 else ''})" if names else fid
        for fid, names in by_id.items()
    ]
    listed: list[str] = []
    for entry in entries:
        if listed and sum(len(e) + 2 for e in listed) + len(entry) > LISTED_CHARS:
            break
        listed.append(entry)
    hidden = list(by_id)[len(listed) :]
    # The ids beyond the budget are still named while they fit (they are short): a paused run's
    # Waive… offers every Required id the step's line names (`required_ids`), not only the first
    # few. Past NAMED_CHARS the rest is a count; the attached report has every one.
    named: list[str] = []
    for fid in hidden:
        if sum(len(n) + 2 for n in named) + len(fid) > NAMED_CHARS:
            break
        named.append(fid)
    unnamed = len(hidden) - len(named)
    tail = ", ".join(named) + (f", {unnamed} more" if unnamed and named else "")
    shown = ", ".join(listed) + (f", …and {len(hidden)} more ({tail})" if hidden else "")
    return ActionResult(
        ok=False,
        detail=(
            f"pre-flight check for {report.target} FAILED: {len(required)} Required — {shown}; "
            f"{recommended} Recommended — the full report is attached{accepted}"
        ),
        files=files,
    )


def required_ids(detail: str) -> tuple[str, ...]:
    """The Required finding ids a failed check step's line names (what `run` writes), in order;
    () for any other line. The objects in parentheses and the Recommended count are not ids."""
    head, sep, rest = detail.partition(" Required — ")
    if not sep or " FAILED: " not in head:
        return ()
    listed = rest.split("; ", 1)[0]
    ids: list[str] = []
    depth, entry = 0, ""
    for ch in f"{listed}, ":
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and entry.endswith(",") and ch == " ":
            word = entry[:-1].strip()
            if word.startswith("…and "):
                inner = word.partition("(")[2].rstrip(")")
                ids.extend(i for i in inner.split(", ") if valid_id(i))
            elif valid_id(word.split(" (", 1)[0]):
                ids.append(word.split(" (", 1)[0])
            entry = ""
            continue
        entry += ch
    return tuple(dict.fromkeys(ids))


SPEC = ActionSpec(
    name="check",
    summary="run the pre-flight checks and known-issue rules; a Required finding fails the step",
    optional=frozenset({"to", "only"}),
    run=run,
    check=only_ids,
)
