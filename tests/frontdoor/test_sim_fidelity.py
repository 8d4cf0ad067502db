"""`upgrade-bot sim fidelity SNAPSHOT` (issue 42): the twin of a cluster is served, snapshotted and
checked, and compared with the cluster, through the real CLI, the real kube client and the sim.

The three scenarios CI measures it on must give 0 differences: no regression and no change in the
diff of the cluster's snapshot with the twin's, the same records less ids, ages and pod-name
suffixes, and the same findings (id, severity, objects) from the check on both. A cluster that
changed after its snapshot is not what its twin is, and the command says how (exit 3).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.sim import SimCluster
from tests.support.aws import aws_env, provider_yaml
from tests.support.bot_process import run_bot


def cli(
    tmp_path: Path, *args: str, timeout: float = 180, aws: bool = False
) -> subprocess.CompletedProcess[str]:
    """The bot's terminal, with no Slack, AWS or kube settings of the environment it runs in
    (`aws`: the sim's dummy AWS credentials)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "UPGRADE_BOT_", "AWS_")) and k not in ("KUBECONFIG", "XDG_STATE_HOME")
    }
    env.update(HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"))
    if aws:
        env.update(aws_env(tmp_path))
    return run_bot(*args, cwd=tmp_path, env=env, timeout=timeout)


def _snapshot(
    tmp_path: Path,
    sim: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    *,
    provider: bool = False,
) -> str:
    """Snapshot `sim` as `pre`; with `provider`, the cluster names the sim's EKS API."""
    named = f", provider: {provider_yaml(sim)}" if provider else ""
    config = str(
        write_config(f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim)}, context: sim{named}}}\n")
    )
    snap = cli(tmp_path, "snapshot", "pre", "--config", config, timeout=900, aws=provider)
    assert snap.returncode == 0, snap.stderr
    assert "gap:" not in snap.stdout
    return config


def _fidelity(
    scenario: str,
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    *,
    provider: bool = False,
) -> tuple[int, str]:
    sim = sim_factory(scenario, speed=0.0, seed=1)
    config = _snapshot(tmp_path, sim, sim_kubeconfig, write_config, provider=provider)
    fidelity = cli(tmp_path, "sim", "fidelity", "pre", "--config", config, timeout=1800, aws=provider)
    assert "Traceback" not in fidelity.stderr, fidelity.stderr[-3000:]
    # Its last line says how long each part took (the figures CI keeps an eye on).
    assert fidelity.stdout.splitlines()[-1].startswith("timings: serve the twin ")
    return fidelity.returncode, fidelity.stdout


@pytest.mark.parametrize("scenario", ["known-issues-2"])
def test_the_twin_of_a_ci_scenario_is_true_to_it(
    scenario: str,
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    code, out = _fidelity(scenario, tmp_path, sim_factory, sim_kubeconfig, write_config)
    assert code == 0, out[-6000:]
    assert ": 0 differences\n" in out
    assert "regressions: 0   changes: 0   snapshot differences: 0   finding differences: 0" in out


def test_the_twin_of_the_eks_cluster_keeps_its_pods_states_and_known_issues(
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    code, out = _fidelity(
        "eks-nodegroups", tmp_path, sim_factory, sim_kubeconfig, write_config, provider=True
    )
    # The same snapshot less ids, ages and pod-name suffixes: 61 pods (no DaemonSet pod on the
    # Fargate nodes), each on its node, the ledger Pending, payments-worker at 2/3 with vault-agent
    # not ready, the sidecars and init containers by name (B14). And the same findings: KI004,
    # KI010, DRAIN001, POD001, DRAIN002, RES003, HOOK001; KI002 from the proxies' logs; API001 and
    # API002 from the apiserver metric's callers, the Helm release, the last-applied and
    # managedFields of the objects applied on old versions. With the EKS provider, the cloud's side
    # the snapshot kept (the `provider` section, compared field by field) and the EKS checks'
    # findings, the twin's read from its own AWS facade: EKS001 (a control-plane subnet with 3
    # free addresses), EKS005 (kube-proxy not offered for 1.25), EKS006 (ng-shared's launch
    # template), EKS008 (`others` on 1.22), EKS009 (the stale ASG), EKS010 (the insights).
    assert code == 0, out[-6000:]
    assert "regressions: 0   changes: 0   snapshot differences: 0   finding differences: 0" in out
    compared = out.splitlines()[-2].removeprefix("findings on the cluster: ").split(", ")
    assert {"EKS001", "EKS005", "EKS006", "EKS008", "EKS009", "EKS010", "KI004", "KI002"} <= set(compared)


def test_a_cluster_changed_since_its_snapshot_is_not_its_twin_and_the_command_says_how(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    kubectl: Callable[..., object],
) -> None:
    config = _snapshot(tmp_path, sim_eks, sim_kubeconfig, write_config)
    node = "ip-10-0-0-21.ap-northeast-1.compute.internal"
    cordon = kubectl(sim_eks, "cordon", node)
    assert cordon.returncode == 0, cordon.stderr  # type: ignore[attr-defined]
    fidelity = cli(tmp_path, "sim", "fidelity", "pre", "--config", config, timeout=900)
    assert fidelity.returncode == 3, fidelity.stdout[-3000:] + fidelity.stderr[-3000:]
    # The check on the cluster finds the node cordoned; the twin, from before, does not.
    assert f"NODE002 (recommended) only on the cluster: Node {node}" in fidelity.stdout


def test_an_unknown_snapshot_is_a_usage_error(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    config = str(write_config("clusters:\n  prod: {kubeconfig: /nonexistent, context: sim}\n"))
    fidelity = cli(tmp_path, "sim", "fidelity", "nope", "--config", config)
    assert fidelity.returncode in (1, 2), fidelity.stderr
    assert "nope" in fidelity.stderr
    assert "Traceback" not in fidelity.stderr
