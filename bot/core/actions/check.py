"""The `check` action: the pre-flight checks and known-issue rules; a Required finding fails the step.

The step's thread gets one line — the verdict, each Required finding id with the objects it
concerns, the counts, and the waivers and ignore-list entries it relied on (a Required finding
accepted by one does not fail the step: it passes when every Required finding is fixed, waived
or ignored) — and the full report (why and how to fix each finding) uploaded under it.

`only: EKS006,EKS009` runs the same checks and keeps only those ids' findings: a plan's check
after the roll-out (leftover Auto Scaling groups, launch-template drift) names them, Recommended
ones included, where the pre-flight line only counts the Recommended. `settled_later: API001,SKEW004`
lists those ids' Required findings without failing the step: a later step of the plan settles them
(a drafted plan's API migration and node-group catch-up come after its check).

What the checks did not see is on the line too (`blind_spots`: a list not read, a cloud's checks
skipped or not completed), so a pass is never read as covering what was not looked at; a list most
checks rest on not read (`CORE_LISTS`: nodes, pods, workloads, budgets) fails the step as INCOMPLETE.
A step whose `only` ids all belong to a cloud whose checks did not run is NOT CHECKED and fails: no
evidence is not a pass (the EKS SDK missing, say, or no provider named).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec, fitting
from bot.core.checks.findings import (
    REQUIRED,
    Finding,
    Report,
    blind_spots,
    summary_lines,
    unchecked_clouds,
    valid_id,
)
from bot.core.checks.ids import builtin_findings
from bot.core.checks.service import report_attachment
from bot.core.checks.waivers import cover_labels
from bot.core.kube.versions import minor
from bot.errors import UserError, clip
from bot.records import ActionRequest

#: About how long the thread line's list of Required findings may grow (the event line is clipped
#: at 500 characters; whole findings are dropped before that, with "…and N more").
LISTED_CHARS = 300
#: How long the ids past LISTED_CHARS may run, named without their objects.
NAMED_CHARS = 80
#: How long the line's part on what the checks did not see may run (each note clipped to SPOT_CHARS;
#: whole notes are dropped past it, with "…and N more").
BLIND_CHARS = 200
SPOT_CHARS = 120
_FAMILY = re.compile(r"^[A-Z]+")


def only_ids(args: Mapping[str, str], key: str = "only") -> tuple[str, ...]:
    """`key`'s finding ids (comma-separated), each one the checks report; () without it."""
    ids = tuple(dict.fromkeys(i.strip().upper() for i in str(args.get(key, "")).split(",") if i.strip()))
    known = builtin_findings()
    for fid in ids:
        if not valid_id(fid) or fid not in known:
            raise UserError(f"{key}: {clip(fid, 20)!r} is not a finding id the checks report (e.g. EKS009)")
    return ids


def _check_args(args: Mapping[str, str]) -> None:
    only_ids(args)
    only_ids(args, "settled_later")


def _later(findings: list[Finding], ids: tuple[str, ...]) -> tuple[list[Finding], str]:
    """The Required findings the plan's later steps settle (`settled_later`) set apart: the rest,
    and the line's part that still names them ("" for none)."""
    later = [f for f in findings if f.id in ids]
    if not later:
        return findings, ""
    rest = [f for f in findings if f.id not in ids]
    return rest, f"; {len(later)} Required the plan's later steps settle: {_named(later)}"


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
    entries = [_entry(fid, names) for fid, names in by_id.items()]
    return clip(", ".join(entries), LISTED_CHARS)


def _entry(fid: str, names: Sequence[str]) -> str:
    """A finding id with its first object and how many more: `API001 (Deployment a/b …and 2 more)`."""
    if not names:
        return fid
    return f"{fid} ({names[0]}{f' …and {len(names) - 1} more' if len(names) > 1 else ''})"


def _unseen(report: Report) -> str:
    """What the checks did not see, for the line: whole notes, each clipped, "" when they saw all."""
    spots = [clip(note, SPOT_CHARS) for note in blind_spots(report.notes)]
    listed = fitting(spots, BLIND_CHARS)
    more = len(spots) - len(listed)
    return "; ".join(listed) + (f"; …and {more} more (in the report)" if more else "")


def _not_checked(report: Report, only: tuple[str, ...]) -> str:
    """Why none of `only`'s ids was checked (each one a cloud's whose checks did not run), or ""."""
    clouds = unchecked_clouds(report.notes)
    reasons: list[str] = []
    for fid in only:
        family = _FAMILY.match(fid)
        why = clouds.get(family.group(0)) if family else None
        if why is None:
            return ""
        reasons.append(clip(why, SPOT_CHARS))
    return "; ".join(dict.fromkeys(reasons))


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.run_check is None:
        raise UserError("this front door cannot run the pre-flight checks")
    only = only_ids(request.call.args)
    # Without `to`, a run's check is for its plan's target (after the control plane moved, the
    # cluster's "one minor above" is the next upgrade's, not this run's).
    planned = minor(request.target_version) if request.target_version else ""
    report = ctx.run_check(request.cluster, request.call.args.get("to") or planned or None)
    if only:
        report = _only(report, only)
    required = [f for f in report.findings if f.severity == REQUIRED]
    recommended = len(report.findings) - len(required)
    # Listed, not failing: a finding a later step of this plan settles (a drafted plan's API
    # migration or node-group catch-up after its check) is the plan's work, not a blocker.
    required, later = _later(required, only_ids(request.call.args, "settled_later"))
    files = (report_attachment(report),)
    relied = cover_labels(report, severity=REQUIRED)
    accepted = f"; relied on {'; '.join(relied)}" if relied else ""
    not_checked = _not_checked(report, only)
    if not_checked:
        return ActionResult(
            ok=False,
            detail=(
                f"check of {', '.join(only)} for {report.target} NOT CHECKED: {not_checked} — the full "
                f"report is attached"
            ),
            files=files,
        )
    unseen = _unseen(report)
    if not required:
        unfixed = "no Required findings left unaccepted" if relied else "no Required findings"
        but = f", but {unseen}" if unseen else ""
        if only:
            found = [f for f in report.findings if f.severity != REQUIRED]
            listing = f": {_named(found)}" if found else ""
            return ActionResult(
                ok=True,
                detail=(
                    f"check of {', '.join(only)} for {report.target} passed: {unfixed}, {recommended} "
                    f"Recommended{listing}{later}{but} — the full report is attached{accepted}"
                ),
                files=files,
            )
        if report.incomplete:
            # No evidence is not a pass: the lists most checks rest on were not read.
            return ActionResult(
                ok=False,
                detail=(
                    f"pre-flight check for {report.target} INCOMPLETE: {unseen} — the checks on "
                    f"{', '.join(report.unread)} did not run ({unfixed} among the others, {recommended} "
                    f"Recommended{later}); give the bot read access and retry the step — the full report is "
                    f"attached{accepted}"
                ),
                files=files,
            )
        return ActionResult(
            ok=True,
            detail=(
                f"pre-flight check for {report.target} passed: {unfixed}, {recommended} "
                f"Recommended{later}{but} — the full report is attached{accepted}"
            ),
            files=files,
        )
    # One entry per finding id (titles differ for API001's APIs; the report has them apart).
    by_id: dict[str, list[str]] = {}
    for line in summary_lines(required, shown=1000):
        names = by_id.setdefault(line.id, [])
        names.extend(n for n in line.objects if n not in names)
    entries = [_entry(fid, names) for fid, names in by_id.items()]
    listed = fitting(entries, LISTED_CHARS)
    hidden = list(by_id)[len(listed) :]
    # The ids beyond the budget are still named while they fit (they are short): a paused run's
    # Waive… offers every Required id the step's line names (`required_ids`), not only the first
    # few. Past NAMED_CHARS the rest is a count; the attached report has every one.
    named = fitting(hidden, NAMED_CHARS, at_least_one=False)
    unnamed = len(hidden) - len(named)
    tail = ", ".join(named) + (f", {unnamed} more" if unnamed and named else "")
    shown = ", ".join(listed) + (f", …and {len(hidden)} more ({tail})" if hidden else "")
    return ActionResult(
        ok=False,
        detail=(
            f"pre-flight check for {report.target} FAILED: {len(required)} Required — {shown}; "
            f"{recommended} Recommended{later}{f'; {unseen}' if unseen else ''} — the full report is "
            f"attached{accepted}"
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
    optional=frozenset({"to", "only", "settled_later"}),
    run=run,
    check=_check_args,
)
