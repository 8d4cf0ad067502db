"""Templates: every file renders with a sample context; values are Slack-escaped; errors are named."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.core.checks.findings import Finding as CheckFinding
from bot.core.checks.findings import Report as CheckReport
from bot.core.checks.service import summary_context
from bot.core.rendering import BIDI_CONTROLS, Renderer, clip, fit, inert, inert_naming, link, people, until
from bot.core.snapshots.diff import Finding
from bot.errors import TemplateError
from bot.records import SnapshotMeta
from bot.resources import BUILTIN_TEMPLATES

NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)

META = SnapshotMeta(
    id=7, cluster="prod", label="pre", taken_at=NOW, taken_by="U0BOB", summary="{}", size=4096
)
SUMMARY = {
    "version": "v1.29.4",
    "counts": {"nodes": 3, "pods": 40, "workloads": 9, "namespaces": 4, "warning_events": 2},
    "gaps": [{"resource": "events", "reason": "forbidden by the bot's RBAC role"}],
}
FINDING = Finding(
    kind="regression",
    category="new CrashLoopBackOff pods",
    subject="Deployment a/b",
    detail="1 now, 0 before: b-1",
    namespace="a",
)

CHECK_FINDING = CheckFinding(
    id="PDB001",
    severity="required",
    title="PodDisruptionBudget a/b allows no disruption",
    objects=("PodDisruptionBudget a/b", "Deployment a/b", "Deployment a/c", "Deployment a/d"),
    why="x",
    fix="y",
)

SAMPLES: dict[str, dict[str, Any]] = {
    "snapshot": {"meta": META, "summary": SUMMARY, "cluster": "prod", "context": "prod-eks"},
    "snapshots": {"rows": [{"meta": META, "summary": SUMMARY}], "cluster": None},
    "check_fleet": {
        "headline": "Fleet check → 1.25: 1 of 3 clusters ready",
        "rows": [
            {"cluster": "ci", "state": "ready", "text": "0 required, 2 recommended, 1 waived"},
            {"cluster": "lab", "state": "failed", "text": "1 required, 0 recommended, 0 waived"},
            {"cluster": "dev", "state": "error", "text": "not checked: the API server did not answer"},
        ],
    },
    "diff": {
        "before": {"id": 1, "label": "pre", "taken_at": "x"},
        "after": {"id": 2, "label": "post", "taken_at": "y"},
        "regressions": [FINDING],
        "regression_count": 12,
        "regression_categories": [("new CrashLoopBackOff pods", 12)],
        "expected": [],
        "expected_count": 0,
        "skipped": ["events: not readable in one of the snapshots"],
    },
    "help": {"commands": [{"summary": "Show help.", "usage": "/upgrade help [COMMAND]"}]},
    "help_one": {
        "name": "schedule",
        "usage": "/upgrade schedule PLAN",
        "paragraphs": ["Schedule.", "More."],
        "arguments": [{"name": "PLAN", "meaning": "a plan"}, {"name": "--override", "meaning": ""}],
        "examples": ['/upgrade schedule eks-nodegroups --at "2026-12-01 14:00"'],
        "roles": ["*"],
        "who": "",
        "verbs": [{"usage": "/upgrade schedule list", "summary": "List."}],
    },
    "error": {
        "message": "no such run",
        "usage": "usage: /upgrade status [RUN]",
        "correlation_id": "c0ffee00",
    },
    "whoami": {
        "user_id": "U0BOB",
        "roles": ["shadow"],
        "runs": [{"id": "R1E04FA", "plan": "eks-nodegroups", "roles": ["primary", "shadow"]}],
    },
    "check": {
        **summary_context(
            CheckReport(
                cluster="prod",
                target="1.25",
                findings=(CHECK_FINDING, replace(CHECK_FINDING, id="RES001", severity="recommended")),
                notes=("not read: events: forbidden",),
            ),
            shown_recommended=10,
        ),
        "covered": [
            {
                "id": "API001",
                "severity": "Required",
                "title": "admissionregistration.k8s.io/v1beta1 MutatingWebhookConfiguration: removed in 1.22",
                "objects": ["kube-system/pod-identity-webhook"],
                "covers": [
                    {
                        "label": "waiver 3",
                        "by": ["U0PRIMARY", "U0SHADOW"],
                        "until": "2026-12-01 10:00 UTC",
                        "reason": "vendor fix CHG-7",
                    }
                ],
            }
        ],
    },
    "diagnose": {
        "cluster": "prod",
        "scope": "payments",
        "groups": [
            {
                "id": "KI004",
                "title": "Vault agent not ready",
                "explanation": "It cannot authenticate.",
                "links": ["https://github.com/hashicorp/vault-helm/issues/527"],
                "hits": [
                    {
                        "workload": "Deployment payments/worker",
                        "pods": ["worker-1"],
                        "evidence": "2/3 containers ready",
                        "remediation": "kubectl -n payments logs worker-1 -c vault-agent",
                    }
                ],
            }
        ],
        "total": 4,
        "more": 3,
        "rule_count": 11,
        "pods": 12,
        "pod": "",
        "unread": ["not read: events: forbidden by the bot's RBAC role"],
        "notes": [
            "known-issue rules stopped matching after their 10 s budget: TEAM001 did not look at every pod"
        ],
    },
    "watch_card": {
        "cluster": "prod",
        "state": "running",
        "icon": ":eyes:",
        "reason": "1/3 nodes Ready on v1.30.2; 2 old nodes left",
        "final": False,
        "control_plane": "v1.30.2",
        "scope": {"nodegroups": ["ng-a"], "namespaces": []},
        "target": {
            "nodegroups": ["ng-a"],
            "kubelet_version": "v1.30.2",
            "no_old_nodes": True,
            "settle": "5m",
            "crashloop_after": "5m",
            "imagepull_after": "5m",
        },
        "groups": [
            {
                "name": "ng-a",
                "bar": "▓▓▓░░░░░░░",
                "on_target": 1,
                "total": 3,
                "old_cordoned": 1,
                "old_remaining": 1,
                "not_ready": 0,
                "in_target": True,
                "versions": "v1.29 ×2, v1.30 ×1",
            }
        ],
        "more_groups": 0,
        "missing_groups": [],
        "nodes": 3,
        "pods": 40,
        "unhealthy": [
            {
                "reason": "CrashLoopBackOff",
                "pods": 2,
                "kube_system": 0,
                "workloads": 1,
                "top": [
                    {
                        "workload": "shop/api",
                        "kind": "Deployment",
                        "pods": 2,
                        "detail": "CrashLoopBackOff",
                        "kube_system": False,
                    }
                ],
                "more_workloads": 0,
            }
        ],
        "unhealthy_total": 2,
        "flapping": [{"workload": "shop/web", "pods": 2, "spells": 7, "kube_system": False}],
        "flapping_pods": 2,
        "flap_window": "10m",
        "flap_spells": 3,
        "episodes": [{"workload": "shop/api", "kind": "CrashLoopBackOff", "age": "2m", "number": 1}],
        "more_episodes": 0,
        "rollouts": [
            {
                "workload": "shop/api",
                "kind": "Deployment",
                "state": "waiting",
                "message": "1 of 3 new replicas have been updated",
            }
        ],
        "more_rollouts": 0,
        "warnings": [{"reason": "FailedAttachVolume", "count": 2}],
        "findings": [{"rule": "KI004", "workload": "payments/payments-worker"}],
        "more_findings": 0,
        "stop": {"value": "7"},
        "updated_at": "2026-12-01 05:00 UTC",
        "started_at": "2026-12-01 04:50 UTC",
        "ends_at": None,
    },
    "watch_thread": {"milestones": [{"text": ":large_green_circle: Node `n1` joined and is Ready"}]},
    "watch_known_issue": {
        "text": ":mag: Known issue *KI004*\nDeployment `shop/api`\n*What to do*\n```kubectl …```",
        "sections": [":mag: Known issue *KI004*\nDeployment `shop/api`", "*What to do*\n```kubectl …```"],
        "fix": {
            "value": "7|rule:KI004:shop/Deployment/api:1",
            "command": "restart workloads=deployment/shop/api",
        },
    },
    "audit": {
        "since": NOW,
        "summary": {
            "total": 1,
            "by_outcome": [("ok", 1)],
            "by_subcommand": [("help", 1)],
            "latest": [
                {
                    "at_utc": "2026-12-01T05:00:00Z",
                    "user_id": "U0BOB",
                    "subcommand": "help",
                    "outcome": "ok",
                    "detail": "",
                }
            ],
        },
    },
    "report": {
        "r": {
            "run_id": "R1A2B3C",
            "plan": "eks-nodegroups",
            "cluster": "prod",
            "current_version": "1.24.17",
            "target_version": "1.25.16",
            "outcome": "completed: 21 of 25 steps succeeded (4 skipped)",
            "started_at": NOW,
            "ended_at": NOW,
            "findings": ["restart-istio-data-plane: restart failed"],
        },
        "waiting": "41m10s",
        "working": "5h02m",
        "slowest": [{"name": "ip-10-0-2-7", "group": "ng-shared", "took": "14m03s"}],
        "pictures": True,
    },
}


def reply_templates() -> list[str]:
    return sorted(p.name.removesuffix(".txt.j2") for p in BUILTIN_TEMPLATES.glob("*.txt.j2"))


def test_every_reply_template_has_a_sample() -> None:
    assert reply_templates() == sorted(SAMPLES)


@pytest.mark.parametrize("name", reply_templates())
def test_every_template_renders_with_a_sample_context(name: str) -> None:
    rendered = Renderer([BUILTIN_TEMPLATES]).render(name, SAMPLES[name])
    assert rendered.text.strip()
    assert "Undefined" not in rendered.text


def test_values_from_users_are_escaped_for_slack_but_quotes_are_not() -> None:
    text = (
        Renderer([BUILTIN_TEMPLATES])
        .render("error", {"message": 'bad <!channel> & it\'s "odd"', "usage": "", "correlation_id": "x"})
        .text
    )
    assert 'bad &lt;!channel&gt; &amp; it\'s "odd"' in text


def test_inert_escapes_markup_and_removes_controls_and_bidi_overrides() -> None:
    typed = "node=<!channel>\u202e & <https://evil|docs>\x1b[31m\x00\u2066x\u2069\u200f\u061c\nnext\tcol"
    assert inert(typed) == "node=&lt;!channel&gt; &amp; &lt;https://evil|docs&gt;[31mx\nnext\tcol"
    assert (
        inert(typed, multiline=False) == "node=&lt;!channel&gt; &amp; &lt;https://evil|docs&gt;[31mx next col"
    )
    for mark in BIDI_CONTROLS:
        assert inert(f"a{mark}b") == "ab"
    assert inert("ünïcode — “quotes” ✓ 日本") == "ünïcode — “quotes” ✓ 日本"


def test_the_finalize_hook_makes_every_printed_value_inert() -> None:
    text = (
        Renderer([BUILTIN_TEMPLATES])
        .render(
            "error", {"message": "no such node: <!channel>\u202e\u0007", "usage": "", "correlation_id": "x"}
        )
        .text
    )
    assert text.startswith(":warning: no such node: &lt;!channel&gt;\n")
    assert "\u202e" not in text
    assert "\u0007" not in text


def test_mentions_are_not_escaped() -> None:
    text = Renderer([BUILTIN_TEMPLATES]).render("whoami", {"user_id": "U0BOB", "roles": []}).text
    assert text.startswith("<@U0BOB>")


def test_a_missing_variable_names_the_template_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.txt.j2").write_text("fine\n{{ plan.cluster }}\n")
    with pytest.raises(TemplateError) as caught:
        Renderer([tmp_path]).render("broken", {})
    assert caught.value.user_message.startswith(f"{tmp_path / 'broken.txt.j2'}:2: ")
    assert "plan" in caught.value.user_message


def test_a_team_template_overrides_the_builtin(tmp_path: Path) -> None:
    (tmp_path / "whoami.txt.j2").write_text("custom {{ user_id }}")
    assert (
        Renderer([tmp_path, BUILTIN_TEMPLATES]).render("whoami", {"user_id": "U1", "roles": []}).text
        == "custom U1"
    )


def test_the_sandbox_refuses_unsafe_attribute_access(tmp_path: Path) -> None:
    (tmp_path / "evil.txt.j2").write_text("{{ ''.__class__.__mro__ }}")
    with pytest.raises(TemplateError):
        Renderer([tmp_path]).render("evil", {})


def test_fit_drops_whole_lines_and_counts_them_never_cutting_a_token() -> None:
    line = "• <!date^1795435200^{date_short_pretty} {time}|2026-11-23 12:00 UTC> <@U0ALICE> `ns/web`"
    text = "\n".join(f"{line} {i}" for i in range(60))
    fitted = fit(text, 1000)
    assert len(fitted) <= 1000
    kept, last = fitted.rsplit("\n", 1)
    assert all(row.startswith(line) for row in kept.split("\n"))
    assert last == f"…and {60 - len(kept.split(chr(10)))} more"
    assert fit("short", 1000) == "short"


def test_a_clipped_title_is_escaped_once_in_a_link() -> None:
    # A pipeline's name in a build line's link: escaped by `clip`, not again by `link`.
    assert str(link("https://ci.example.com/b/41", clip("deploy|prod> <!channel> & x", 300))) == (
        "<https://ci.example.com/b/41|deploy¦prod&gt; &lt;!channel&gt; &amp; x>"
    )
    assert str(link("https://ci.example.com/b/41", "a > b")) == "<https://ci.example.com/b/41|a &gt; b>"


def test_a_window_s_end_carries_its_date_when_it_ends_another_day_or_the_window_is_long() -> None:
    start = datetime(2027, 3, 29, 7, tzinfo=UTC)  # 09:00 in Berlin
    assert "^{time}|" in until(datetime(2027, 3, 29, 10, tzinfo=UTC), start, "Europe/Berlin")
    # Three days: "Mar 29 09:00 – 09:00" hid two of them.
    assert "^{date_short_pretty} {time}|" in until(
        datetime(2027, 4, 1, 7, tzinfo=UTC), start, "Europe/Berlin"
    )
    # 23:00 – 02:00 Berlin ends the next day there.
    late = datetime(2027, 3, 29, 21, tzinfo=UTC)
    assert "^{date_short_pretty} {time}|" in until(
        datetime(2027, 3, 30, 0, tzinfo=UTC), late, "Europe/Berlin"
    )


def test_a_jobs_line_stays_inert_but_for_the_bot_s_mention_of_who_answered() -> None:
    line = "node n1: <@U0SHADOW> (<@U0BOSS> <!channel> <https://x|y>) chose to skip it"
    assert inert_naming(line, ("U0SHADOW",)) == (
        "node n1: <@U0SHADOW> (&lt;@U0BOSS&gt; &lt;!channel&gt; &lt;https://x|y&gt;) chose to skip it"
    )
    assert inert_naming(line, ()) == inert(line)
    # Their ids the bot wrote bare (as the audit keeps them) are mentions too; no one else's is.
    asked = "override asked by U0PRIMARY (ask <@U0BOSS>) and confirmed by U0SHADOW, seen by U0COORD"
    assert inert_naming(asked, ("U0PRIMARY", "U0SHADOW")) == (
        "override asked by <@U0PRIMARY> (ask &lt;@U0BOSS&gt;) and confirmed by <@U0SHADOW>, seen by U0COORD"
    )
    # Only a well-formed id is let through: anything else stays text.
    assert inert_naming("by <@U-primary> and <!channel>", ("U-primary", "!channel")) == (
        "by &lt;@U-primary&gt; and &lt;!channel&gt;"
    )


def test_people_in_text_the_bot_wrote_become_mentions_and_nothing_else_does() -> None:
    assert str(people("skipped by U0PRIMARY+U0SHADOW: done by hand")) == (
        "skipped by <@U0PRIMARY> and <@U0SHADOW>: done by hand"
    )
    assert (
        str(people("rejected by W012AB3CD: <!here> wait")) == "rejected by <@W012AB3CD>: &lt;!here&gt; wait"
    )
    # Words that look like ids but are not: no digit, too short, inside a word.
    assert str(people("UTC UPGRADES U0AB xU0PRIMARY9")) == "UTC UPGRADES U0AB xU0PRIMARY9"
    assert str(people(clip("skipped by U0PRIMARY: " + "x" * 300, 40))) == "skipped by <@U0PRIMARY>:…"


def test_people_of_a_roster_names_only_its_people_in_a_line_a_person_also_typed() -> None:
    # "Run paused: …" carries what a person typed: a word shaped like an id is not made a mention
    # (Slack would show an unknown user), while the roster's ids the bot wrote are.
    roster = {"primary": ("U0PRIMARY",), "coordinator": ("S0LEADS",)}
    typed_and_bot = "waiting for USWEST2 to drain; reported failed by U0PRIMARY"
    assert (
        str(people(typed_and_bot, roster)) == "waiting for USWEST2 to drain; reported failed by <@U0PRIMARY>"
    )
    # Without a roster, every id-shaped word in the bot's own words is one.
    assert str(people(typed_and_bot)) == "waiting for <@USWEST2> to drain; reported failed by <@U0PRIMARY>"


def test_the_snapshot_line_counts_one_thing_in_the_singular() -> None:
    """ "1 Warning events in the last hour" read wrong; one of anything is singular."""
    counts = {"nodes": 1, "pods": 40, "workloads": 9, "namespaces": 2, "warning_events": 1}
    one = {**SUMMARY, "counts": counts}
    text = Renderer([BUILTIN_TEMPLATES]).render("snapshot", {**SAMPLES["snapshot"], "summary": one}).text
    assert "· 1 node ·" in text
    assert "· 2 namespaces ·" in text
    assert "· 1 Warning event in the last hour" in text
