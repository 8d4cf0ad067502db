"""Adopting the bot on a real cluster (issue 30), through the real CLI: snapshot the cluster,
write its twin (`sim scenario --from-snapshot`), draft a plan (`plan draft`), validate it, and
rehearse the draft on the twin."""

from __future__ import annotations

import difflib
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from bot.core.announcements.overrides import window_refusal
from bot.settings import parse_settings
from bot.sim import SimCluster
from bot.sim.world.scenario import builtin_dir, load_scenario
from tests.support.aws import aws_env, provider_yaml
from tests.support.bot_process import run_bot

RUNBOOK_ORDER = ["control-plane", "istio", "ng-shared", "others", "logging"]


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "UPGRADE_BOT_")) and k not in ("KUBECONFIG", "XDG_STATE_HOME")
    }
    env.update(HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"))
    return env


def cli(
    tmp_path: Path, *args: str, timeout: float = 180, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_bot(*args, cwd=tmp_path, env={**_env(tmp_path), **(env or {})}, timeout=timeout)


def _step_ids(plan_text: str) -> list[str]:
    return [str(s["id"]) for s in yaml.safe_load(plan_text)["steps"]]


def _succeeded_in_order(out: str, step_ids: list[str]) -> list[int]:
    return [out.index(f"`{step}` succeeded") for step in step_ids]


@pytest.mark.slow
def test_snapshot_twin_draft_validate_and_rehearse_the_eks_cluster(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    config = str(
        write_config(f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n")
    )
    snap = cli(tmp_path, "snapshot", "pre", "--config", config)
    assert snap.returncode == 0, snap.stderr

    twin = cli(tmp_path, "sim", "scenario", "--from-snapshot", "pre", "--cluster", "prod", "--config", config)
    assert twin.returncode == 0, twin.stderr
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(twin.stdout, encoding="utf-8")
    scenario = load_scenario(twin_path)  # the sim's own loader accepts it
    assert scenario.settled  # served as snapshotted: its workloads written Running, not started one by one
    assert [(g.name, g.count) for g in scenario.node_groups] == [
        ("control-plane", 2),
        ("istio", 2),
        ("ng-shared", 3),
        ("others", 2),
        ("logging", 2),
    ]
    assert {g.name: g.version for g in scenario.node_groups}["others"] == "1.22.17"
    assert scenario.version == "1.24.17"
    assert sorted(p.name for p in scenario.fargate) == ["coredns", "dns-autoscaler"]
    # (Besides manifests, the twin has the cluster's Helm releases on old APIs: `helm_release`.)
    kinds = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in scenario.objects
        if "kind" in o
    }
    assert [o["helm_release"]["name"] for o in scenario.objects if "helm_release" in o] == ["reporting"]
    assert ("DaemonSet", "kube-system", "kube-proxy") in kinds
    assert ("PodDisruptionBudget", "istio-system", "istio-ingressgateway") in kinds
    # The pod template as the cluster has it (its placement, the annotations the rules read); the
    # sidecars the pods had (injected by a webhook the twin lacks) come from an injector of its own.
    api = next(
        o
        for o in scenario.objects
        if o.get("kind") == "Deployment" and o["metadata"]["name"] == "payments-api"
    )
    template = api["spec"]["template"]
    assert [c["name"] for c in template["spec"]["containers"]] == ["payments-api"]
    assert template["spec"]["nodeSelector"] == {"role": "shared"}
    assert template["metadata"]["annotations"]["vault.hashicorp.com/agent-inject"] == "true"
    injector = next(i for i in scenario.injectors if "Deployment/payments/payments-api" in i.owners)
    injected = {c["name"]: c["image"] for c in injector.containers}
    assert injected["istio-proxy"] == "docker.io/istio/proxyv2:1.16.1"
    assert "vault-agent" in injected
    assert {g.name: g.labels for g in scenario.node_groups}["ng-shared"] == {"role": "shared"}

    draft_path = tmp_path / "draft.yaml"
    draft = cli(tmp_path, "plan", "draft", "--to", "1.25", "--out", str(draft_path), "--config", config)
    assert draft.returncode == 0, draft.stderr
    text = draft_path.read_text(encoding="utf-8")
    ids = _step_ids(text)
    drains = [i.removeprefix("drain-") for i in ids if i.startswith("drain-")]
    # `others` (1.22) is brought within the skew of a 1.25 control plane first (B13), then all five.
    assert drains == ["others-to-1-24", *RUNBOOK_ORDER]
    assert ids.index("wait-others-to-1-24") < ids.index("control-plane")
    assert ids[:3] == ["snapshot-pre", "checks", "announce-start"]
    assert ids.index("control-plane") < ids.index("restart-coredns") < ids.index("launch-control-plane")
    assert ids.index("wait-istio") < ids.index("restart-istio-data-plane") < ids.index("launch-ng-shared")
    assert ids[-4:] == ["watch-settle", "snapshot-post", "diff", "announce-done"]
    # Every step says why it is there, in a comment right above it.
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("  - id: "):
            assert lines[n - 1].startswith("  # "), (n, line)
    comments = " ".join(line.strip().removeprefix("# ") for line in lines if line.strip().startswith("#"))
    # The exact node label each group's steps act on, as the sim's nodes carry it.
    assert (
        "Node group istio (nodes labelled eks.amazonaws.com/nodegroup=istio; runs the mesh's ingress gateways)"
        in comments
    )
    assert "Cordon and drain the ng-shared nodes (labelled eks.amazonaws.com/nodegroup=ng-shared)" in comments
    assert (
        "Fargate nodes (labelled eks.amazonaws.com/compute-type=fargate) run deployment/kube-system/coredns, "
        "deployment/kube-system/dns-autoscaler" in comments
    )
    assert "Sidecars behind istiod 1.17.2 in: checkout (1.16.1), payments (1.16.1)" in comments
    assert "roster:\n  primary: [U0PRIMARY]\n  shadow: [U0SHADOW]\n  coordinator: [S0LEADS]\n" in text

    valid = cli(tmp_path, "plan", "validate", str(draft_path))
    assert valid.returncode == 0, valid.stderr
    assert f"{draft_path}: plan prod-1-25 is valid: prod 1.24.17 → 1.25, {len(ids)} steps" in valid.stdout

    # Three steps more than before (the lagging `others` launched, drained, waited first).
    rehearsal = cli(
        tmp_path, "rehearse", str(draft_path), "--scenario", str(twin_path), "--auto-approve", timeout=900
    )
    assert rehearsal.returncode in (0, 3), rehearsal.stderr[-3000:]
    out = rehearsal.stdout
    assert "rehearsal of prod-1-25: run " in out
    # "completed" only when nothing failed; else the ending names the failed steps skipped (exit 3).
    ended = re.search(r"completed( with \d+ failed steps? skipped)?$", out.rstrip())
    assert ended, out[-2000:]
    assert bool(ended.group(1)) == (rehearsal.returncode == 3)
    # The draft's own check fails only on what no step settles (the header's waivers: the webhook,
    # the budget); what its later steps settle (the API migration, the lagging group's skew) it lists.
    checks = next(
        line for line in out.splitlines() if "`checks` succeeded:" in line or "`checks` failed" in line
    )
    assert "pre-flight check for 1.25 FAILED: 2 Required — HOOK001 (" in checks, checks
    required, later = checks.split("Required the plan's later steps settle: ")
    assert "API001" not in required, checks
    assert "SKEW004" not in required, checks
    assert later.startswith("API001 ("), checks
    assert "SKEW004 (" in later, checks
    order = _succeeded_in_order(out, [f"drain-{g}" for g in RUNBOOK_ORDER])
    assert order == sorted(order)
    for group in RUNBOOK_ORDER:
        assert f"`wait-{group}` succeeded: wait-nodegroup job" in out
    assert 'deployment/kube-system/coredns: deployment "coredns" successfully rolled out' in out
    assert 'deployment/kube-system/dns-autoscaler: deployment "dns-autoscaler" successfully rolled out' in out
    assert "`restart-coredns` succeeded: restart job" in out
    # The twin keeps the cluster's own problem: payments-worker's vault-agent never gets ready, so the
    # data plane's restart fails on it with KI004, as it does on the cluster.
    assert "`restart-istio-data-plane` failed" in out
    assert (
        'deployment/payments/payments-worker (deployment "payments-worker" exceeded its progress deadline — KI004'
        in out
    )
    for namespace in ("checkout", "payments"):  # the namespaces whose sidecars lag
        assert re.search(rf"deployment/{namespace}/\S+: deployment \"\S+\" successfully rolled out", out), (
            namespace
        )


KARPENTER = """\
name: karpenter-shop
description: Karpenter node pools with names of their own.
cluster: {version: "1.28.9", platform: eks, warmup: 1m}
node_groups:
  - {name: general, count: 3, labels: {karpenter.sh/nodepool: general}}
  - {name: metrics, count: 1, labels: {karpenter.sh/nodepool: metrics},
     taints: [{key: dedicated, value: metrics, effect: NoSchedule}]}
  - {name: batch, count: 1, labels: {karpenter.sh/nodepool: batch}}
  - {name: system, count: 2, labels: {karpenter.sh/nodepool: system},
     taints: [{key: CriticalAddonsOnly, value: "true", effect: NoSchedule}]}
namespaces: [shop, monitoring, jobs]
objects:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: karpenter, namespace: kube-system}
    spec:
      replicas: 2
      selector: {matchLabels: {app: karpenter}}
      template:
        metadata: {labels: {app: karpenter}}
        spec:
          nodeSelector: {karpenter.sh/nodepool: system}
          tolerations: [{key: CriticalAddonsOnly, operator: Exists}]
          containers: [{name: controller, image: public.ecr.aws/karpenter/controller:0.37.0}]
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: prometheus, namespace: monitoring}
    spec:
      replicas: 1
      selector: {matchLabels: {app: prometheus}}
      template:
        metadata: {labels: {app: prometheus}}
        spec:
          nodeSelector: {karpenter.sh/nodepool: metrics}
          tolerations: [{key: dedicated, value: metrics, effect: NoSchedule}]
          containers: [{name: prometheus, image: quay.io/prometheus/prometheus:v2.51.0}]
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      replicas: 3
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          nodeSelector: {karpenter.sh/nodepool: general}
          containers: [{name: web, image: registry.example.com/shop/web:2.0.1}]
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: shop}
    spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: worker, namespace: jobs}
    spec:
      replicas: 1
      selector: {matchLabels: {app: worker}}
      template:
        metadata: {labels: {app: worker}}
        spec:
          nodeSelector: {karpenter.sh/nodepool: batch}
          containers: [{name: worker, image: registry.example.com/jobs/worker:1.4.2}]
"""


def test_karpenter_node_pools_draft_a_plan_that_rehearses_on_its_scenario(
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    scenario = tmp_path / "karpenter.yaml"
    scenario.write_text(KARPENTER, encoding="utf-8")
    sim = sim_factory(scenario, speed=0.0, seed=3)
    config = str(
        write_config(
            f"clusters:\n  shop: {{kubeconfig: {sim_kubeconfig(sim)}, context: sim}}\n"
            "snapshot:\n  node_group_labels: [karpenter.sh/nodepool]\n"
        )
    )
    draft_path = tmp_path / "draft.yaml"
    draft = cli(tmp_path, "plan", "draft", "--to", "1.29", "--out", str(draft_path), "--config", config)
    assert draft.returncode == 0, draft.stderr
    text = draft_path.read_text(encoding="utf-8")
    ids = _step_ids(text)
    # Control components first, then the rest (largest first, then by name), observability last.
    assert [i.removeprefix("drain-") for i in ids if i.startswith("drain-")] == [
        "system",
        "general",
        "batch",
        "metrics",
    ]
    assert "#   karpenter.sh/nodepool\n" in text
    assert "restart-coredns" not in ids  # no Fargate here
    assert "restart-istio-data-plane" not in ids  # no mesh here
    assert cli(tmp_path, "plan", "validate", str(draft_path)).returncode == 0

    rehearsal = cli(
        tmp_path, "rehearse", str(draft_path), "--scenario", str(scenario), "--auto-approve", timeout=600
    )
    assert rehearsal.returncode in (0, 3), rehearsal.stderr[-3000:]
    out = rehearsal.stdout
    ended = re.search(r"rehearsal of shop-1-29: run \S+ completed( with \d+ failed steps? skipped)?\s*$", out)
    assert ended, out[-2000:]
    assert bool(ended.group(1)) == (rehearsal.returncode == 3)
    order = _succeeded_in_order(out, [f"drain-{g}" for g in ("system", "general", "batch", "metrics")])
    assert order == sorted(order)
    assert "node group metrics: all" in out


def test_a_configured_order_wins_over_the_heuristic(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    config = str(
        write_config(
            f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\n"
            "snapshot:\n  node_group_order: [logging, istio]\n"
            "channels: {operations: C0OPS, announcements: C0ANNOUNCE}\n"
        )
    )
    draft = cli(tmp_path, "plan", "draft", "--to", "1.25.16", "--style", "eks-managed", "--config", config)
    assert draft.returncode == 0, draft.stderr
    ids = _step_ids(draft.stdout)
    assert [i.removeprefix("update-") for i in ids if i.startswith("update-")] == [
        "others-to-1-24",  # behind the skew of 1.25: first
        "logging",
        "istio",
        "control-plane",
        "ng-shared",
        "others",
    ]
    assert not [i for i in ids if i.startswith("drain-")]  # EKS drains a managed group itself
    assert "channels:\n  operations: C0OPS\n  announcements: C0ANNOUNCE\n" in draft.stdout
    (tmp_path / "d.yaml").write_text(draft.stdout, encoding="utf-8")
    assert cli(tmp_path, "plan", "validate", str(tmp_path / "d.yaml")).returncode == 0


def test_draft_and_scenario_usage_errors(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    config = str(write_config())
    bad = cli(tmp_path, "plan", "draft", "--to", "one.two", "--config", config)
    assert bad.returncode == 2
    assert "--to 'one.two' is not a Kubernetes version" in bad.stderr
    missing = cli(tmp_path, "plan", "draft", "--config", config)
    assert missing.returncode == 2
    assert "--to" in missing.stderr
    unknown = cli(tmp_path, "sim", "scenario", "--builtin", "nosuch")
    assert unknown.returncode == 2
    assert "no built-in scenario 'nosuch' (known: aks-nodepools, eks-nodegroups" in unknown.stderr
    neither = cli(tmp_path, "sim", "scenario")
    assert neither.returncode == 2
    assert "--from-snapshot" in neither.stderr


def test_draft_without_a_configuration_file_asks_for_one_and_the_help_names_draft(tmp_path: Path) -> None:
    # A kube context but no upgrade-bot.yaml: the draft's roster, channels and window come from
    # the configuration, so it says to write one (not "the configuration has no roster").
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    result = cli(tmp_path, "plan", "draft", "--to", "1.25", env={"KUBECONFIG": str(kubeconfig)})
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "upgrade-bot: plan draft needs the configuration file (upgrade-bot.yaml): `upgrade-bot init` "
        "writes one\n"
    )
    assert "upgrade plans: `plan validate FILE`, `plan draft --to V`" in cli(tmp_path, "--help").stdout


def test_builtin_scenarios_export_to_files_that_serve_the_same(tmp_path: Path) -> None:
    out = tmp_path / "eks.yaml"
    exported = cli(tmp_path, "sim", "scenario", "--builtin", "eks-nodegroups", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert out.read_text(encoding="utf-8") == (builtin_dir() / "eks-nodegroups.yaml").read_text(
        encoding="utf-8"
    )
    # Without the bot (the simulator's own command line), the built-ins too.
    alone = subprocess.run(
        [sys.executable, "-m", "bot.sim.cli", "scenario", "--builtin", "eks-nodegroups"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(tmp_path),
    )
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == out.read_text(encoding="utf-8")
    small = cli(tmp_path, "sim", "scenario", "--builtin", "small")
    assert small.returncode == 0
    assert yaml.safe_load(small.stdout)["name"] == "small"


def test_a_scenario_file_off_the_schema_is_named_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "twin.yaml"
    bad.write_text(
        'name: x\ncluster: {version: "1.28.1"}\nnode_groups:\n  - name: a\n  - name: b\n    colour: red\n',
        encoding="utf-8",
    )
    for args in (
        ["sim", "serve", "--scenario", str(bad)],
        ["rehearse", "eks-nodegroups", "--scenario", str(bad)],
    ):
        result = cli(tmp_path, *args)
        assert result.returncode == 2, result.stderr
        assert f"{bad}:6: node_groups.b: unknown key(s) colour; known: ami, capacity" in result.stderr
        assert "Traceback" not in result.stderr
    bad.write_text("name: x\ntiming: {node_join: 90s, join: 1s}\n", encoding="utf-8")
    result = cli(tmp_path, "sim", "serve", "--scenario", str(bad))
    assert result.returncode == 2
    assert f"{bad}:2: timing: unknown key(s) join; known: control_plane_upgrade" in result.stderr


#: The seed team's windows (Mon–Fri 14:00–17:00 Tokyo): three hours, shorter than a draft's five.
SEED_WINDOWS = "timezone: Asia/Tokyo\nwindows: [{days: mon-fri, start: '14:00', end: '17:00'}]\n"


def _assert_the_eks_managed_draft(text: str, config: Path) -> None:
    """The acceptance of issue 42's `plan draft --to 1.25 --style eks-managed` on the EKS cluster
    (or its twin) with the EKS provider."""
    doc = yaml.safe_load(text)
    ids = _step_ids(text)
    steps = {str(s["id"]): s for s in doc["steps"]}
    control = ids.index("control-plane")
    # EKS refuses the control plane's update while a managed group is behind it: `others` (1.22)
    # goes to 1.24 first; then all five groups in the runbook's order, through UpdateNodegroupVersion.
    assert ids.index("update-others-to-1-24") < ids.index("wait-others-to-1-24") < control
    assert steps["update-others-to-1-24"]["actions"] == [
        {"eks-update-nodegroup": {"nodegroup": "others", "version": "1.24", "timeout": "1h"}}
    ]
    updates = [i.removeprefix("update-") for i in ids if i.startswith("update-") and "-to-" not in i]
    assert updates == RUNBOOK_ORDER
    assert all(ids.index(f"update-{g}") > control for g in RUNBOOK_ORDER)
    assert steps["control-plane"]["actions"] == [{"eks-update-cluster": {"version": "1.25", "timeout": "1h"}}]
    assert ids[control + 1] == "wait-controlplane"
    # The four installed add-ons, each at the version EKS offers by default for 1.25.
    addons = {
        a["eks-update-addon"]["addon"]: a["eks-update-addon"]["version"]
        for s in doc["steps"]
        for a in s.get("actions") or []
        if "eks-update-addon" in a
    }
    assert addons == {
        "vpc-cni": "v1.15.1-eksbuild.1",
        "coredns": "v1.9.3-eksbuild.11",
        "kube-proxy": "v1.25.16-minimal-eksbuild.1",
        "aws-ebs-csi-driver": "v1.25.0-eksbuild.1",
    }
    assert not [s for s in doc["steps"] if "rehearsal" in s]  # no person stands in for an EKS call
    # The check's findings: the APIs 1.25 removes become a person's step naming the objects; the
    # findings only a waiver settles are in the header.
    assert ids.index("migrate-apis") < control
    assert "CronJob reporting/nightly-report" in steps["migrate-apis"]["description"]
    header = text.split("\nname:", 1)[0]
    assert "#   PDB001 (check for 1.25): PodDisruptionBudget billing/ledger allows no disruption" in header
    assert "#   EKS001 (check for 1.25): Control-plane subnets with fewer than 5 free IP addresses" in header
    # B11: a window inside the configured windows, which `schedule` accepts.
    assert "The first slot of 3h from tomorrow in the configured windows (Mon–Fri 14:00–17:00" in text
    settings = parse_settings(config.read_text(encoding="utf-8"), source=config, env={})
    zone = ZoneInfo(doc["window"]["timezone"])
    start, end = (datetime.fromisoformat(doc["window"][k]).replace(tzinfo=zone) for k in ("start", "end"))
    assert window_refusal(settings.windows, start, end, doc["window"]["timezone"]) is None


@pytest.mark.slow
def test_the_eks_provider_drafts_a_plan_through_the_eks_api_that_schedules_and_rehearses(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    config = write_config(
        SEED_WINDOWS
        + f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim, provider: {provider_yaml(sim_eks)}}}\n"
    )
    draft_path = tmp_path / "draft.yaml"
    draft = cli(
        tmp_path,
        *("plan", "draft", "--to", "1.25", "--style", "eks-managed", "--out", str(draft_path)),
        *("--config", str(config)),
        env=aws_env(tmp_path),
    )
    assert draft.returncode == 0, draft.stderr
    _assert_the_eks_managed_draft(draft_path.read_text(encoding="utf-8"), config)

    valid = cli(tmp_path, "plan", "validate", str(draft_path))
    assert valid.returncode == 0, valid.stderr
    rehearsal = cli(
        tmp_path,
        *("rehearse", str(draft_path), "--scenario", "eks-nodegroups", "--auto-approve"),
        timeout=900,
    )
    assert rehearsal.returncode in (0, 3), rehearsal.stderr[-3000:]
    out = rehearsal.stdout
    ended = re.search(r"rehearsal of prod-1-25: run \S+ completed( with \d+ failed steps? skipped)?\s*$", out)
    assert ended, out[-2000:]
    # Each update through the EKS API, in the draft's order: the lagging group, the control plane,
    # the add-ons, then the groups in the runbook's order.
    accepted = re.findall(r"↳ (node group \S+|control plane|add-on \S+) \S+ → \S+: EKS accepted (\w+)", out)
    assert accepted[:6] == [
        ("node group others", "UpdateNodegroupVersion"),
        ("control plane", "UpdateClusterVersion"),
        ("add-on vpc-cni", "UpdateAddon"),
        ("add-on coredns", "UpdateAddon"),
        ("add-on kube-proxy", "UpdateAddon"),
        ("add-on aws-ebs-csi-driver", "UpdateAddon"),
    ]
    groups = [g.removeprefix("node group ") for g, _ in accepted[6:]]
    assert groups == RUNBOOK_ORDER
    assert "`wait-controlplane` succeeded: wait-controlplane job" in out


@pytest.mark.slow
def test_the_twin_of_the_eks_cluster_serves_its_eks_api_and_drafts_the_same_plan_that_rehearses_with_ki004(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    """Issue 42's acceptance on the twin: the snapshot keeps the EKS API (cluster, node groups,
    add-ons with the versions offered, subnets, insights), the twin serves it, and the draft on the
    twin is the draft on the cluster; it validates, and its rehearsal on the twin meets KI004."""
    aws = aws_env(tmp_path)
    config = write_config(
        SEED_WINDOWS
        + f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim, provider: {provider_yaml(sim_eks)}}}\n"
    )
    snap = cli(tmp_path, "snapshot", "pre", "--config", str(config), env=aws, timeout=900)
    assert snap.returncode == 0, snap.stderr
    assert "gap:" not in snap.stdout
    twin = cli(tmp_path, "sim", "scenario", "--from-snapshot", "pre", "--config", str(config), timeout=600)
    assert twin.returncode == 0, twin.stderr
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(twin.stdout, encoding="utf-8")
    scenario = load_scenario(twin_path)
    # The EKS side as the snapshot read it through the provider port (not a made-up one).
    assert scenario.aws is not None
    assert scenario.aws["cluster_name"] == "runbook-prod"
    assert {a["name"]: a["version"] for a in scenario.aws["addons"]} == {
        "vpc-cni": "v1.12.6-eksbuild.2",
        "coredns": "v1.8.7-eksbuild.3",
        "kube-proxy": "v1.24.17-minimal-eksbuild.4",
        "aws-ebs-csi-driver": "v1.19.0-eksbuild.2",
    }
    assert {s["id"]: s["free"] for s in scenario.aws["subnets"]}["subnet-0c0a10000000000a1"] == 3
    shared = scenario.aws["launch_templates"]["ng-shared"]
    assert (shared["versions"], shared["used"]) == (3, 2)
    assert [i["status"] for i in scenario.aws["insights"]] == ["ERROR", "WARNING", "PASSING"]

    draft_args = ("plan", "draft", "--to", "1.25", "--style", "eks-managed")
    original_path = tmp_path / "draft-cluster.yaml"
    original = cli(
        tmp_path, *draft_args, "--out", str(original_path), "--config", str(config), env=aws, timeout=900
    )
    assert original.returncode == 0, original.stderr

    served = sim_factory(twin_path, speed=0.0, seed=1)
    twin_config = write_config(
        SEED_WINDOWS
        + f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(served)}, context: sim, provider: {provider_yaml(served)}}}\n",
        name="twin-config.yaml",
    )
    draft_path = tmp_path / "draft-twin.yaml"
    draft = cli(
        tmp_path, *draft_args, "--out", str(draft_path), "--config", str(twin_config), env=aws, timeout=900
    )
    assert draft.returncode == 0, draft.stderr
    text = draft_path.read_text(encoding="utf-8")
    assert "the draft has no EKS actions" not in text

    # The same draft, line for line (less when each was read): the twin's EKS API answers what
    # the cluster's did.
    def read_at(lines: str) -> list[str]:
        return [re.sub(r" showed at \S+ UTC\.", " showed at T.", line) for line in lines.splitlines()]

    drafted = read_at(original_path.read_text(encoding="utf-8"))
    assert read_at(text) == drafted, "\n".join(difflib.unified_diff(drafted, read_at(text), lineterm=""))
    _assert_the_eks_managed_draft(text, twin_config)

    valid = cli(tmp_path, "plan", "validate", str(draft_path))
    assert valid.returncode == 0, valid.stderr
    rehearsal = cli(
        tmp_path, "rehearse", str(draft_path), "--scenario", str(twin_path), "--auto-approve", timeout=1500
    )
    assert rehearsal.returncode in (0, 3), rehearsal.stderr[-3000:]
    out = rehearsal.stdout
    (tmp_path / "rehearsal.out").write_text(out, encoding="utf-8")  # kept with the test's files
    ended = re.search(r"rehearsal of prod-1-25: run \S+ completed( with \d+ failed steps? skipped)?\s*$", out)
    assert ended, out[-3000:]
    # The EKS calls go to the twin's facade, built from the snapshot: each update accepted, the
    # node groups in the draft's order (a group whose update people chose to force is called
    # twice in a row: once is counted).
    accepted = re.findall(r"↳ (node group \S+|control plane|add-on \S+) \S+ → \S+: EKS accepted (\w+)", out)
    assert ("control plane", "UpdateClusterVersion") in accepted, out[-5000:]
    groups = [g.removeprefix("node group ") for g, _ in accepted if g.startswith("node group ")]
    assert [g for g, _ in itertools.groupby(groups)] == ["others", *RUNBOOK_ORDER], out[-5000:]
    assert "`wait-controlplane` succeeded: wait-controlplane job" in out
    # The twin keeps the cluster's own problem: payments-worker's vault-agent never gets ready.
    assert "KI004" in out, out[-4000:]


#: A small cluster on 1.29 whose Helm release still names flowcontrol.apiserver.k8s.io/v1beta3,
#: which Kubernetes 1.32 removes (deprecated, still served, in 1.29–1.31).
FLOWCONTROL = """\
name: flowcontrol-1-29
description: A 1.29 cluster with a Helm release on an API removed in 1.32.
cluster: {version: "1.29.4", platform: eks, warmup: 1m}
node_groups:
  - {name: system, count: 1, labels: {role: system}}
  - {name: workers, count: 2, labels: {role: workers}}
namespaces: [shop, platform]
objects:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers: [{name: web, image: registry.example.com/shop/web:2.0.1}]
  - helm_release:
      name: apf
      namespace: platform
      chart: apf-tuning
      chart_version: 0.3.0
      revision: 2
      manifest: |
        ---
        # Source: apf-tuning/templates/flowschema.yaml
        apiVersion: flowcontrol.apiserver.k8s.io/v1beta3
        kind: FlowSchema
        metadata:
          name: batch-clients
        spec:
          priorityLevelConfiguration: {name: workload-low}
          matchingPrecedence: 1000
"""


def test_a_chained_draft_hops_one_minor_at_a_time_and_its_1_32_check_catches_the_removed_api(
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    scenario = tmp_path / "flowcontrol.yaml"
    scenario.write_text(FLOWCONTROL, encoding="utf-8")
    sim = sim_factory(scenario, speed=0.0, seed=3)
    config = write_config(f"clusters:\n  shop: {{kubeconfig: {sim_kubeconfig(sim)}, context: sim}}\n")
    draft_path = tmp_path / "draft.yaml"
    draft = cli(tmp_path, "plan", "draft", "--to", "1.33", "--out", str(draft_path), "--config", str(config))
    assert draft.returncode == 0, draft.stderr
    for hop in ("1.30", "1.31", "1.32", "1.33"):
        assert f"checking for {hop} (read-only)" in draft.stderr
    text = draft_path.read_text(encoding="utf-8")
    ids = _step_ids(text)
    assert [i for i in ids if i.startswith("control-plane")] == [
        "control-plane-1-30",
        "control-plane-1-31",
        "control-plane-1-32",
        "control-plane-1-33",
    ]
    # The 1.32 hop's check found the API (the 1.30 and 1.31 checks see it deprecated, still served):
    # its migration comes right before that hop, and only there.
    assert [i for i in ids if i.startswith("migrate-apis")] == ["migrate-apis-1-32"]
    assert ids.index("control-plane-1-31") < ids.index("checks-1-32") < ids.index("migrate-apis-1-32")
    assert ids.index("migrate-apis-1-32") < ids.index("control-plane-1-32")
    migrate = next(s for s in yaml.safe_load(text)["steps"] if s["id"] == "migrate-apis-1-32")
    assert "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema" in migrate["description"]
    assert "Helm release platform/apf revision 2" in migrate["description"]
    # Workers hop only where the skew policy requires (1.29 kubelets are fine up to a 1.32 API server).
    waits = [i for i in ids if i.startswith("wait-")]
    assert sorted(waits[:2]) == ["wait-system-to-1-32", "wait-workers-to-1-32"]
    assert sorted(waits[2:]) == ["wait-system", "wait-workers"]
    assert ids.index("control-plane-1-32") < ids.index(waits[0])
    assert ids.index(waits[1]) < ids.index("control-plane-1-33") < ids.index(waits[2])
    # The 1.33 hop's check runs once the workers are on 1.32: it sees the cluster the hop will find.
    assert ids.index(waits[1]) < ids.index("checks-1-33") < ids.index("control-plane-1-33")
    valid = cli(tmp_path, "plan", "validate", str(draft_path))
    assert valid.returncode == 0, valid.stderr
    assert "shop 1.29.4 → 1.33" in valid.stdout


def test_the_chained_draft_rehearsed_on_the_twin_meets_the_removed_api_in_its_1_32_check(
    tmp_path: Path,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    scenario = tmp_path / "flowcontrol.yaml"
    scenario.write_text(FLOWCONTROL, encoding="utf-8")
    sim = sim_factory(scenario, speed=0.0, seed=3)
    config = str(write_config(f"clusters:\n  shop: {{kubeconfig: {sim_kubeconfig(sim)}, context: sim}}\n"))
    snap = cli(tmp_path, "snapshot", "pre", "--config", config)
    assert snap.returncode == 0, snap.stderr
    twin = cli(tmp_path, "sim", "scenario", "--from-snapshot", "pre", "--config", config)
    assert twin.returncode == 0, twin.stderr
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(twin.stdout, encoding="utf-8")
    # The twin keeps the Helm release (its document on the removed API), not only the workloads.
    releases = [o["helm_release"] for o in load_scenario(twin_path).objects if "helm_release" in o]
    assert [(r["namespace"], r["name"], r["revision"]) for r in releases] == [("platform", "apf", 2)]
    draft_path = tmp_path / "draft.yaml"
    draft = cli(tmp_path, "plan", "draft", "--to", "1.33", "--out", str(draft_path), "--config", config)
    assert draft.returncode == 0, draft.stderr

    rehearsal = cli(
        tmp_path, "rehearse", str(draft_path), "--scenario", str(twin_path), "--auto-approve", timeout=1500
    )
    out = rehearsal.stdout
    assert "rehearsal of shop-1-33: run " in out, rehearsal.stderr[-3000:]
    # The hops' checks on the twin find what they found on the cluster: nothing Required for 1.30
    # and 1.31 (the API is deprecated, still served), the Helm release's API removed in 1.32.
    for hop in ("1.30", "1.31"):
        assert f"`checks-{hop.replace('.', '-')}` succeeded: pre-flight check for {hop} passed" in out
    # The 1.32 check names the removal, which the draft's migration step after it settles: listed
    # on its line, not failing the check.
    assert "`checks-1-32` succeeded: pre-flight check for 1.32 passed: no Required findings" in out, out[
        -4000:
    ]
    assert "1 Required the plan's later steps settle: API001 (Helm release platform/apf revision 2)" in out
    assert "`checks-1-32` failed" not in out
    # The roster marked the migration done without moving anything (a rehearsal's people do no
    # work): the next hop's check, which no step after it settles, still finds the removal and fails.
    assert (
        "`checks-1-33` failed: pre-flight check for 1.33 FAILED: 1 Required — API001 (Helm release "
        "platform/apf revision 2)"
    ) in out
    # The rehearsal goes on past the failed check (skipped, as a person who read it would) and
    # upgrades the control plane hop by hop, four times.
    for n in (30, 31, 32, 33):
        assert f"sim: upgrade_control_plane version=1.{n}.0 → Successful" in out
        assert f"`control-plane-1-{n}` succeeded" in out
    assert out.rstrip().endswith(" completed with 1 failed step skipped"), out[-2000:]
    assert rehearsal.returncode == 3
