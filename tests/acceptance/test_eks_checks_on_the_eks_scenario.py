"""Issue 29's `check --to 1.25` acceptance: the EKS checks on the `eks-nodegroups` scenario.

The terminal front door runs in a subprocess with the real kube adapter against the sim's API
server and boto3's real `eks`, `ec2` and `autoscaling` clients against the sim's AWS APIs
(`endpoint_url`), with dummy credentials from the environment. It reports the planted
incompatible add-on and the control-plane subnet short of addresses (and the scenario's other AWS
plants); without a provider, and with boto3 unimportable, it says the EKS checks were skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks import eks
from bot.core.checks import service as checks
from bot.records import ClusterConfig, EksProvider
from bot.sim import SimCluster
from bot.sim.world.scenario import load_scenario
from tests.support.bot_process import bot_command

#: (id, severity, first object) of every EKS finding the scenario plants.
EXPECTED_EKS = {
    ("EKS001", "Required", "Subnet subnet-0c0a10000000000a1 (ap-northeast-1a): 3 free"),
    (
        "EKS005",
        "Required",
        "Add-on kube-proxy: installed v1.24.17-minimal-eksbuild.4, 1.25 default v1.25.16-minimal-eksbuild.1",
    ),
    ("EKS008", "Required", "Node group others: 1.22"),
    (
        "EKS010",
        "Required",
        "/apis/policy/v1beta1/poddisruptionbudgets (→ /apis/policy/v1/poddisruptionbudgets; helm/v3.8.2 8640 requests in 30 days)",
    ),
    ("EKS010", "Recommended", "EKS insight"),
    ("EKS006", "Recommended", "Node group ng-shared: launch template"),
    (
        "EKS009",
        "Recommended",
        "Auto Scaling group eksctl-runbook-prod-nodegroup-others-old-NodeGroup-1U7KZ3QX0AB2F: 0 instances, desired 0",
    ),
}


def aws_env(tmp_path: Path) -> dict[str, str]:
    """Dummy credentials from the environment, and no shared files or instance metadata to find."""
    return {
        "AWS_ACCESS_KEY_ID": "sim",
        "AWS_SECRET_ACCESS_KEY": "sim",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def config_text(sim: SimCluster, kubeconfig: Path, *, provider: bool) -> str:
    text = f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n"
    if provider:
        text += f"    provider:\n      eks: {{name: runbook-prod, region: ap-northeast-1, endpoint_url: '{sim.aws_url}'}}\n"
    return text


def cli(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )


def eks_key(finding: dict[str, Any]) -> tuple[str, str, str]:
    first = finding["objects"][0]
    for prefix in ("EKS insight", "Node group ng-shared: launch template"):
        if first.startswith(prefix):
            first = prefix
    return finding["id"], finding["severity"], first


def test_check_reports_the_planted_add_on_and_subnet_through_boto3_against_the_sim(
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    config = write_config(config_text(sim_eks, sim_kubeconfig(sim_eks), provider=True))
    result = cli(config, {**os.environ, **aws_env(tmp_path)}, "check", "--to", "1.25", "--format", "json")
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    found = {eks_key(f) for f in report["findings"] if f["source"] == "EKS API"}
    assert found == EXPECTED_EKS
    by_id = {f["id"]: f for f in report["findings"] if f["source"] == "EKS API"}
    assert (
        "update-addon --addon-name kube-proxy --addon-version v1.25.16-minimal-eksbuild.1"
        in by_id["EKS005"]["remedy"]
    )
    assert by_id["EKS001"]["objects"] == ["Subnet subnet-0c0a10000000000a1 (ap-northeast-1a): 3 free"]
    assert "EKS cluster runbook-prod: 1.24 (eks.12), ACTIVE" in report["notes"]
    assert "EKS insight Amazon EKS add-on version compatibility: PASSING" in report["notes"]
    assert not any("skipped" in n for n in report["notes"])
    calls = json.loads(
        subprocess.run(
            ["curl", "-s", f"{sim_eks.aws_url}/sim/calls"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert calls["DescribeAddonVersions"] == 4  # one per installed add-on, for the target
    assert "UpdateClusterVersion" not in calls  # a check changes nothing

    text = cli(config, {**os.environ, **aws_env(tmp_path)}, "check", "--to", "1.25")
    assert (
        "[Required] EKS005 Add-on kube-proxy v1.24.17-minimal-eksbuild.4 is not offered for Kubernetes 1.25"
        in text.stdout
    )
    assert "source: EKS API" in text.stdout
    assert "Traceback" not in text.stderr


def test_without_a_provider_the_eks_checks_are_skipped_and_the_report_says_why(
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    config = write_config(config_text(sim_eks, sim_kubeconfig(sim_eks), provider=False))
    result = cli(config, {**os.environ, **aws_env(tmp_path)}, "check", "--to", "1.25")
    assert result.returncode == 3, result.stderr
    assert "note: EKS checks skipped: the cluster's configuration names no provider" in result.stdout
    # An AKS or GKE cluster's people read there how to name theirs.
    assert "names no provider (provider: {eks: …}, {aks: …} or {gke: …})" in result.stdout
    assert "EKS0" not in result.stdout


def test_without_boto3_the_eks_checks_are_skipped_and_the_report_says_how_to_get_them(
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    """boto3 made unimportable for the bot's process: a `boto3` package first on its path whose
    import fails, as it does where the `aws` extra is not installed."""
    blocker = tmp_path / "no-boto3" / "boto3"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named boto3 (blocked by the test)')\n")
    env = {**os.environ, **aws_env(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(blocker.parent), env.get("PYTHONPATH", "")) if p)
    config = write_config(config_text(sim_eks, sim_kubeconfig(sim_eks), provider=True))
    result = cli(config, env, "check", "--to", "1.25")
    assert result.returncode == 3, result.stderr
    assert (
        "note: EKS checks skipped: boto3 is not installed (pip install 'upgrade-bot[aws]')" in result.stdout
    )
    assert "EKS0" not in result.stdout
    assert "Traceback" not in result.stderr


def test_node_subnets_short_of_the_pods_to_reschedule_fail_the_check(
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = load_scenario("eks-nodegroups")
    assert scenario.aws is not None
    subnets = [{**s, "free": 8} if "nodes" in s.get("use", []) else s for s in scenario.aws["subnets"]]
    scenario.aws = {**scenario.aws, "subnets": subnets}
    sim = sim_factory(scenario, speed=0.0, seed=1)
    for name, value in aws_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    config = ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim), context="sim")
    provider = EksProvider(name="runbook-prod", region="ap-northeast-1", endpoint_url=sim.aws_url)
    reader = Cluster.connect(config)
    try:
        notes: list[str] = []
        findings = eks.eks_extra(provider)(reader, "1.25", notes)
    finally:
        reader.close()
    (short,) = [f for f in findings if f.id == "AWS002"]
    assert short.severity == "required"
    assert short.title.startswith(
        "Node and pod subnets have 24 free IP addresses; the node-group updates need about"
    )
    need = int(short.title.rsplit(" ", 1)[-1])
    assert need > 24
    assert f"starts 11 new nodes and reschedules {need - 11} pods" in short.why
    # The same check, through the front doors' extras, with the subnets as planted: no AWS002.
    planted = sim_factory("eks-nodegroups", speed=0.0, seed=1)
    reader = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(planted), context="sim"))
    try:
        report = checks.run_check(
            reader,
            target="1.25",
            extras=checks.default_extras(
                cluster=ClusterConfig(
                    name="sim",
                    eks=EksProvider(
                        name="runbook-prod", region="ap-northeast-1", endpoint_url=planted.aws_url
                    ),
                )
            ),
        )
    finally:
        reader.close()
    assert "AWS002" not in {f.id for f in report.findings}
    assert {"EKS001", "EKS005"} <= {f.id for f in report.findings}


def test_checking_a_plan_on_its_cluster_uses_the_clusters_provider(
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
    tmp_path: Path,
) -> None:
    # The shipped EKS plan, on the sim's cluster: its EKS steps' checks reach EKS through the
    # configured provider (they said "cluster sim has no EKS provider" for each step, provider or not).
    plan = tmp_path / "eks-managed.yaml"
    shipped = Path(__file__).parents[2] / "templates" / "plans" / "eks-managed.yaml"
    plan.write_text(shipped.read_text().replace("cluster: prod", "cluster: sim", 1))
    env = {**os.environ, **aws_env(tmp_path)}
    with_provider = write_config(config_text(sim_eks, sim_kubeconfig(sim_eks), provider=True))
    checked = cli(with_provider, env, "plan", "validate", str(plan), "--check-cluster")
    assert checked.returncode == 0, checked.stderr
    assert "provider" not in checked.stderr, checked.stderr
    without = write_config(config_text(sim_eks, sim_kubeconfig(sim_eks), provider=False), name="bare.yaml")
    bare = cli(without, env, "plan", "validate", str(plan), "--check-cluster")
    assert "(eks-update-cluster): cluster sim has no EKS provider: the EKS actions need" in bare.stderr
