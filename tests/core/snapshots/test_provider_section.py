"""The cloud's side of a snapshot (`core/snapshots/provider`, issue 42): read through the provider
port (the real EKS adapter and boto3, against the sim's AWS facade), kept as the `provider`
section, turned into the twin's `aws:` and compared by `sim fidelity`."""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kube import Cluster
from bot.core.snapshots.fidelity import compare_providers, compare_snapshots
from bot.core.snapshots.projection import take_snapshot
from bot.core.snapshots.provider import provider_of
from bot.records import ClusterConfig, EksProvider
from bot.sim import SimCluster
from bot.sim.world.twin import scenario_from_snapshot
from tests.support.aws import EKS_NAME, REGION, aws_env


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in aws_env(tmp_path).items():
        monkeypatch.setenv(key, value)


def _config(sim: SimCluster, kubeconfig: Path, endpoint: str | None = None) -> ClusterConfig:
    return ClusterConfig(
        name="prod",
        kubeconfig=kubeconfig,
        context="sim",
        eks=EksProvider(name=EKS_NAME, region=REGION, endpoint_url=endpoint or sim.aws_url),
    )


def _snapshot(config: ClusterConfig) -> dict[str, Any]:
    cluster = Cluster.connect(config)
    try:
        return take_snapshot(
            cluster, label="pre", taken_by="U1", now=datetime.now(UTC), provider=provider_of(config)
        )
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def eks_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("provider")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in aws_env(tmp).items():
            patch.setenv(key, value)
        sim = SimCluster("eks-nodegroups", speed=0.0, seed=1).start()
        try:
            yield _snapshot(_config(sim, sim.write_kubeconfig(tmp / "kubeconfig")))
        finally:
            sim.stop()


def test_the_snapshot_keeps_the_eks_api_the_checks_and_the_draft_read(eks_snapshot: dict[str, Any]) -> None:
    section = eks_snapshot["provider"]
    assert eks_snapshot["gaps"] == []
    assert (section["kind"], section["name"], section["captured"]) == ("eks", "runbook-prod", True)
    assert (section["region"], section["account"]) == ("ap-northeast-1", "123456789012")
    assert section["minors"] == ["1.24", "1.25", "1.26", "1.27"]
    cluster = section["cluster"]
    assert (cluster["version"], cluster["platform_version"], cluster["status"]) == (
        "1.24",
        "eks.12",
        "ACTIVE",
    )
    assert cluster["subnets"] == ["subnet-0c0a10000000000a1", "subnet-0c0a10000000000c1"]
    groups = {g["name"]: g for g in section["node_groups"]}
    assert sorted(groups) == ["control-plane", "istio", "logging", "ng-shared", "others"]
    assert groups["others"]["version"] == "1.22"  # the lagging group (EKS008, the draft's catch-up)
    assert groups["ng-shared"]["desired"] == 3
    assert {k: groups["ng-shared"]["launch_template"][k] for k in ("version", "latest")} == {
        "version": "2",
        "latest": 3,
    }
    assert groups["logging"]["subnets"] == ["subnet-0d0a10000000000a2", "subnet-0d0a10000000000c2"]
    assert {a["name"]: a["version"] for a in section["addons"]} == {
        "aws-ebs-csi-driver": "v1.19.0-eksbuild.2",
        "coredns": "v1.8.7-eksbuild.3",
        "kube-proxy": "v1.24.17-minimal-eksbuild.4",
        "vpc-cni": "v1.12.6-eksbuild.2",
    }
    # The versions offered over the minors kept, newest first, with their defaults (the draft's pick).
    assert section["offered"]["coredns"] == [
        {"version": "v1.9.3-eksbuild.11", "clusters": ["1.25"], "default": ["1.25"]},
        {"version": "v1.8.7-eksbuild.3", "clusters": ["1.24", "1.25"], "default": ["1.24"]},
    ]
    assert section["offered"]["kube-proxy"][1] == {
        "version": "v1.24.17-minimal-eksbuild.4",
        "clusters": ["1.24"],
        "default": ["1.24"],
    }
    subnets = {s["id"]: s for s in section["subnets"]}
    assert subnets["subnet-0c0a10000000000a1"] == {
        "id": "subnet-0c0a10000000000a1",
        "zone": "ap-northeast-1a",
        "cidr": "10.0.255.0/28",
        "free": 3,
        "use": ["control-plane"],
    }
    assert subnets["subnet-0d0a10000000000b2"]["use"] == ["nodes", "pods"]
    insights = {i["name"]: i for i in section["insights"]}
    removed = insights["Deprecated APIs removed in Kubernetes v1.25"]
    assert (removed["status"], removed["kubernetes_version"]) == ("ERROR", "1.25")
    assert removed["deprecations"][0]["clients"] == [{"user_agent": "helm/v3.8.2", "requests": 8640}]
    assert insights["Kubelet version skew"]["status"] == "WARNING"
    # eksctl's old group, with no node in it (EKS009); the managed groups' own ASGs are not listed.
    assert section["other_asgs"] == [
        {
            "name": "eksctl-runbook-prod-nodegroup-others-old-NodeGroup-1U7KZ3QX0AB2F",
            "instances": 0,
            "desired": 0,
            "zones": ["ap-northeast-1a", "ap-northeast-1b", "ap-northeast-1c"],
            "tags": {"alpha.eksctl.io/nodegroup-name": "others-old"},
        }
    ]


def test_the_twin_serves_the_eks_api_the_snapshot_kept(
    eks_snapshot: dict[str, Any], sim_factory: Callable[..., SimCluster], tmp_path: Path
) -> None:
    scenario = scenario_from_snapshot(eks_snapshot)
    assert scenario["cluster"]["platform"] == "eks"
    aws = scenario["aws"]
    assert aws["cluster_name"] == "runbook-prod"
    groups = {g["name"]: g for g in eks_snapshot["provider"]["node_groups"]}
    assert aws["launch_templates"] == {
        g: {
            "versions": 3 if g == "ng-shared" else 1,
            "used": 2 if g == "ng-shared" else 1,
            "id": groups[g]["launch_template"]["id"],
            "name": groups[g]["launch_template"]["name"],
        }
        for g in ("control-plane", "istio", "logging", "ng-shared", "others")
    }
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    twin = sim_factory(path, speed=0.0, seed=1)
    twin_snap = _snapshot(_config(twin, twin.write_kubeconfig(tmp_path / "twin.kubeconfig")))
    # Field by field the same; the launch templates' names and ids too (EKS006 names them).
    assert compare_providers(eks_snapshot["provider"], twin_snap["provider"]) == []
    assert [g["launch_template"] for g in twin_snap["provider"]["node_groups"]] == [
        g["launch_template"] for g in eks_snapshot["provider"]["node_groups"]
    ]


def test_a_changed_eks_side_is_a_difference_and_an_old_snapshot_has_no_provider(
    eks_snapshot: dict[str, Any],
) -> None:
    section = eks_snapshot["provider"]
    changed = copy.deepcopy(section)
    changed["subnets"][0]["free"] = 40
    changed["node_groups"][0]["launch_template"]["id"] = "lt-0another"  # an id: not a difference
    changed["addons"] = changed["addons"][1:]
    assert compare_providers(section, changed) == [
        "provider add-on aws-ebs-csi-driver: only in the cluster",
        "provider subnet subnet-0c0a10000000000a1 free: 3 ≠ 40",
    ]
    # A snapshot from before the section, or of a cluster with no provider: no EKS side at all.
    old = {k: v for k, v in eks_snapshot.items() if k != "provider"}
    assert "aws" not in scenario_from_snapshot(old)
    assert compare_providers({}, {}) == []
    assert "provider eks runbook-prod: only in the cluster" in compare_snapshots(eks_snapshot, old)


def test_a_provider_that_cannot_be_read_leaves_a_gap_and_the_snapshot(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory("small", speed=0.0, seed=1)
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    snap = _snapshot(_config(sim, sim_kubeconfig(sim), endpoint=f"http://127.0.0.1:{port}"))
    assert snap["counts"]["nodes"] > 0  # the cluster's side is all there
    assert snap["provider"]["captured"] is False
    assert snap["provider"]["reason"].startswith("the provider's side could not be read: ")
    assert [g["resource"] for g in snap["gaps"]] == ["provider"]
    assert "aws" not in scenario_from_snapshot(snap)


#: More than 2,500 nodes: the sim's addresses reach 10.0.10.x, whose names sort before 10.0.2.x.
WIDE = """\
name: wide
description: 2,600 nodes in three groups, a few pods.
cluster: {version: "1.29.4", platform: eks, lease_renew_seconds: 0, warmup: 0s}
generate: {node_groups: 3, nodes: 2600, pods: 30, namespaces: 1, deployments: 3, daemonsets: [], pod_bytes: 0}
"""


def test_the_twin_of_a_cluster_past_2500_nodes_keeps_each_node_in_its_group(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path], tmp_path: Path
) -> None:
    # `large`'s twin had 9,000 node differences: its groups were made in the order of the nodes'
    # names, so each took another group's addresses (and zones).
    source = tmp_path / "wide.yaml"
    source.write_text(WIDE, encoding="utf-8")
    sim = sim_factory(source, speed=0.0, seed=1)
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=sim_kubeconfig(sim), context="sim"))
    try:
        snap = take_snapshot(cluster, label="pre", taken_by="U1", now=datetime.now(UTC))
    finally:
        cluster.close()
    scenario = scenario_from_snapshot(snap)
    path = tmp_path / "twin.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    twin = sim_factory(path, speed=0.0, seed=1)
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=sim_kubeconfig(twin), context="sim"))
    try:
        twin_snap = take_snapshot(cluster, label="twin", taken_by="U1", now=datetime.now(UTC))
    finally:
        cluster.close()
    assert len(snap["nodes"]) == 2600
    nodes = [line for line in compare_snapshots(snap, twin_snap) if line.startswith("node ")]
    assert nodes == []
