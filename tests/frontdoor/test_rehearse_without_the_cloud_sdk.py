"""A plan's snapshot and check steps on an EKS cluster where the bot has no `aws` extra (boto3 cannot be
imported): what the snapshot did not capture and the checks did not see is on each step's line, and
a step that asked for EKS findings only is not checked (it fails, and people decide), never passed
on no evidence. A plan whose ACTIONS call a cloud without its SDK is refused before the sim starts
(nothing of it could be rehearsed), and `plan validate` warns that running it needs the extra."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

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


def _without(tmp_path: Path, package: str) -> dict[str, str]:
    """The environment of a bot whose `package` cannot be imported, as where its extra is not
    installed: a package of that name first on the path, whose import fails."""
    blocker = tmp_path / f"no-{package}" / package
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        f"raise ImportError('No module named {package} (blocked by the test)')\n"
    )
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(blocker.parent), os.environ.get("PYTHONPATH")))),
    }


def test_steps_say_the_eks_side_was_not_read_and_an_eks_only_check_is_not_checked(
    tmp_path: Path,
) -> None:
    # The built-in EKS plan's cluster, window and roster, with two check steps of its own.
    head = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text().split("\nsteps:", 1)[0]
    plan = tmp_path / "eks-leftovers.yaml"
    plan.write_text(head.replace("name: eks-nodegroups", "name: eks-leftovers", 1) + STEPS)
    result = run_bot("rehearse", str(plan), "--auto-approve", cwd=tmp_path, env=_without(tmp_path, "boto3"))
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


@pytest.mark.parametrize(
    ("plan", "package", "said"),
    [
        (
            "aks-managed",
            "azure",
            "the plan's AKS actions (aks-upgrade-control-plane, aks-upgrade-nodepool) need "
            "azure-mgmt-containerservice, which this bot does not have (pip install 'upgrade-bot[aks]')",
        ),
        (
            "gke-managed",
            "google",
            "the plan's GKE actions (gke-update-master, gke-update-nodepool) need google-cloud-container, "
            "which this bot does not have (pip install 'upgrade-bot[gke]')",
        ),
        (
            "eks-managed",
            "boto3",
            "the plan's EKS actions (eks-update-nodegroup, eks-update-cluster, eks-update-addon) need boto3, "
            "which this bot does not have (pip install 'upgrade-bot[aws]')",
        ),
    ],
)
def test_a_plan_whose_cloud_actions_cannot_run_is_refused_before_the_sim_and_validate_warns(
    tmp_path: Path, plan: str, package: str, said: str
) -> None:
    env = _without(tmp_path, package)
    # Every cloud step would fail and be skipped, and the rehearsal end "completed" (exit 3) having
    # rehearsed nothing: refused in one line, a set-up problem (exit 2), before the sim is served.
    result = run_bot("rehearse", plan, "--auto-approve", cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout == ""
    assert result.stderr == f"upgrade-bot: cannot rehearse {plan} here: {said}\n"
    # The plan itself is valid: `plan validate` passes it, and warns what running it needs.
    result = run_bot("plan", "validate", plan, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"plan {plan} is valid" in result.stdout
    # (Past the built-in plan's dated window, `plan validate` also says that window has ended.)
    (warning,) = [w for w in result.stderr.splitlines() if "the plan's window ended" not in w]
    assert warning.endswith(f".yaml: warning: {said}: it cannot run until that is installed")


def test_plan_load_warns_that_a_plans_cloud_actions_need_their_extra(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    # `/upgrade plan load` (here through `exec`, the same command) warns as `plan validate` does:
    # each such action would fail at its step, after its gate.
    config = write_config()
    env = {**_without(tmp_path, "azure"), "UPGRADE_BOT_CONFIG": str(config)}
    result = run_bot("exec", "--as", "U0PRIMARY", "plan load aks-managed", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        "the plan's AKS actions (aks-upgrade-control-plane, aks-upgrade-nodepool) need "
        "azure-mgmt-containerservice, which this bot does not have (pip install 'upgrade-bot[aks]')"
    ) in result.stdout
