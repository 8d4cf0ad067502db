"""A run that suspended a GitOps owner and did not resume it says so at its end, on the card and
in the thread, with the action that resumes it; a run that resumed it says nothing of the kind
(issue-free runs once ended with a plain "Run completed" and Flux suspended for good)."""

from __future__ import annotations

from pathlib import Path

from tests.support.bot_process import run_bot

PLAN = """\
name: hold
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T00:00", end: "2026-12-10T00:00", timezone: UTC}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: suspend-apps
    title: Suspend Flux's apps Kustomization
    gate: {approve: [primary, shadow]}
    actions:
      - flux-suspend: {object: kustomization/flux-system/apps}
  - id: look
    title: Look at the dashboards
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
"""
RESUME = """\
  - id: resume-apps
    title: Resume Flux's apps Kustomization
    gate: {approve: [primary, shadow]}
    actions:
      - flux-resume: {object: kustomization/flux-system/apps}
"""
HELD = (
    "[!] Still held by this run - its GitOps owners do not reconcile until they are resumed: "
    '`/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "..."`'
)


def _rehearse(tmp_path: Path, text: str) -> str:
    plan = tmp_path / "hold.yaml"
    plan.write_text(text, encoding="utf-8")
    result = run_bot("rehearse", str(plan), "--scenario", "gitops", "--auto-approve", "--plain", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_a_run_that_left_flux_suspended_says_so_at_its_end(tmp_path: Path) -> None:
    out = _rehearse(tmp_path, PLAN)
    # In the thread (the run's completion) and on the final card.
    assert out.count(HELD) == 2, out[-3000:]
    assert "-> [done] Run completed\n" in out


def test_a_run_that_resumed_it_says_nothing_of_the_kind(tmp_path: Path) -> None:
    out = _rehearse(tmp_path, PLAN + RESUME)
    assert "Still held by this run" not in out
    assert "flux-resume: Flux Kustomization flux-system/apps is reconciling" in out
