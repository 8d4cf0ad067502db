"""The `check` plan action: a Required finding fails the step, and the thread line says which."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.actions import check, default_registry
from bot.core.actions.base import ActionCall, ActionContext, ActionRequest
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, Report


def finding(fid: str, severity: str = REQUIRED) -> Finding:
    return Finding(id=fid, severity=severity, title=fid, objects=(f"obj {fid}",), why="w", fix="f")


def context(report: Report, asked: list[tuple[str, str | None]]) -> ActionContext:
    def unused(*_: Any) -> Any:
        raise AssertionError("not used by the check action")

    def run_check(cluster: str, target: str | None) -> Report:
        asked.append((cluster, target))
        return report

    return ActionContext(take_snapshot=unused, compare_snapshots=unused, run_check=run_check)


def request(args: Mapping[str, str]) -> ActionRequest:
    return ActionRequest(run_id="R1", cluster="prod", call=ActionCall(name="check", args=args))


def test_required_findings_fail_the_step_naming_their_ids() -> None:
    asked: list[tuple[str, str | None]] = []
    report = Report(
        cluster="prod",
        target="1.25",
        findings=(finding("API001"), finding("API001"), finding("PDB001"), finding("RES001", RECOMMENDED)),
    )
    result = check.run(context(report, asked), request({"to": "1.25"}))
    assert asked == [("prod", "1.25")]
    assert not result.ok
    assert result.detail == (
        "pre-flight check for 1.25 FAILED: 3 Required (API001 ×2, PDB001), 1 Recommended"
        " — `/upgrade check --to 1.25` for the full report"
    )


def test_only_recommended_findings_pass_and_the_target_defaults_to_the_checks_own() -> None:
    asked: list[tuple[str, str | None]] = []
    report = Report(cluster="prod", target="1.30", findings=(finding("RES001", RECOMMENDED),))
    result = check.run(context(report, asked), request({}))
    assert asked == [("prod", None)]
    assert result.ok
    assert result.detail == "pre-flight check for 1.30 passed: no Required findings, 1 Recommended"


def test_plans_may_name_the_check_action() -> None:
    spec = default_registry().get("check")
    assert spec is not None
    assert spec.optional == frozenset({"to"})
    assert not spec.mutating
