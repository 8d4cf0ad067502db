"""Waivers and the ignore list on a report: what they accept moves to its own section, a waiver
naming objects covers only those, an expired or pending waiver covers nothing, and the plan's
check step passes only when every Required finding is fixed or accepted — naming what it relied on."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.actions import check
from bot.core.actions.base import ActionContext, ActionResult
from bot.core.checks import service
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Cover, Finding, Report
from bot.core.checks.waivers import apply_covers, severity_of, waiver_covers
from bot.records import ActionCall, ActionRequest, WaiverRow
from tests.support.clock import FakeClock

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
HOOK = "MutatingWebhookConfiguration kube-system/pod-identity-webhook (last-applied-configuration)"
CRON = "CronJob reporting/nightly-report (last-applied-configuration)"
BY = "by U0PRIMARY and U0SHADOW until 2026-12-05 12:00 UTC"


def api001() -> Finding:
    return Finding(
        id="API001", severity=REQUIRED, title="removed API", objects=(HOOK, CRON), why="w", fix="f"
    )


def pdb001() -> Finding:
    return Finding(
        id="PDB001",
        severity=REQUIRED,
        title="budget",
        objects=("PodDisruptionBudget billing/ledger",),
        why="w",
        fix="f",
    )


def report(*findings: Finding) -> Report:
    return Report(cluster="prod", target="1.25", findings=findings)


def waiver(wid: int = 1, *, objects: tuple[str, ...] = (), state: str = "active", days: int = 7) -> WaiverRow:
    return WaiverRow(
        id=wid,
        cluster="prod",
        finding="API001",
        objects=objects,
        reason="vendor ships the fix in CHG-7",
        required=True,
        state=state,
        requested_by="U0PRIMARY",
        requested_at=T0,
        expires_at=T0 + timedelta(days=days),
        confirmed_by="U0SHADOW" if state == "active" else "",
        confirmed_at=T0 if state == "active" else None,
    )


def test_a_waiver_naming_an_object_covers_that_object_and_the_finding_still_fails_for_the_others() -> None:
    covers = waiver_covers([waiver(objects=("kube-system/pod-identity-webhook",))], T0)
    out = apply_covers(report(api001()), covers)
    assert [f.objects for f in out.findings] == [(CRON,)]
    assert out.failed
    (covered,) = out.covered
    assert covered.finding.objects == (HOOK,)
    assert covered.covers[0].by == ("U0PRIMARY", "U0SHADOW")


def test_a_waiver_without_objects_covers_the_whole_finding_and_the_report_passes() -> None:
    out = apply_covers(report(api001()), waiver_covers([waiver()], T0))
    assert out.findings == ()
    assert not out.failed
    assert out.covered[0].finding.objects == (HOOK, CRON)


def test_a_waiver_ends_at_its_for_on_the_injected_clock_and_a_pending_one_never_covers() -> None:
    clock = FakeClock(T0)
    rows = [waiver(days=1), waiver(2, state="pending", days=30)]
    assert [c.label for c in waiver_covers(rows, clock())] == ["waiver 1"]
    clock.advance(timedelta(days=1))
    assert waiver_covers(rows, clock()) == []
    assert apply_covers(report(api001()), waiver_covers(rows, clock())).failed


def test_an_ignore_entry_matches_the_kind_and_name_as_findings_list_them() -> None:
    ignore = Cover(
        source="ignore",
        label="checks.ignore[0]",
        finding="API001",
        objects=("MutatingWebhookConfiguration kube-system/pod-identity-webhook",),
        reason="EKS manages it",
    )
    out = apply_covers(report(api001()), [ignore])
    assert out.covered[0].finding.objects == (HOOK,)
    assert apply_covers(report(api001()), [replace(ignore, finding="API002")]) == report(api001())


def test_the_text_and_markdown_reports_list_accepted_findings_in_their_own_section() -> None:
    out = apply_covers(
        report(api001()), waiver_covers([waiver(objects=("kube-system/pod-identity-webhook",))], T0)
    )
    text = service.render_text(out)
    assert "FAILED — 1 required, 0 recommended, 1 waived or ignored" in text
    section = text.split("Waived or ignored (accepted; not counted):", 1)[1]
    assert HOOK in section
    assert CRON not in section
    assert f"accepted: waiver 1 {BY}: vendor ships the fix in CHG-7" in section
    assert "## Waived or ignored" in service.render_markdown(out)


def test_the_json_report_lists_open_and_accepted_findings_as_objects_with_who_accepted_them() -> None:
    ignore = Cover(source="ignore", label="checks.ignore[0]", finding="PDB001", objects=(), reason="drained")
    covers = [ignore, *waiver_covers([waiver(objects=("kube-system/pod-identity-webhook",))], T0)]
    body = json.loads(service.render_json(apply_covers(report(api001(), pdb001()), covers)))
    assert (body["failed"], body["verdict"], body["waivers_read"]) == (True, "failed", False)
    shown = [
        (f["id"], f["severity"], f["kind"], f["namespace"], f["name"], f["waived_by"], f["waiver_expires"])
        for f in body["findings"]
    ]
    assert shown == [
        ("API001", "Required", "CronJob", "reporting", "nightly-report", None, None),
        (
            "API001",
            "Required",
            "MutatingWebhookConfiguration",
            "kube-system",
            "pod-identity-webhook",
            "U0PRIMARY",
            "2026-12-05T12:00:00+00:00",
        ),
        ("PDB001", "Required", "PodDisruptionBudget", "billing", "ledger", "checks.ignore[0]", None),
    ]
    waived = body["findings"][1]
    assert (waived["message"], waived["remedy"], waived["waiver_reason"]) == (
        "removed API",
        "f",
        "vendor ships the fix in CHG-7",
    )
    assert waived["covers"][0]["by"] == ["U0PRIMARY", "U0SHADOW"]
    assert "covered" not in body  # the accepted findings are in `findings`, with `waived_by`


def test_a_finding_about_no_object_has_no_kind_and_a_cluster_scoped_one_no_namespace() -> None:
    metric = Finding(
        id="API001",
        severity=REQUIRED,
        title="removed API",
        objects=("requests to cronjobs.v1beta1.batch (apiserver metric)",),
        why="w",
        fix="f",
    )
    node = replace(metric, id="SKEW004", objects=("Node ip-10-0-0-19.compute.internal (kubelet v1.22)",))
    manifest = replace(metric, objects=("ci/old.yaml:12 PodDisruptionBudget shop/web",))
    assert service.subject(metric) == (None, None, None)
    assert service.subject(node) == ("Node", None, "ip-10-0-0-19.compute.internal")
    assert service.subject(manifest) == ("PodDisruptionBudget", "shop", "web")
    assert service.subject(replace(metric, objects=())) == (None, None, None)


def _step(result_report: Report) -> ActionResult:
    def unused(*_: Any) -> Any:
        raise AssertionError("not used by the check action")

    ctx = ActionContext(
        take_snapshot=unused, compare_snapshots=unused, run_check=lambda _c, _t: result_report
    )
    return check.run(
        ctx, ActionRequest(run_id="R1", cluster="prod", call=ActionCall(name="check", args={"to": "1.25"}))
    )


def test_the_check_step_passes_when_every_required_finding_is_accepted_and_its_line_names_what_it_relied_on() -> (
    None
):
    res = Finding(
        id="RES001", severity=RECOMMENDED, title="one replica", objects=("Deployment a/b",), why="w", fix="f"
    )
    ignore = Cover(
        source="ignore",
        label="checks.ignore[0]",
        finding="PDB001",
        objects=(),
        reason="ledger is a singleton",
    )
    covers = [*waiver_covers([waiver(3)], T0), ignore]
    result = _step(apply_covers(report(api001(), pdb001(), res), covers))
    assert result.ok
    assert result.detail == (
        "pre-flight check for 1.25 passed: no Required findings left unaccepted, 1 Recommended — the full report is attached; relied on "
        f"waiver 3 (API001 {BY}: vendor ships the fix in CHG-7); checks.ignore[0] (PDB001: ledger is a singleton)"
    )


def test_the_check_step_still_fails_for_the_required_findings_nobody_accepted() -> None:
    result = _step(apply_covers(report(api001(), pdb001()), waiver_covers([waiver(3)], T0)))
    assert not result.ok
    assert "FAILED: 1 Required — PDB001 (PodDisruptionBudget billing/ledger); 0 Recommended" in result.detail
    assert "relied on waiver 3 (API001" in result.detail


def test_severity_comes_from_the_checks_and_unknown_ids_have_none() -> None:
    assert severity_of("API001") == REQUIRED
    assert severity_of("ISTIO001") == RECOMMENDED
    assert severity_of("NOPE001") is None


def ki004(severity: str = REQUIRED) -> Finding:
    """A known issue's finding as `rule_finding` makes it: the workload, then its pods."""
    return Finding(
        id="KI004",
        severity=severity,
        title="vault-agent not ready",
        objects=(
            "Deployment payments/payments-worker",
            "Pod payments/payments-worker-57f6f8d555-5xsdz",
            "Pod payments/payments-worker-57f6f8d555-9kq2p",
            "… and 2 more pods",
        ),
        why="w",
        fix="f",
        source="known-issue rule KI004 (templates/rules/known-issues.yaml)",
    )


def ki_waiver(*, required: bool, objects: tuple[str, ...] = ("payments/payments-worker",)) -> WaiverRow:
    return replace(waiver(objects=objects), finding="KI004", required=required)


def test_a_waiver_of_a_known_issues_workload_covers_its_pods_too() -> None:
    """Pod names change with every restart: the workload is what people waive, and its pods on the
    finding go with it (they were left open, so a Required known issue still failed)."""
    out = apply_covers(report(ki004()), waiver_covers([ki_waiver(required=True)], T0))
    assert out.findings == ()
    assert not out.failed
    assert out.covered[0].finding.objects == ki004().objects
    # Another workload's waiver covers none of it.
    other = apply_covers(
        report(ki004()), waiver_covers([ki_waiver(required=True, objects=("payments/api",))], T0)
    )
    assert other.failed
    assert other.findings[0].objects == ki004().objects


def test_a_one_person_waiver_covers_a_recommended_finding_but_not_the_same_id_once_required() -> None:
    """A waiver made while KI004 was Recommended needed one person; a team's rules then made KI004
    Required, which needs two: it covers nothing, and the check says why."""
    one = ki_waiver(required=False)
    assert not apply_covers(report(ki004(RECOMMENDED)), waiver_covers([one], T0)).findings
    raised = apply_covers(report(ki004(REQUIRED)), waiver_covers([one], T0))
    assert raised.failed
    assert raised.covered == ()
    assert service._one_person(raised, [one]) == [
        "waiver 1 (KI004) is one person's, made while KI004 was Recommended: it covers nothing now that "
        "KI004 is Required (`/upgrade waive KI004 …` again, and a second person confirms)"
    ]
    assert service._STRAY.match(service._one_person(raised, [one])[0])  # shown in Slack under the findings


def test_a_waiver_in_kubectls_kind_namespace_name_form_covers_the_object_the_finding_names() -> None:
    res003 = Finding(
        id="RES003",
        severity=RECOMMENDED,
        title="no readiness probe",
        objects=("Deployment cert-manager/cert-manager-webhook",),
        why="w",
        fix="f",
    )
    kubectl_form = replace(
        waiver(objects=("deployment/cert-manager/cert-manager-webhook",)), finding="RES003"
    )
    assert apply_covers(report(res003), waiver_covers([kubectl_form], T0)).findings == ()


def test_a_waiver_waiting_for_its_second_person_or_past_its_end_is_named_beside_the_open_finding() -> None:
    """Neither covers anything; both are said, so that whoever remembers waiving it is not misled."""
    pending = waiver(wid=7, state="pending")
    ended = waiver(wid=6, days=1)
    later = T0 + timedelta(days=2)
    open_report = report(api001())
    assert apply_covers(open_report, waiver_covers([pending, ended], later)).failed
    assert service._not_covering(open_report, [pending, ended], later) == [
        "waiver 7 (API001) waits for a second person: it covers nothing until `/upgrade waive confirm 7`",
        "waiver 6 (API001) ended 2026-11-29 12:00 UTC: the finding counts again (`/upgrade waive API001 …` for "
        "more time)",
    ]
    assert all(service._STRAY.match(n) for n in service._not_covering(open_report, [pending, ended], later))
    assert service._not_covering(report(), [pending, ended], later) == []  # no open finding of theirs


def test_an_ignore_entry_naming_an_object_no_finding_has_is_named_as_a_waiver_would_be() -> None:
    typo = Cover(
        source="ignore",
        label="checks.ignore[0]",
        finding="API001",
        objects=("kube-system/pod-identity-webhok",),
        reason="rebuilt by its own pipeline",
    )
    [note] = service._naming_nothing(report(api001()), [], [typo])
    assert note == (
        "checks.ignore[0] (API001) names kube-system/pod-identity-webhok, which no API001 finding of this "
        "check names: a typo, or no longer found (the configuration's entry)"
    )
    assert service._STRAY.match(note)
