"""Accepted findings: waivers (`/upgrade waive`) and the configuration's `checks.ignore` list.

`apply_covers` moves what a cover accepts out of a report's findings into its `covered` list: a
cover without objects takes the whole finding; one with objects takes only those objects, and the
finding stays (failing, when Required) for the others. A report's verdict counts only what is
left. Objects are named as findings list them (`namespace/name`; `Kind namespace/name` too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from bot.core.checks.findings import REQUIRED, Cover, Covered, Finding, Report, valid_id
from bot.core.checks.ids import finding_ids
from bot.core.rules import Rule
from bot.records import WaiverRow

__all__ = [
    "active_waivers",
    "apply_covers",
    "cover_labels",
    "covers_object",
    "severity_of",
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
