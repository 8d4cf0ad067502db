"""The `check` plan action: a Required finding fails the step, and the thread line says which."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from bot.core.actions import check, default_registry
from bot.core.actions.base import ActionContext
from bot.core.checks.findings import (
    NO_PROVIDER,
    RECOMMENDED,
    REQUIRED,
    Finding,
    Report,
    cloud_not_completed,
    cloud_skipped,
)
from bot.errors import UserError
from bot.records import ActionCall, ActionRequest


def finding(fid: str, severity: str = REQUIRED, *objects: str) -> Finding:
    return Finding(id=fid, severity=severity, title=fid, objects=objects or (f"obj {fid}",), why="w", fix="f")


def context(report: Report, asked: list[tuple[str, str | None]]) -> ActionContext:
    def unused(*_: Any) -> Any:
        raise AssertionError("not used by the check action")

    def run_check(cluster: str, target: str | None) -> Report:
        asked.append((cluster, target))
        return report

    return ActionContext(take_snapshot=unused, compare_snapshots=unused, run_check=run_check)


def request(args: Mapping[str, str]) -> ActionRequest:
    return ActionRequest(run_id="R1", cluster="prod", call=ActionCall(name="check", args=args))


def test_required_findings_fail_the_step_naming_their_ids_and_workloads_with_the_report_attached() -> None:
    asked: list[tuple[str, str | None]] = []
    report = Report(
        cluster="prod",
        target="1.25",
        findings=(
            finding("KI002", REQUIRED, "Deployment payments/api", "Pod payments/api-1", "Pod payments/api-2"),
            finding("KI002", REQUIRED, "Deployment checkout/web", "Pod checkout/web-1"),
            finding("KI002", REQUIRED, "StatefulSet billing/ledger (1 pod)"),
            finding("PDB001", REQUIRED, "PodDisruptionBudget billing/ledger", "Deployment billing/ledger"),
            finding("RES001", RECOMMENDED),
        ),
    )
    result = check.run(context(report, asked), request({"to": "1.25"}))
    assert asked == [("prod", "1.25")]
    assert not result.ok
    assert result.detail == (
        "pre-flight check for 1.25 FAILED: 4 Required — KI002 (payments/api …and 2 more), "
        "PDB001 (PodDisruptionBudget billing/ledger …and 1 more); 1 Recommended — the full report is attached"
    )
    (report_file,) = result.files
    assert report_file.filename == "check-prod-1.25.md"
    markdown = report_file.content.decode()
    assert "Pod payments/api-2" in markdown
    assert "StatefulSet billing/ledger (1 pod)" in markdown


def test_a_long_list_of_required_findings_drops_whole_entries_and_says_how_many() -> None:
    findings = tuple(finding(f"RULE{i:03d}", REQUIRED, f"Deployment ns{i}/workload-{i}") for i in range(40))
    result = check.run(context(Report(cluster="prod", target="1.25", findings=findings), []), request({}))
    assert len(result.detail) < 500
    assert "RULE000 (ns0/workload-0)" in result.detail
    shown = result.detail.count("(ns")
    # The ids past the budget are named while they fit (a paused run's Waive… offers them), then
    # counted: the attached report has every one.
    assert f", …and {40 - shown} more (RULE{shown:03d}, " in result.detail
    assert " more); 0 Recommended" in result.detail
    assert set(check.required_ids(result.detail)) < {f"RULE{i:03d}" for i in range(40)}


def test_only_recommended_findings_pass_and_the_target_defaults_to_the_checks_own() -> None:
    asked: list[tuple[str, str | None]] = []
    report = Report(cluster="prod", target="1.30", findings=(finding("RES001", RECOMMENDED),))
    result = check.run(context(report, asked), request({}))
    assert asked == [("prod", None)]
    assert result.ok
    assert result.detail == (
        "pre-flight check for 1.30 passed: no Required findings, 1 Recommended — the full report is attached"
    )
    assert [f.filename for f in result.files] == ["check-prod-1.30.md"]


def test_plans_may_name_the_check_action() -> None:
    spec = default_registry().get("check")
    assert spec is not None
    assert spec.optional == frozenset({"to", "only", "settled_later"})
    assert not spec.mutating


def test_only_keeps_the_named_ids_and_names_their_recommended_findings() -> None:
    asked: list[tuple[str, str | None]] = []
    report = Report(
        cluster="prod",
        target="1.26",
        findings=(
            finding("EKS002", REQUIRED, "control plane runbook-prod"),
            finding("EKS009", RECOMMENDED, "AutoScalingGroup eksctl-prod-nodegroup-others-old-NodeGroup-1U7"),
            finding("EKS006", RECOMMENDED, "node group istio (template v3, latest v4)", "node group logging"),
            finding("RES001", RECOMMENDED),
        ),
    )
    result = check.run(context(report, asked), request({"only": "eks009, EKS006"}))
    assert asked == [("prod", None)]
    assert result.ok  # EKS002 is not among them: it does not fail the step
    assert result.detail == (
        "check of EKS009, EKS006 for 1.26 passed: no Required findings, 2 Recommended: "
        "EKS009 (AutoScalingGroup eksctl-prod-nodegroup-others-old-NodeGroup-1U7), "
        "EKS006 (node group istio …and 1 more) — the full report is attached"
    )
    (report_file,) = result.files
    markdown = report_file.content.decode()
    assert "EKS009" in markdown
    assert "EKS002" not in markdown
    assert "RES001" not in markdown


def test_only_refuses_an_id_the_checks_do_not_report() -> None:
    spec = default_registry().get("check")
    assert spec is not None
    assert spec.check is not None
    spec.check({"only": "EKS009,EKS006"})
    with pytest.raises(UserError, match=r"only: 'EKS099' is not a finding id the checks report"):
        spec.check({"only": "EKS009,EKS099"})


NO_BOTO3 = cloud_skipped("EKS", "boto3 is not installed (pip install 'upgrade-bot[aws]')")


def test_a_step_whose_only_ids_belong_to_cloud_checks_that_did_not_run_is_not_checked_and_fails() -> None:
    report = Report(
        cluster="prod",
        target="1.26",
        findings=(finding("RES001", RECOMMENDED),),
        notes=("control plane 1.25.4, target 1.26, 14 nodes, 23 workloads", NO_BOTO3),
    )
    result = check.run(context(report, []), request({"only": "EKS009,EKS006"}))
    assert not result.ok
    assert result.detail == (
        "check of EKS009, EKS006 for 1.26 NOT CHECKED: EKS checks skipped: boto3 is not installed "
        "(pip install 'upgrade-bot[aws]') — the full report is attached"
    )
    # Nothing to waive: what is missing is the evidence, not a finding.
    assert check.required_ids(result.detail) == ()
    (report_file,) = result.files
    assert "EKS checks skipped: boto3 is not installed" in report_file.content.decode()
    # The cloud answered part of the way, or no provider is named: not checked either, with that reason.
    for note in (
        cloud_not_completed("EKS", "DescribeCluster: the AWS API did not answer within 10s"),
        cloud_skipped(
            "EKS", "the cluster's configuration names no provider (provider: {eks: …}, {aks: …} or {gke: …})"
        ),
    ):
        result = check.run(context(replace(report, notes=(note,)), []), request({"only": "EKS009"}))
        assert not result.ok
        assert result.detail == f"check of EKS009 for 1.26 NOT CHECKED: {note} — the full report is attached"


def test_what_the_checks_did_not_see_is_on_the_line_of_a_step_that_passes_or_fails() -> None:
    notes = (
        "control plane 1.25.4, target 1.26, 14 nodes, 23 workloads",
        "not read: validatingwebhookconfigurations: forbidden by the bot's RBAC role",
        NO_BOTO3,
        "12 known-issue rules",
    )
    unseen = (
        "not read: validatingwebhookconfigurations: forbidden by the bot's RBAC role; EKS checks skipped: boto3 "
        "is not installed (pip install 'upgrade-bot[aws]')"
    )
    passing = Report(cluster="prod", target="1.26", findings=(finding("RES001", RECOMMENDED),), notes=notes)
    result = check.run(context(passing, []), request({}))
    assert result.ok
    assert result.detail == (
        f"pre-flight check for 1.26 passed: no Required findings, 1 Recommended, but {unseen} — the full "
        "report is attached"
    )
    # `only` with an id the checks did see: it passes on that, and says what they did not see.
    result = check.run(context(passing, []), request({"only": "EKS009,RES001"}))
    assert result.ok
    assert result.detail == (
        f"check of EKS009, RES001 for 1.26 passed: no Required findings, 1 Recommended: RES001 (obj RES001), "
        f"but {unseen} — the full report is attached"
    )
    failing = replace(passing, findings=(finding("PDB001", REQUIRED, "PodDisruptionBudget shop/web"),))
    result = check.run(context(failing, []), request({}))
    assert not result.ok
    assert result.detail == (
        "pre-flight check for 1.26 FAILED: 1 Required — PDB001 (PodDisruptionBudget shop/web); 0 Recommended; "
        f"{unseen} — the full report is attached"
    )
    assert check.required_ids(result.detail) == ("PDB001",)


def test_a_step_whose_check_could_not_read_the_pods_or_budgets_is_incomplete_not_passed() -> None:
    """No evidence is not a pass: with a list most checks rest on not read (here the pods and the
    budgets), the step fails as INCOMPLETE and says what to do; a Required finding still fails it
    as FAILED."""
    notes = (
        "control plane 1.25.4, target 1.26, 14 nodes, 23 workloads",
        "not read: pods: forbidden by the bot's RBAC role",
        "not read: poddisruptionbudgets: forbidden by the bot's RBAC role",
    )
    report = Report(cluster="prod", target="1.26", findings=(finding("RES001", RECOMMENDED),), notes=notes)
    assert report.verdict == "INCOMPLETE"
    result = check.run(context(report, []), request({}))
    assert not result.ok
    assert result.detail == (
        "pre-flight check for 1.26 INCOMPLETE: not read: pods: forbidden by the bot's RBAC role; not read: "
        "poddisruptionbudgets: forbidden by the bot's RBAC role — the checks on pods, poddisruptionbudgets did "
        "not run (no Required findings among the others, 1 Recommended); give the bot read access and retry "
        "the step — the full report is attached"
    )
    failing = replace(report, findings=(finding("NODE001", REQUIRED, "Node ip-10-0-0-1"),))
    assert failing.verdict == "FAILED"
    assert check.run(context(failing, []), request({})).detail.startswith("pre-flight check for 1.26 FAILED")


def test_many_blind_spots_are_clipped_and_counted_on_the_line() -> None:
    notes = tuple(f"not read: {kind}: forbidden by the bot's RBAC role: " + "x" * 150 for kind in "abcdef")
    report = Report(cluster="prod", target="1.26", findings=(), notes=notes)
    result = check.run(context(report, []), request({}))
    assert result.ok
    assert len(result.detail) < 500
    assert result.detail.count("not read: ") == 1
    assert "; …and 5 more (in the report) — the full report is attached" in result.detail


def test_a_cluster_that_names_no_provider_is_no_blind_spot_but_its_cloud_ids_are_not_checked() -> None:
    # Every cluster without a provider (kind, on-premises) has this note: the verdict says nothing of it.
    unnamed = cloud_skipped("EKS", f"{NO_PROVIDER} (provider: {{eks: …}})")
    report = Report(
        cluster="prod", target="1.26", findings=(finding("RES001", RECOMMENDED),), notes=(unnamed,)
    )
    result = check.run(context(report, []), request({}))
    assert result.ok
    assert result.detail == (
        "pre-flight check for 1.26 passed: no Required findings, 1 Recommended — the full report is attached"
    )
    result = check.run(context(report, []), request({"only": "EKS009"}))
    assert not result.ok
    assert result.detail == f"check of EKS009 for 1.26 NOT CHECKED: {unnamed} — the full report is attached"


def test_a_runs_check_without_to_is_for_its_plans_target_not_one_minor_above_the_cluster() -> None:
    # After the control plane moved to 1.25, "one minor above" is 1.26: the next upgrade's, not
    # this run's (a 1.24 → 1.25 plan's leftover check said "for 1.26").
    asked: list[tuple[str, str | None]] = []
    report = Report(cluster="prod", target="1.25", findings=())
    planned = replace(request({"only": "EKS009"}), target_version="1.25.16")
    check.run(context(report, asked), planned)
    check.run(context(report, asked), replace(planned, call=ActionCall(name="check", args={"to": "1.26"})))
    check.run(context(report, asked), request({}))
    assert asked == [("prod", "1.25"), ("prod", "1.26"), ("prod", None)]


def test_required_findings_the_plans_later_steps_settle_are_listed_and_do_not_fail_the_step() -> None:
    # A drafted plan's first check runs before its API migration and node-group catch-up steps.
    report = Report(
        cluster="prod",
        target="1.25",
        findings=(
            finding("API001", REQUIRED, "HorizontalPodAutoscaler payments/payments-api"),
            finding("SKEW004", REQUIRED, "node group istio"),
            finding("RES001", RECOMMENDED),
        ),
    )
    args = {"to": "1.25", "settled_later": "API001, skew004"}
    result = check.run(context(report, []), request(args))
    assert result.ok, result.detail
    assert result.detail.startswith(
        "pre-flight check for 1.25 passed: no Required findings, 1 Recommended; 2 Required the plan's "
        "later steps settle: API001 (HorizontalPodAutoscaler payments/payments-api), SKEW004 (node group istio)"
    )
    # A Required finding no later step settles still fails it, and only that one is a Required id.
    failing = replace(report, findings=(*report.findings, finding("PDB001", REQUIRED, "billing/ledger")))
    result = check.run(context(failing, []), request(args))
    assert not result.ok
    assert (
        "FAILED: 1 Required — PDB001 (billing/ledger); 1 Recommended; 2 Required the plan's later"
        in result.detail
    )
    assert check.required_ids(result.detail) == ("PDB001",)
    # The plan's validator knows the argument and refuses an id the checks do not report.
    spec = default_registry().get("check")
    assert spec is not None
    assert spec.check is not None
    assert "settled_later" in spec.arguments
    with pytest.raises(UserError, match="settled_later: 'NOPE1' is not a finding id"):
        spec.check({"settled_later": "NOPE1"})
