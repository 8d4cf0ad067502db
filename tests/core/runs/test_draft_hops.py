"""`plan draft` from everything the bot knows: the EKS provider's node groups and add-ons, the
pre-flight check's findings, and upgrades across several minors (one control-plane hop at a time)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding
from bot.core.runs.draft import (
    DraftFacts,
    DraftInputs,
    ProviderFacts,
    draft_plan,
    hop_targets,
    kubelet_skew,
    summarise,
)
from bot.core.runs.plans import parse_plan
from bot.core.snapshots.projection import POD_FIELDS
from bot.errors import UserError

NOW = datetime(2026, 11, 26, tzinfo=UTC)


def _pod(ns: str, name: str, node: str, kind: str = "Deployment") -> list[Any]:
    row = dict.fromkeys(POD_FIELDS, "")
    row.update(namespace=ns, name=name, node=node, workload_kind=kind, workload=name)
    return [row[f] for f in POD_FIELDS]


def _snap(version: str, groups: dict[str, str]) -> dict[str, Any]:
    """A cluster on `version` with a node per group (name → kubelet), each running a pod."""
    nodes = [
        {"name": f"{g}-1", "group": g, "kubelet": kubelet, "group_label": "eks.amazonaws.com/nodegroup"}
        for g, kubelet in groups.items()
    ]
    pods = [_pod("kube-system" if g == "system" else "shop", f"app-{g}", f"{g}-1") for g in groups]
    return {
        "cluster": "prod",
        "taken_at": "2026-11-26T10:00:00+00:00",
        "version": {"gitVersion": f"v{version}-eks-1"},
        "nodes": nodes,
        "pods": pods,
        "pod_fields": list(POD_FIELDS),
        "workloads": [],
    }


def _inputs(target: str, style: str = "eks-managed") -> DraftInputs:
    return DraftInputs(
        cluster="prod",
        target=target,
        style=style,
        roster={"primary": ["U0PRIMARY"], "shadow": ["U0SHADOW"]},
        channels={},
        window=("2026-12-01T14:00", "2026-12-01T17:00", "Asia/Tokyo"),
        window_note="test window",
        group_labels=["eks.amazonaws.com/nodegroup"],
    )


def _finding(fid: str, title: str, *objects: str, severity: str = REQUIRED, action: str = "") -> Finding:
    return Finding(id=fid, severity=severity, title=title, objects=objects, why="", fix="", action=action)


EKS = ProviderFacts(
    kind="eks",
    name="runbook-prod",
    # `legacy` is in the snapshot but not among EKS's managed node groups: self-managed.
    managed={"system": "1.24", "apps": "1.24", "old": "1.22"},
    addons={"kube-proxy": "v1.24.17-minimal-eksbuild.4", "vpc-cni": "v1.12.6-eksbuild.2", "metrics": "v1"},
    offered={
        "1.24": {"kube-proxy": "v1.24.17-minimal-eksbuild.4", "vpc-cni": "v1.12.6-eksbuild.2"},
        "1.25": {"kube-proxy": "v1.25.16-minimal-eksbuild.1", "vpc-cni": "v1.15.1-eksbuild.1"},
    },
)


def _ids(text: str) -> list[str]:
    return [str(s["id"]) for s in yaml.safe_load(text)["steps"]]


def _step(text: str, step_id: str) -> dict[str, Any]:
    return next(s for s in yaml.safe_load(text)["steps"] if s["id"] == step_id)


def test_with_the_eks_provider_lagging_groups_first_then_the_eks_actions_in_order() -> None:
    snap = _snap(
        "1.24.17", {"system": "v1.24.17", "apps": "v1.24.17", "old": "v1.22.17", "legacy": "v1.24.17"}
    )
    findings = {
        "1.25": [
            _finding(
                "API001",
                "policy/v1beta1 PodDisruptionBudget: removed in 1.25",
                "PodDisruptionBudget shop/web",
            ),
            _finding("SKEW005", "kube-proxy out of the supported skew", "DaemonSet kube-system/kube-proxy"),
            _finding(
                "NODE002",
                "Nodes already cordoned",
                "Node apps-1",
                severity=RECOMMENDED,
                action="uncordon node=apps-1",
            ),
            _finding("EKS008", "Managed node groups behind the control plane (1.24)", "Node group old: 1.22"),
            _finding(
                "PDB001", "PodDisruptionBudget shop/db allows no disruption", "PodDisruptionBudget shop/db"
            ),
            _finding("POD001", "pods not Running", "Pod shop/x", severity=RECOMMENDED),
        ]
    }
    text = draft_plan(snap, _inputs("1.25"), DraftFacts(provider=EKS, findings=findings))
    plan = parse_plan(text, source="draft.yaml", now=NOW)
    ids = [s.id for s in plan.steps]
    control = ids.index("control-plane")
    # What a step settles comes before the control plane: the API migration (a person's step
    # naming the objects), kube-proxy (its EKS add-on, to the version offered for today's 1.24),
    # the cordoned node, and the 1.22 group that EKS would refuse the control plane's update over.
    for before in ("migrate-apis", "kube-proxy", "uncordon-nodes", "update-old-to-1-24", "wait-old-to-1-24"):
        assert ids.index(before) < control, before
    assert "PodDisruptionBudget shop/web" in _step(text, "migrate-apis")["description"]
    assert _step(text, "migrate-apis")["done"] == {"any_of": ["primary", "shadow"]}
    assert _step(text, "kube-proxy")["actions"] == [
        {"eks-update-addon": {"addon": "kube-proxy", "version": "v1.24.17-minimal-eksbuild.4"}}
    ]
    assert _step(text, "uncordon-nodes")["actions"] == [{"uncordon": {"node": "apps-1"}}]
    assert _step(text, "update-old-to-1-24")["actions"] == [
        {"eks-update-nodegroup": {"nodegroup": "old", "version": "1.24", "timeout": "1h"}}
    ]
    # The control plane through EKS's API, then /version, then each add-on at EKS's default for 1.25
    # (vpc-cni, then kube-proxy, in EKS's order; one EKS offers nothing for is left alone).
    assert _step(text, "control-plane")["actions"] == [
        {"eks-update-cluster": {"version": "1.25", "timeout": "1h"}}
    ]
    assert ids[control + 1 : control + 4] == ["wait-controlplane", "addon-vpc-cni", "addon-kube-proxy"]
    assert _step(text, "addon-vpc-cni")["actions"] == [
        {"eks-update-addon": {"addon": "vpc-cni", "version": "v1.15.1-eksbuild.1"}}
    ]
    assert "addon-metrics" not in ids
    # Managed groups through UpdateNodegroupVersion; the self-managed one launched, drained, waited.
    assert _step(text, "update-apps")["actions"] == [
        {"eks-update-nodegroup": {"nodegroup": "apps", "version": "1.25", "timeout": "1h"}}
    ]
    assert [i for i in ids if i.endswith("legacy")] == ["launch-legacy", "drain-legacy", "wait-legacy"]
    assert summarise(text).groups == ["system", "apps", "legacy", "old"]
    # Every step says why, and a Required finding no step settles is in the header for a waiver.
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("  - id: "):
            assert lines[n - 1].startswith("  # "), line
    header = text.split("\nname:", 1)[0]
    assert "#   PDB001 (check for 1.25): PodDisruptionBudget shop/db allows no disruption" in header
    assert "#   EKS008 (check for 1.25)" in header.split("settle:", 1)[1]
    assert "POD001" not in text
    assert "API001 (check" not in header
    # The check, first, lists what the steps after it settle without failing on it; PDB001, which
    # none settles, still fails it.
    assert ids.index("checks") < ids.index("migrate-apis")
    assert _step(text, "checks")["actions"] == [
        {"check": {"to": "1.25", "settled_later": "API001,SKEW005,EKS008"}}
    ]


def test_without_a_provider_a_lagging_group_catches_up_only_as_far_as_the_skew_policy_asks() -> None:
    # 1.24 → 1.25: a kubelet may lag a 1.25 API server by two minors; 1.22 is three behind.
    snap = _snap("1.24.17", {"system": "v1.24.17", "old": "v1.22.17", "fine": "v1.23.4"})
    text = draft_plan(snap, _inputs("1.25", "pipeline"))
    ids = _ids(text)
    assert ids.index("wait-old-to-1-24") < ids.index("control-plane")
    assert not [i for i in ids if i.startswith("launch-fine-to")]
    assert "wait-controlplane" not in ids  # no provider: a person upgrades and marks it done
    assert "the version skew policy lets a kubelet lag a 1.25 API server by 2 minors at most" in " ".join(
        line.strip() for line in text.splitlines()
    ).replace("  # ", " ").replace(" # ", " ")


def test_hops_one_minor_at_a_time_and_the_skew_policy() -> None:
    assert hop_targets("1.29.4", "1.33") == ["1.30", "1.31", "1.32", "1.33"]
    assert hop_targets("1.24.17", "1.25.16") == ["1.25"]
    assert [kubelet_skew(m) for m in (25, 27, 28, 33)] == [2, 2, 3, 3]
    with pytest.raises(UserError, match="not a newer minor"):
        hop_targets("1.29.4", "1.29.8")


def test_a_chained_draft_checks_each_hop_and_catches_an_api_removed_at_an_intermediate_minor() -> None:
    snap = _snap("1.29.4", {"system": "v1.29.4", "workers": "v1.29.4"})
    flow = _finding(
        "API001",
        "flowcontrol.apiserver.k8s.io/v1beta3 FlowSchema: removed in 1.32",
        "Helm release platform/apf revision 1: FlowSchema apf-batch",
    )
    # What each hop's check says: 1.32's and 1.33's both report the removal (it is removed at or
    # before each); the 1.32 hop is where it belongs. A later hop's skew findings are the chain's.
    findings = {
        "1.30": [],
        "1.31": [_finding("SKEW001", "the target is not one minor above the control plane")],
        "1.32": [flow],
        "1.33": [flow],
    }
    text = draft_plan(snap, _inputs("1.33", "pipeline"), DraftFacts(findings=findings))
    plan = parse_plan(text, source="draft.yaml", now=NOW)
    ids = [s.id for s in plan.steps]
    hops = [i for i in ids if i.startswith("control-plane-")]
    assert hops == ["control-plane-1-30", "control-plane-1-31", "control-plane-1-32", "control-plane-1-33"]
    # Before each hop its own check, for its own target.
    assert ids[:2] == ["snapshot-pre", "checks-1-30"]
    for hop in ("1-31", "1-32", "1-33"):
        assert ids.index(f"checks-{hop}") < ids.index(f"control-plane-{hop}")
        # The 1.32 check lists the API removal its migration step settles after it, not failing on it.
        later = {"settled_later": "API001"} if hop == "1-32" else {}
        assert plan.step(f"checks-{hop}").actions[0].args == {"to": hop.replace("-", "."), **later}
    # The API removed in 1.32 is moved after the 1.31 hop and before the 1.32 hop, once.
    assert [i for i in ids if i.startswith("migrate-apis")] == ["migrate-apis-1-32"]
    assert ids.index("control-plane-1-31") < ids.index("migrate-apis-1-32") < ids.index("control-plane-1-32")
    assert (
        "Helm release platform/apf revision 1: FlowSchema apf-batch"
        in _step(text, "migrate-apis-1-32")["description"]
    )
    assert "SKEW001" not in text
    # Workers hop only where the skew policy requires: 1.29 kubelets are fine up to a 1.32 API
    # server (three minors), so the groups go to 1.32 before the 1.33 hop, then to 1.33.
    catch_up = [i for i in ids if "-to-" in i]
    assert catch_up == [
        "launch-system-to-1-32",
        "drain-system-to-1-32",
        "wait-system-to-1-32",
        "launch-workers-to-1-32",
        "drain-workers-to-1-32",
        "wait-workers-to-1-32",
    ]
    assert (
        ids.index("control-plane-1-32") < ids.index("launch-system-to-1-32") < ids.index("control-plane-1-33")
    )
    assert ids.index("control-plane-1-33") < ids.index("launch-system")
    assert summarise(text).groups == ["system", "workers"]


def test_a_chained_eks_draft_brings_managed_groups_along_each_hop_and_updates_add_ons_per_hop() -> None:
    snap = _snap("1.29.4", {"system": "v1.29.4"})
    eks = dataclasses.replace(
        EKS,
        managed={"system": "1.29"},
        addons={"kube-proxy": "v1.29.0"},
        offered={"1.30": {"kube-proxy": "v1.30.0"}, "1.31": {"kube-proxy": "v1.31.0"}},
    )
    text = draft_plan(snap, _inputs("1.31"), DraftFacts(provider=eks))
    ids = _ids(text)
    # EKS updates the control plane only with its managed groups on its version: before 1.31,
    # `system` goes to 1.30.
    assert (
        ids.index("control-plane-1-30") < ids.index("update-system-to-1-30") < ids.index("control-plane-1-31")
    )
    assert ids.index("wait-controlplane-1-30") < ids.index("addon-kube-proxy-1-30") < ids.index("checks-1-31")
    assert _step(text, "addon-kube-proxy-1-31")["actions"] == [
        {"eks-update-addon": {"addon": "kube-proxy", "version": "v1.31.0"}}
    ]
    parse_plan(text, source="draft.yaml", now=NOW)
