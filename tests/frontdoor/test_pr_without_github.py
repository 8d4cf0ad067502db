"""A step whose `done` requires its PR merged and green, in a bot with no `github:`: the gate says
up front that the PR cannot be read and the step cannot be confirmed done, and the rehearsal's
stop says why (it once said only "nobody in the roster can satisfy the gate")."""

from __future__ import annotations

from pathlib import Path

from tests.support.bot_process import run_bot

PLAN = """\
name: pr-needs-github
cluster: prod
current_version: "1.24.17"
target_version: "1.25.16"
window: {start: "2026-12-01T14:00", end: "2026-12-01T17:00", timezone: UTC}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: launch-istio
    title: Merge the node group PR for istio
    gate: {any_of: [primary]}
    done: {any_of: [primary, shadow]}
    pr: {repo: org/eks-provision-configuration, number: 62, require: {merged: true, checks: success}}
"""

UNREAD = (
    "*PR* org/eks-provision-configuration#62: no GitHub access is configured (`github:`); `done` requires "
    "it merged and its checks successful, so the step cannot be confirmed done until it is read"
)


def test_the_gate_says_the_pr_it_requires_cannot_be_read_and_the_stop_says_why(tmp_path: Path) -> None:
    plan = tmp_path / "pr-needs-github.yaml"
    plan.write_text(PLAN, encoding="utf-8")
    result = run_bot("rehearse", str(plan), "--auto-approve", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    # The start gate and the done gate both say it, before anyone clicks.
    gates = [line for line in result.stdout.splitlines() if UNREAD in line]
    assert len(gates) >= 2, result.stdout[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        "upgrade-bot: nobody in the roster can satisfy the gate of launch-istio (the primary or the shadow): "
        "`launch-istio` cannot be confirmed done yet: its PR could not be read (no GitHub access is configured "
        "(`github:`)) — a rehearsal plays no pull request: rehearse a copy of the plan without launch-istio's "
        "`pr.require` (its gate then waits for people only), as a real run would once the PR is merged"
    )
