"""The registry of finding ids: every id a check or a known-issue rule can report, with its severity.

It is the one list `/upgrade waive` (and `exec "waive …"`) and the configuration's `checks.ignore`
read, so an id a check reports is always one people can accept. Each check module declares its
ids next to the code that reports them (`FINDINGS = declare(...)` in `CHECK_MODULES`); the rules
bring theirs (the shipped rules file and the team's `rules_files`). A new check module is added to
`CHECK_MODULES`; `tests/core/checks/test_finding_ids.py` walks the source and fails on a module
that builds a `Finding` without being listed, and on an id it reports without declaring it.

An id reported both by a check and by a rule (a team's rule reusing a check's id) takes the
stricter severity: a waiver of it then needs the two people a Required finding's waiver needs.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from bot.core.checks.findings import REQUIRED, FindingKind

if TYPE_CHECKING:
    from bot.core.rules import Rule

#: The modules whose checks report findings, each with a module-level `FINDINGS`. Imported when
#: the registry is first read, not when this module is: the settings read the registry, and the
#: checks import half the core (the cluster reader, msgspec, the API tables).
CHECK_MODULES = (
    "bot.core.checks.preflight",
    "bot.core.checks.cluster_health",
    "bot.core.checks.apis",
    "bot.core.checks.eks",
    "bot.core.checks.aks",
    "bot.core.checks.gke",
    "bot.core.checks.images",
)


@cache
def builtin_findings() -> Mapping[str, FindingKind]:
    """The ids the built-in checks declare, in the order of `CHECK_MODULES`."""
    out: dict[str, FindingKind] = {}
    for name in CHECK_MODULES:
        declared: Mapping[str, FindingKind] = importlib.import_module(name).FINDINGS
        for finding, kind in declared.items():
            if finding in out:
                raise AssertionError(f"{finding} is declared by {out[finding].source} and by {name}")
            out[finding] = kind
    return out


def rule_kind(rule: Rule) -> FindingKind:
    return FindingKind(
        id=rule.id,
        severity=rule.severity,
        about=rule.title,
        source=f"rule {rule.source}" if rule.source else "rule",
    )


@dataclass(frozen=True)
class FindingIds:
    """Every id the checks and `rules` can report (see `finding_ids`)."""

    kinds: Mapping[str, FindingKind]

    def __contains__(self, finding: object) -> bool:
        return finding in self.kinds

    def get(self, finding: str) -> FindingKind | None:
        return self.kinds.get(finding)

    def severity(self, finding: str) -> str | None:
        """The severity a waiver of `finding` follows (the strictest it is reported with), or None
        when nothing reports it."""
        kind = self.kinds.get(finding)
        return kind.severity if kind else None

    def near(self, finding: str, n: int = 3) -> list[str]:
        """Known ids that look like `finding` (a typo, a lower-case or shortened id), best first."""
        wanted = finding.upper()
        if wanted in self.kinds and wanted != finding:
            return [wanted]
        return difflib.get_close_matches(wanted, list(self.kinds), n=n, cutoff=0.75)


def finding_ids(rules: Sequence[Rule] = ()) -> FindingIds:
    """The registry: the built-in checks' ids, then each rule's (its title as `about`)."""
    kinds = dict(builtin_findings())
    for rule in rules:
        mine = rule_kind(rule)
        have = kinds.get(rule.id)
        if have is not None and have.severity == REQUIRED and mine.severity != REQUIRED:
            # A rule reusing a check's id never makes it easier to waive.
            mine = FindingKind(
                id=mine.id, severity=REQUIRED, about=mine.about, varies=True, source=mine.source
            )
        kinds[rule.id] = mine
    return FindingIds(kinds)
