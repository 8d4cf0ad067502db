"""The chat summary of `/upgrade check`: one line per finding id naming its workloads, capped."""

from __future__ import annotations

from bot.core.checks.findings import (
    NO_PROVIDER,
    RECOMMENDED,
    REQUIRED,
    Finding,
    Report,
    cloud_not_completed,
    cloud_skipped,
    summary_lines,
)
from bot.core.checks.service import summary_context
from bot.core.rendering import Renderer
from bot.resources import BUILTIN_TEMPLATES

TITLE = "istio-proxy cannot create the workload-spiffe-uds socket (read-only file system)"


def known_issue(workload: str, *pods: str) -> Finding:
    ns = workload.split(" ", 1)[1].split("/")[0]
    return Finding(
        id="KI002",
        severity=RECOMMENDED,
        title=TITLE,
        objects=(workload, *(f"Pod {ns}/{p}" for p in pods)),
        why="w",
        fix="f",
    )


FOUR_WORKLOADS = (
    known_issue("Deployment checkout/checkout", "checkout-1", "checkout-2"),
    known_issue("Deployment payments/payments-api", "api-1", "api-2"),
    known_issue("Deployment payments/payments-worker", "worker-1"),
    known_issue("StatefulSet billing/ledger", "ledger-0", "ledger-1"),
)


def test_one_line_per_finding_id_names_its_workloads_not_their_pods() -> None:
    (line,) = summary_lines(FOUR_WORKLOADS, shown=3)
    assert (line.id, line.title) == ("KI002", TITLE)
    assert line.objects == ("checkout/checkout", "payments/payments-api", "payments/payments-worker")
    assert line.more == 1


def test_other_objects_keep_their_kind_and_lose_their_details() -> None:
    finding = Finding(
        id="SKEW004",
        severity=REQUIRED,
        title="Kubelets fall out of skew",
        objects=(
            "Node ip-10-0-0-19 (kubelet v1.22.17, group others)",
            "Node ip-10-0-0-19 (kubelet v1.22.17, group others)",
            "Deployment billing/ledger: 1/2 ready",
            "… and 3 more pods",
        ),
        why="w",
        fix="f",
    )
    (line,) = summary_lines([finding])
    assert line.objects == ("Node ip-10-0-0-19", "billing/ledger")
    assert line.more == 0


def test_the_check_reply_shows_each_id_once_with_its_workloads_and_how_many_more() -> None:
    required = Finding(
        id="PDB001",
        severity=REQUIRED,
        title="PodDisruptionBudget billing/ledger allows no disruption",
        objects=("PodDisruptionBudget billing/ledger", "Deployment billing/ledger"),
        why="w",
        fix="f",
    )
    report = Report(cluster="prod", target="1.25", findings=(required, *FOUR_WORKLOADS))
    text = Renderer([BUILTIN_TEMPLATES]).render("check", summary_context(report, shown_recommended=10)).text
    assert text.splitlines()[0] == (
        ":no_entry: Pre-flight check of *prod* for *1.25*: *FAILED* — 1 required, 4 recommended"
    )
    assert (
        "• `PDB001` PodDisruptionBudget billing/ledger allows no disruption — "
        "PodDisruptionBudget billing/ledger, billing/ledger\n"
    ) in text
    assert text.count("`KI002`") == 1
    assert (
        f"• `KI002` {TITLE} — checkout/checkout, payments/payments-api, payments/payments-worker …and 1 more\n"
    ) in text
    assert "objects)" not in text


def test_more_recommended_ids_than_shown_are_counted_not_listed() -> None:
    findings = tuple(
        Finding(id=f"RES{i:03d}", severity=RECOMMENDED, title=f"t{i}", objects=(), why="w", fix="f")
        for i in range(14)
    )
    context = summary_context(Report(cluster="prod", target="1.25", findings=findings), shown_recommended=10)
    text = Renderer([BUILTIN_TEMPLATES]).render("check", context).text
    assert text.count("• `RES") == 10
    assert "…and 4 more in the report" in text


def test_the_check_reply_says_what_the_checks_did_not_see_and_not_the_other_notes() -> None:
    report = Report(
        cluster="prod",
        target="1.26",
        findings=FOUR_WORKLOADS,
        notes=(
            "control plane 1.25.4, target 1.26, 14 nodes, 23 workloads",
            "not read: events: forbidden by the bot's RBAC role",
            cloud_skipped("EKS", "boto3 is not installed (pip install 'upgrade-bot[aws]')"),
            cloud_not_completed("GKE", "the GKE API did not answer"),
            cloud_skipped("AKS", f"{NO_PROVIDER} (provider: {{aks: …}})"),
            "12 known-issue rules",
        ),
    )
    text = Renderer([BUILTIN_TEMPLATES]).render("check", summary_context(report, shown_recommended=10)).text
    assert "_not read: events: forbidden by the bot's RBAC role_\n" in text
    assert "_EKS checks skipped: boto3 is not installed (pip install 'upgrade-bot[aws]')_\n" in text
    assert "_GKE checks not completed: the GKE API did not answer_\n" in text
    assert "known-issue rules" not in text
    assert "names no provider" not in text  # a choice of the configuration, said in the report only
    assert "14 nodes" not in text


def test_the_checks_text_and_markdown_carry_no_terminal_escapes_or_bidi_marks_from_the_cluster() -> None:
    """An event's message with `ESC[2J ESC]0;title BEL` and a right-to-left override: printed by
    `upgrade-bot check` it cleared the screen, set the window's title and reversed `exe.txt`."""
    from bot.core.checks import service
    from bot.core.checks.findings import REQUIRED, Finding, Report

    hostile = "PodEvictionFailure \x1b[2J\x1b]0;pwned\x07\x1b[31mRED\u202eexe.txt"
    finding = Finding(
        id="KI006",
        severity=REQUIRED,
        title="Eviction refused",
        objects=(f"Pod shop/db-0 {hostile}",),
        why=f"Seen: event EvictionBlocked: {hostile}\nmore",
        fix="kubectl -n shop get pdb",
    )
    report = Report(cluster="prod", target="1.30", findings=(finding,))
    for text in (service.render_text(report), service.render_markdown(report)):
        assert "PodEvictionFailure [2J]0;pwned[31mREDexe.txt" in text
        assert not any(ch in text for ch in "\x1b\x07\u202e")
        assert "\nmore" in text or "<br>more" in text or "\n       more" in text  # its own lines kept
