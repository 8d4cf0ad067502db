"""What a check reports: findings with a stable id and a severity, gathered in a report."""

from __future__ import annotations

from dataclasses import dataclass

REQUIRED = "required"
RECOMMENDED = "recommended"


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
class Report:
    cluster: str
    target: str
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return any(f.severity == REQUIRED for f in self.findings)
