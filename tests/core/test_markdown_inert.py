"""The Markdown run report and the diff's Markdown carry cluster names inert, as the HTML report
does: no `<script>`, `<img onerror>`, `<!channel>`, link or U+202E survives raw (issue 38, item 5)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.markdown import md_text
from bot.core.runs.report import build_report, render
from bot.core.snapshots.diff import DiffReport, Finding
from tests.support.report_runs import stored_run

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
CHANNEL = "<!channel>"
BIDI = "evil\u202egnp.exe"
LINK = "[docs](javascript:alert(3))"
HOSTILE = [SCRIPT, IMG, CHANNEL, BIDI, LINK, "a|b\nc", "`code` *bold* _it_ \\"]


def assert_inert(markdown: str) -> None:
    for raw in ("<script", "<img", "<!channel", "\u202e", "<!"):
        assert raw not in markdown, raw
    assert not re.search(r"(?<!\\)\]\(javascript:", markdown)  # a link only if `]` is not escaped
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", markdown)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (SCRIPT, "&lt;script&gt;alert(1)&lt;/script&gt;"),
        (IMG, '&lt;img src=x onerror="alert(2)"&gt;'),
        (CHANNEL, "&lt;!channel&gt;"),
        (BIDI, "evilgnp.exe"),
        (LINK, "\\[docs\\](javascript:alert(3))"),
        ("a|b\nc", "a\\|b c"),
        ("`code` *bold* _it_ \\", "\\`code\\` \\*bold\\* \\_it\\_ \\\\"),
        ("ip-10-0-1-5.ec2.internal", "ip-10-0-1-5.ec2.internal"),
    ],
)
def test_md_text_is_literal_on_one_line(value: str, expected: str) -> None:
    assert md_text(value) == expected


def test_the_run_reports_markdown_carries_hostile_names_inert(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        report = build_report(store, stored_run(store))
    finally:
        store.close()
    node = report.nodes[0]
    hostile = replace(
        report,
        cluster=SCRIPT + BIDI,
        plan=IMG,
        nodes=(replace(node, name=CHANNEL + IMG, group=BIDI + SCRIPT), *report.nodes[1:]),
        notes=(*report.notes, *HOSTILE),
        findings=(*report.findings, LINK + CHANNEL),
    )
    markdown = render(hostile, "md").decode()
    assert_inert(markdown)
    assert f"- **Cluster**: {md_text(SCRIPT + BIDI)}" in markdown
    assert f"| {md_text(CHANNEL + IMG)} |" in markdown
    assert "### evilgnp.exe&lt;script&gt;" in markdown


def test_the_diffs_markdown_carries_hostile_names_inert() -> None:
    snap = {
        "id": 1,
        "label": CHANNEL,
        "cluster": SCRIPT + BIDI,
        "taken_at": "t",
        "version": {"gitVersion": IMG},
    }
    findings = [
        Finding(
            kind="regression", category=IMG, subject=f"node {SCRIPT}", detail=CHANNEL + BIDI, namespace=LINK
        )
    ]
    report = DiffReport(
        before=snap,
        after=snap | {"id": 2, "label": SCRIPT},
        regressions=findings,
        expected=findings,
        warnings=findings,
        skipped=[BIDI + CHANNEL],
    )
    markdown = report.to_markdown()
    assert_inert(markdown)
    assert '| &lt;img src=x onerror="alert(2)"&gt; | \\[docs\\](javascript:alert(3)) |' in markdown
    assert "# Cluster diff: #1 &lt;!channel&gt; → #2 &lt;script&gt;alert(1)&lt;/script&gt;" in markdown
