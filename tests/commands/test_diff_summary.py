"""`/upgrade diff`'s channel summary stays within one Block Kit section, however big the diff."""

from __future__ import annotations

from bot.core.diff import Finding
from bot.core.rendering import Renderer
from bot.resources import BUILTIN_TEMPLATES
from commands.diff import TOP, _fit


def finding(kind: str, i: int, detail_length: int) -> Finding:
    return Finding(
        kind=kind,
        category="new CrashLoopBackOff pods" if kind == "regression" else "nodes replaced",
        subject=f"Deployment kube-system/workload-{i}",
        detail="x" * detail_length,
        namespace="kube-system",
    )


def render(regressions: list[Finding], expected: list[Finding]) -> str:
    shown_regressions, shown_expected = _fit(regressions, expected)
    context = {
        "before": {"id": 1, "label": "pre", "taken_at": "x"},
        "after": {"id": 2, "label": "post", "taken_at": "y"},
        "regressions": shown_regressions,
        "regression_count": len(regressions),
        "regression_categories": [("new CrashLoopBackOff pods", len(regressions))],
        "expected": shown_expected,
        "expected_count": len(expected),
        "skipped": [],
    }
    return Renderer([BUILTIN_TEMPLATES]).render("diff", context).text


def test_long_findings_are_clipped_and_cut_so_the_summary_fits_one_section() -> None:
    regressions = [finding("regression", i, 900) for i in range(40)]
    expected = [finding("expected", i, 900) for i in range(40)]
    text = render(regressions, expected)
    assert len(text) <= 3000
    assert "*Regressions* (first " in text
    bullets = [line for line in text.splitlines() if line.startswith("• ")]
    assert 1 <= len(bullets) < TOP
    assert all(line.endswith("…") for line in bullets)


def test_a_small_diff_is_shown_whole() -> None:
    regressions = [finding("regression", i, 40) for i in range(3)]
    expected = [finding("expected", i, 40) for i in range(4)]
    text = render(regressions, expected)
    assert len([line for line in text.splitlines() if line.startswith("• ")]) == 7
    assert "(first" not in text
