"""The registry of finding ids (`bot.core.checks.ids`) holds every id the code can report.

The ids are enumerated from the source, not from the registry: every module of `bot/` and
`commands/` that builds a check `Finding` is read with `ast`, the id of each `Finding(...)` it
builds is resolved to its literal values (a literal, `A if x else B`, a module constant, a loop
over a literal table), and each must be declared by that module's `FINDINGS`, which
`CHECK_MODULES` must list. A new check that reports an id it did not declare fails here, and so
does one whose id cannot be told from its source. `tests/commands/test_waive_every_id.py` then
waives each id through `/upgrade waive` and `exec "waive …"`.
"""

from __future__ import annotations

import importlib

import pytest

from bot.core.checks.findings import RECOMMENDED, REQUIRED, FindingKind, declare
from bot.core.checks.ids import CHECK_MODULES, builtin_findings, finding_ids
from bot.core.checks.waivers import severity_of
from bot.core.rules import load_rules, parse_rules
from bot.resources import BUILTIN_RULES
from tests.support.finding_ids import RULES_MODULE, Emits, emitting_modules


def test_the_scan_finds_the_checks_that_report_findings() -> None:
    # The scan is only worth something if it sees the checks: these report most of the ids.
    assert set(CHECK_MODULES) | {RULES_MODULE} <= set(emitting_modules())


def test_every_module_that_builds_a_finding_is_a_declared_check_module() -> None:
    for module in emitting_modules():
        if module == RULES_MODULE:
            continue
        assert module in CHECK_MODULES, (
            f"{module} builds findings: list it in bot.core.checks.ids.CHECK_MODULES"
        )
        assert isinstance(getattr(importlib.import_module(module), "FINDINGS", None), dict), (
            f"{module} builds findings: declare their ids, FINDINGS = declare(__name__, …)"
        )


@pytest.mark.parametrize("module", CHECK_MODULES)
def test_every_id_a_check_module_reports_is_declared_by_it(module: str) -> None:
    emits = emitting_modules()[module]
    reported, unknown = emits.ids()
    assert not unknown, f"{module}: ids that cannot be told from the source: {unknown}"
    declared = set(importlib.import_module(module).FINDINGS)
    assert reported, module
    assert reported <= declared, f"{module} reports {sorted(reported - declared)} without declaring them"
    # And nothing is declared that the module never reports (a stale id would be waivable forever).
    assert declared <= reported | emits.literals(), f"{module} declares {sorted(declared - reported)}"
    # Every id-shaped literal of the module is some check's (an id built another way is caught too).
    assert emits.literals() <= set(builtin_findings()), sorted(emits.literals() - set(builtin_findings()))


def test_the_rules_engine_reports_only_its_rules_ids() -> None:
    reported, unknown = emitting_modules()[RULES_MODULE].ids()
    # `Finding(id=r.id, …)`: a rule's id, which the registry takes from the loaded rules.
    assert (reported, [u.split(": ", 1)[1] for u in unknown]) == (set(), ["id=r.id"])


def test_an_undeclared_id_is_caught_by_the_scan() -> None:
    source = """
from bot.core.checks.findings import RECOMMENDED, Finding as F
TABLE = (("IMG001", "x"), ("IMG002", "y"))
def check(ok):
    for code, title in TABLE:
        yield F(id=code, severity=RECOMMENDED, title=title, objects=(), why="", fix="")
    yield F(id="IMG003" if ok else "IMG004", severity=RECOMMENDED, title="", objects=(), why="", fix="")
    yield F(id=make_id(), severity=RECOMMENDED, title="", objects=(), why="", fix="")
from bot.core.checks import findings as fs
def other():
    return fs.Finding(id="IMG005", severity=RECOMMENDED, title="", objects=(), why="", fix="")
"""
    reported, unknown = Emits(source).ids()
    assert reported == {"IMG001", "IMG002", "IMG003", "IMG004", "IMG005"}
    assert unknown == ["line 8: id=make_id()"]
    assert not reported <= set(builtin_findings())


def test_the_registry_holds_every_check_id_and_every_shipped_rule() -> None:
    rules = load_rules([BUILTIN_RULES])
    ids = finding_ids(rules)
    checks = builtin_findings()
    assert {"EKS001", "EKS010", "AWS002", "CRD002", "CERT004", "CNI001", "CAP001", "ISTIO002"} <= set(checks)
    assert set(ids.kinds) == set(checks) | {r.id for r in rules}
    for r in rules:
        assert ids.severity(r.id) == r.severity
        assert ids.get(r.id).source.startswith("rule ")  # type: ignore[union-attr]
    assert checks["EKS001"].source == "bot.core.checks.eks"


def test_an_id_whose_severity_varies_is_waived_as_required() -> None:
    # CRD002, CERT004 and EKS010 are Recommended on some clusters and Required on others.
    for finding in ("CRD002", "CERT004", "EKS010"):
        kind = builtin_findings()[finding]
        assert (kind.severity, kind.varies) == (REQUIRED, True)
        assert severity_of(finding) == REQUIRED


def test_a_rule_reusing_a_check_id_never_makes_it_easier_to_waive() -> None:
    (rule,) = parse_rules(
        """
rules:
  - id: PDB001
    title: a team's own PDB rule
    match: {containers: [x], not_ready: true}
    explanation: x
    remediation: x
    links: [https://example.com/x]
""",
        source="team.yaml",
    )
    assert rule.severity == RECOMMENDED
    assert finding_ids([rule]).severity("PDB001") == REQUIRED
    assert finding_ids([rule]).get("PDB001").about == "a team's own PDB rule"  # type: ignore[union-attr]


def test_declare_refuses_a_duplicate_or_a_malformed_id() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        declare(
            "m",
            FindingKind(id="X001", severity=REQUIRED, about="a"),
            FindingKind(id="X001", severity=REQUIRED, about="b"),
        )
    with pytest.raises(ValueError, match="not a finding id"):
        declare("m", FindingKind(id="x1", severity=REQUIRED, about="a"))
    with pytest.raises(ValueError, match="not a finding id"):
        declare("m", FindingKind(id="X001", severity="blocker", about="a"))


def test_near_suggests_the_id_meant() -> None:
    ids = finding_ids()
    assert ids.near("eks001") == ["EKS001"]
    assert ids.near("EKS01")[0] in {"EKS001", "EKS010"}
    assert ids.near("ZZZZZZ") == []
