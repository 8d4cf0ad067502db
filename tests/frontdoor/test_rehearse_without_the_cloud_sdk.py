"""A plan's snapshot and check steps on an EKS cluster where the bot has no `aws` extra (boto3 cannot be
imported): what the snapshot did not capture and the checks did not see is on each step's line, and
a step that asked for EKS findings only is not checked (it fails, and people decide), never passed
on no evidence."""

from __future__ import annotations

import os
from pathlib import Path

from bot.resources import BUILTIN_PLANS
from tests.support.bot_process import run_bot

SKIPPED = "EKS checks skipped: boto3 is not installed (pip install 'upgrade-bot[aws]')"

STEPS = """
steps:
  - id: snapshot-pre
    phase: preparation
    title: Snapshot the cluster before the upgrade
    gate: {any_of: [primary]}
    actions:
      - snapshot: {label: pre}
  - id: checks
    phase: preparation
    title: Pre-flight checks
    gate: {any_of: [primary]}
    actions:
      - check: {to: "1.25"}
  - id: check-leftovers
    phase: post
    title: No Auto Scaling groups left behind, no launch-template drift
    gate: {any_of: [primary]}
    actions:
      - check: {only: "EKS009,EKS006"}
"""


def test_steps_say_the_eks_side_was_not_read_and_an_eks_only_check_is_not_checked(
    tmp_path: Path,
) -> None:
    # The built-in EKS plan's cluster, window and roster, with two check steps of its own.
    head = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text().split("\nsteps:", 1)[0]
    plan = tmp_path / "eks-leftovers.yaml"
    plan.write_text(head.replace("name: eks-nodegroups", "name: eks-leftovers", 1) + STEPS)
    # A `boto3` package first on the path whose import fails, as where the extra is not installed.
    blocker = tmp_path / "no-boto3" / "boto3"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named boto3 (blocked by the test)')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(blocker.parent), os.environ.get("PYTHONPATH")))),
    }
    result = run_bot("rehearse", str(plan), "--auto-approve", cwd=tmp_path, env=env)
    out = result.stdout
    assert result.returncode == 3, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    # The snapshot is stored without the cloud's side, and its line says so.
    assert (
        "✅ `snapshot-pre` succeeded: snapshot #1 `pre`: 14 nodes, 61 pods, 23 workloads; not captured: "
        "provider (boto3 is not installed (pip install 'upgrade-bot[aws]'): No module named boto3 "
    ) in out
    # The whole pre-flight check fails on the scenario's planted findings, and says what it did not see.
    (checks,) = [line for line in out.splitlines() if "❌ *`checks` failed* in run" in line]
    assert "pre-flight check for 1.25 FAILED: " in checks
    assert f"Recommended; {SKIPPED}" in checks
    # The step that asks for EKS009 and EKS006 only has nothing to go on: not checked, with the reason.
    (leftovers,) = [line for line in out.splitlines() if "❌ *`check-leftovers` failed* in run" in line]
    assert f": check of EKS009, EKS006 for 1.25 NOT CHECKED: {SKIPPED}" in leftovers
    assert "check of EKS009, EKS006 for 1.25 passed" not in out
