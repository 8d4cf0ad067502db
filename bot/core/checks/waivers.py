"""Accepted findings: waivers (`/upgrade waive`) and the configuration's `checks.ignore` list.

`apply_covers` moves what a cover accepts out of a report's findings into its `covered` list: a
cover without objects takes the whole finding; one with objects takes only those objects, and the
finding stays (failing, when Required) for the others. A report's verdict counts only what is
left. Objects are named as findings list them (`namespace/name`; `Kind namespace/name` too).

`seen_of` keeps what a check found (`CheckSeen`, each cluster's last), and `unmatched` says when
a new waiver matches none of it: a typo of an object ("shop/paymnets") covers nothing, and the
person who asked for it should hear so then, not at the next check.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from bot.core.checks.findings import REQUIRED, Cover, Covered, Finding, Report, valid_id
from bot.core.checks.ids import finding_ids
from bot.core.rules import Rule
from bot.records import CheckSeen, WaiverRow

__all__ = [
    "active_waivers",
    "apply_covers",
    "cover_labels",
    "covers_object",
    "seen_of",
    "severity_of",
    "stray_objects",
    "unmatched",
    "valid_id",
    "waiver_covers",
]

_NOTE = re.compile(r"\s+\([^()]*\)$")


def severity_of(finding: str, rules: Sequence[Rule] = ()) -> str | None:
    """The severity a waiver of `finding` follows (see `bot.core.checks.ids`), or None when no
    check or rule reports that id."""
    return finding_ids(rules).severity(finding)


def _names(obj: str) -> set[str]:
    """What a finding's object may be called: itself, without its trailing note, its
    `namespace/name` (with and without the kind), and a cluster-scoped object's name."""
    bare = _NOTE.sub("", obj).strip()
    names = {obj, bare, obj.lower(), bare.lower()}
    words = bare.split()
    for i, word in enumerate(words):
        if "/" in word:
            names.add(word.rstrip(":,"))
            if i:
                names.add(f"{words[i - 1]} {word}".lower().rstrip(":,"))
    if len(words) == 2 and "/" not in bare:
        names.add(words[1])  # "Kind name": a cluster-scoped object
    return names


def covers_object(cover: Cover, obj: str) -> bool:
    if not cover.objects:
        return True
    names = _names(obj)
    return any(not names.isdisjoint(_asked(o)) for o in cover.objects)


def _asked(obj: str) -> set[str]:
    """What a waiver's object may stand for: itself, and kubectl's `kind/namespace/name` as the
    findings write it (`Kind namespace/name`)."""
    asked = {obj, obj.lower()}
    parts = obj.split("/")
    if len(parts) == 3 and all(parts):
        asked.add(f"{parts[0]} {parts[1]}/{parts[2]}".lower())
    return asked


def waiver_covers(rows: Sequence[WaiverRow], now: datetime) -> list[Cover]:
    """The covers of the waivers active at `now` (pending, revoked and expired ones cover nothing)."""
    return [
        Cover(
            source="waiver",
            label=f"waiver {w.id}",
            finding=w.finding,
            objects=w.objects,
            reason=w.reason,
            by=tuple(dict.fromkeys(p for p in (w.requested_by, w.confirmed_by) if p)),
            until=w.expires_at,
            one_person=not w.required,
        )
        for w in rows
        if w.active_at(now)
    ]


class WaiverStore(Protocol):
    def waivers(self, *, cluster: str | None = None, states: Sequence[str] = ()) -> list[WaiverRow]: ...


#: Objects kept of one finding id in a cluster's last check; past it the id is `clipped`.
SEEN_OBJECTS = 2_000
#: `CheckSeen.clipped` when the check could not read a list most checks rest on: it cannot tell.
UNREAD = "*"


def seen_of(report: Report, *, cluster: str, at: datetime) -> CheckSeen:
    """What the check `report` found on `cluster`, waived or not, to keep as its last check."""
    named: dict[str, dict[str, None]] = {}
    for f in (*report.findings, *(c.finding for c in report.covered)):
        named.setdefault(f.id, {}).update(dict.fromkeys(f.objects))
    clipped = {k for k, v in named.items() if len(v) > SEEN_OBJECTS}
    if any(n.startswith("not read:") for n in report.notes):
        # A finding may be missing for that reason alone (as `check_cluster` calls no object stray).
        clipped.add(UNREAD)
    return CheckSeen(
        cluster=cluster,
        checked_at=at,
        target=report.target,
        findings={k: tuple(v)[:SEEN_OBJECTS] for k, v in named.items()},
        clipped=frozenset(clipped),
    )


def stray_objects(finding: str, objects: Sequence[str], named: Sequence[str]) -> list[str]:
    """The objects a waiver of `finding` names that none of `named` (its findings' objects) is."""
    return [o for o in objects if not any(covers_object(_one(finding, o), obj) for obj in named)]


def _one(finding: str, obj: str) -> Cover:
    return Cover(source="waiver", label="", finding=finding, objects=(obj,), reason="")


def unmatched(seen: CheckSeen, finding: str, objects: Sequence[str]) -> str:
    """Why a waiver of `finding` (its `objects`) matches no finding of the last check `seen`: "no
    PDB001 finding names shop/paymnets (did you mean shop/payments?)"; "" when it matches, or
    when the check could not tell (a list it rests on not read, too many objects to keep)."""
    if UNREAD in seen.clipped or finding in seen.clipped:
        return ""
    named = seen.findings.get(finding)
    if named is None:
        return f"it reported no {finding} finding"
    stray = stray_objects(finding, objects, named)
    if not stray:
        return ""
    # Near names as people type them (`namespace/name`), not as the findings list them.
    short = [next((w for w in _NOTE.sub("", n).split() if "/" in w), n) for n in named]
    near = [m for o in stray for m in difflib.get_close_matches(o, short, n=1, cutoff=0.8)]
    said = ", ".join(stray[:5]) + (f" and {len(stray) - 5} more" if len(stray) > 5 else "")
    hint = f" (did you mean {', '.join(dict.fromkeys(near[:3]))}?)" if near else ""
    return f"no {finding} finding of it names {said}{hint}"


def active_waivers(store: WaiverStore, *, cluster: str) -> list[WaiverRow]:
    """The stored waivers of `cluster` a check reads: the active ones (`service.check_cluster`
    drops the expired ones at its `now`) and the pending ones, which cover nothing but are named
    beside a finding they wait to cover. Every front door reads them here, so that each gives the
    same verdict."""
    return store.waivers(cluster=cluster, states=("active", "pending"))


def apply_covers(report: Report, covers: Sequence[Cover]) -> Report:
    """The report with what `covers` accept moved from its findings to `covered`."""
    if not covers:
        return report
    left: list[Finding] = []
    covered: list[Covered] = list(report.covered)
    for f in report.findings:
        # A one-person waiver never covers a Required finding (`Cover.one_person`).
        mine = [c for c in covers if c.finding == f.id and not (c.one_person and f.severity == REQUIRED)]
        if not mine:
            left.append(f)
            continue
        whole = [c for c in mine if not c.objects]
        if whole or not f.objects:
            if whole:
                covered.append(Covered(finding=f, covers=tuple(whole)))
            else:
                left.append(f)
            continue
        taken: list[str] = []
        used: dict[str, Cover] = {}
        rest: list[str] = []
        for obj in f.objects:
            by = [c for c in mine if covers_object(c, obj)]
            if by:
                taken.append(obj)
                for c in by:
                    used.setdefault(c.label, c)
            else:
                rest.append(obj)
        if rest and taken and f.source.startswith("known-issue rule") and f.objects[0] in taken:
            # A known issue's finding is one workload and its pods (`rule_finding`): the workload
            # waived, its pods are (their names change with every restart; nobody waives them).
            taken, rest = list(f.objects), []
        if taken:
            covered.append(Covered(finding=replace(f, objects=tuple(taken)), covers=tuple(used.values())))
        if rest:
            left.append(replace(f, objects=tuple(rest)))
    return replace(report, findings=tuple(left), covered=tuple(covered))


def cover_labels(report: Report, *, severity: str | None = None) -> list[str]:
    """The covers a report relied on (each once, in order), e.g. for a step's thread line."""
    seen: dict[str, Cover] = {}
    for c in report.covered:
        if severity is None or c.finding.severity == severity:
            for cover in c.covers:
                seen.setdefault(cover.label, cover)
    return [_describe(c) for c in seen.values()]


def _describe(c: Cover) -> str:
    who = f" by {' and '.join(c.by)}" if c.by else ""
    until = f" until {c.until.strftime('%Y-%m-%d %H:%M UTC')}" if c.until else ""
    what = f" {', '.join(c.objects)}" if c.objects else ""
    return f"{c.label} ({c.finding}{what}{who}{until}: {c.reason})"
