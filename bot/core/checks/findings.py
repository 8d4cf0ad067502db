"""What a check reports: findings with a stable id and a severity, gathered in a report."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

REQUIRED = "required"
RECOMMENDED = "recommended"

_ID = re.compile(r"^[A-Z][A-Z0-9_-]{1,31}$")


def valid_id(finding: str) -> bool:
    """Is `finding` shaped like a finding's id (API001, KI004)?"""
    return bool(_ID.match(finding))


@dataclass(frozen=True, kw_only=True)
class Finding:
    id: str
    severity: str
    title: str
    objects: tuple[str, ...]
    why: str
    fix: str
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class Cover:
    """What accepts a finding: a waiver (`/upgrade waive`, stored, expiring) or an entry of the
    configuration's `checks.ignore` list (permanent, reviewed). No `objects`: the whole finding."""

    source: str  # "waiver" | "ignore"
    label: str  # "waiver 3" | "checks.ignore[0]"
    finding: str
    objects: tuple[str, ...]
    reason: str
    by: tuple[str, ...] = ()
    until: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Covered:
    """A finding's objects (or the whole finding) that covers accepted: not counted as failing."""

    finding: Finding
    covers: tuple[Cover, ...]


@dataclass(frozen=True, kw_only=True)
class Report:
    cluster: str
    target: str
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    #: Findings (or some of their objects) accepted by a waiver or the ignore list.
    covered: tuple[Covered, ...] = ()

    @property
    def failed(self) -> bool:
        return any(f.severity == REQUIRED for f in self.findings)
