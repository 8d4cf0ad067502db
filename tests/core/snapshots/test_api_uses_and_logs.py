"""What a snapshot keeps of old API uses and of the logs the rules read (`core/snapshots/apiuse`,
`core/checks/logprobe`), and how a twin replays it (`bot/sim/world/twin.py`): the removed-API
check and the log-reading rules find on the twin what they find on the cluster (issue 42)."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from bot.adapters.kube import Cluster
from bot.core.checks.logprobe import log_probe
from bot.core.kube.helm import HelmSecret
from bot.core.rules import load_rules
from bot.core.snapshots import logreads
from bot.core.snapshots.apiuse import _Applied, applied, calls, helm_release
from bot.core.snapshots.projection import take_snapshot
from bot.records import ClusterConfig
from bot.sim import SimCluster
from bot.sim.world.twin import scenario_from_snapshot

METRICS = """\
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="policy",removed_release="1.25",resource="poddisruptionbudgets",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs",subresource="",version="v1beta1"} 0
process_start_time_seconds 1.7e9
"""

MANIFEST = """\
---
# Source: apf/templates/flowschema.yaml
apiVersion: flowcontrol.apiserver.k8s.io/v1beta3
kind: FlowSchema
metadata:
  name: batch-clients
---
# Source: apf/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
"""


def _secret(manifest: str) -> HelmSecret:
    release = {
        "name": "apf",
        "namespace": "platform",
        "version": 2,
        "chart": {"metadata": {"name": "apf-tuning", "version": "0.3.0", "appVersion": "1.0"}},
        "manifest": manifest,
    }
    inner = base64.b64encode(gzip.compress(json.dumps(release).encode()))
    return msgspec.convert(
        {
            "type": "helm.sh/release.v1",
            "metadata": {
                "name": "sh.helm.release.v1.apf.v2",
                "namespace": "platform",
                "labels": {"name": "apf", "version": "2", "status": "deployed"},
            },
            "data": {"release": base64.b64encode(inner).decode()},
        },
        HelmSecret,
    )


def test_the_metric_keeps_the_old_apis_that_were_called_and_a_release_its_old_documents_only() -> None:
    assert calls(METRICS) == [
        {
            "group": "policy",
            "version": "v1beta1",
            "resource": "poddisruptionbudgets",
            "subresource": "",
            "removed_release": "1.25",
        }
    ]
    release = helm_release(_secret(MANIFEST))
    assert release is not None
    assert (release["namespace"], release["name"], release["revision"], release["chart"]) == (
        "platform",
        "apf",
        2,
        "apf-tuning",
    )
    # The FlowSchema on a beta version with its `# Source:` line; the apps/v1 Deployment is not kept.
    assert release["manifest"] == (
        "---\n# Source: apf/templates/flowschema.yaml\napiVersion: flowcontrol.apiserver.k8s.io/v1beta3\n"
        "kind: FlowSchema\nmetadata:\n  name: batch-clients\n"
    )
    assert helm_release(_secret("")) is None  # nothing on an old version: nothing kept


def test_an_object_is_kept_only_when_its_last_applied_or_a_field_manager_names_an_old_version() -> None:
    def item(annotations: dict[str, str], managers: list[dict[str, str]]) -> _Applied:
        meta = {"name": "r", "namespace": "ns", "annotations": annotations, "managedFields": managers}
        return msgspec.convert({"metadata": meta, "spec": {"maxUnavailable": 1}}, _Applied)

    old = json.dumps({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget"})
    new = json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"})
    last = "kubectl.kubernetes.io/last-applied-configuration"
    kept = applied(
        item({last: old}, [{"manager": "argocd", "operation": "Apply", "apiVersion": "policy/v1beta1"}]),
        "policy/v1",
        "PodDisruptionBudget",
    )
    assert kept == {
        "manifest": {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"maxUnavailable": 1},
        },
        "last_applied": {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget"},
        "managed_fields": [{"manager": "argocd", "operation": "Apply", "apiVersion": "policy/v1beta1"}],
    }
    current = [{"manager": "kubectl", "operation": "Update", "apiVersion": "policy/v1"}]
    assert applied(item({last: new}, current), "policy/v1", "PodDisruptionBudget") is None


def test_the_probe_keeps_the_lines_the_rules_match_of_the_containers_they_name() -> None:
    probe = log_probe(load_rules([Path("templates/rules/known-issues.yaml")]))
    assert probe is not None
    assert "istio-proxy" in probe.containers
    assert probe.wanted(["app", "istio-proxy"]) == {"istio-proxy": 200}
    assert probe.wanted(["app"]) == {}
    bad = (
        "2026-11-29T08:00:00.000Z\terror\tsds\tfailed to create UDS listener: listen unix "
        "./var/run/secrets/workload-spiffe-uds/socket: bind: read-only file system"
    )
    tail = f"2026-11-29T08:00:00.000Z\tinfo\tVersion 1.16.1\n{bad}\n2026-11-29T08:00:01.000Z\tinfo\tready\n"
    assert probe.keep("istio-proxy", tail) == [bad]
    assert probe.keep("istio-proxy", "all is well\n") == []


def test_the_twin_replays_the_calls_releases_applied_objects_and_log_lines() -> None:
    snap = {
        "version": {"gitVersion": "v1.29.4"},
        "nodes": [{"name": "n1", "group": "g", "kubelet": "v1.29.4"}],
        "workloads": [
            {
                "kind": "Deployment",
                "namespace": "shop",
                "name": "web",
                "desired": 1,
                "template": {"labels": {"app": "web"}, "containers": [{"name": "web", "image": "web:1"}]},
            },
        ],
        "pdbs": [{"namespace": "shop", "name": "web", "desired_healthy": 1}],
        "api_uses": {
            "calls": [{"group": "policy", "version": "v1beta1", "resource": "poddisruptionbudgets"}],
            "helm": [
                {
                    "namespace": "platform",
                    "name": "apf",
                    "revision": 2,
                    "chart": "apf-tuning",
                    "chart_version": "0.3.0",
                    "app_version": "1.0",
                    "manifest": "---\nkind: FlowSchema\n",
                }
            ],
            "applied": [
                {
                    "manifest": {
                        "apiVersion": "policy/v1",
                        "kind": "PodDisruptionBudget",
                        "metadata": {"name": "web", "namespace": "shop"},
                    },
                    "last_applied": {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget"},
                },
                {
                    "manifest": {
                        "apiVersion": "autoscaling/v2",
                        "kind": "HorizontalPodAutoscaler",
                        "metadata": {"name": "web", "namespace": "shop"},
                        "spec": {"maxReplicas": 3},
                    },
                    "managed_fields": [
                        {"manager": "argocd", "operation": "Apply", "apiVersion": "autoscaling/v2beta1"}
                    ],
                },
            ],
        },
        "logs": [
            {
                "namespace": "shop",
                "pod": "web-5d8f-x2x9q",
                "workload_kind": "Deployment",
                "workload": "web",
                "container": "istio-proxy",
                "lines": ["a bad line"],
            },
        ],
    }
    scenario = scenario_from_snapshot(snap)
    assert scenario["callers"] == [{"api": "policy/v1beta1", "resource": "poddisruptionbudgets"}]
    assert scenario["containers"] == [
        {
            "match": {"namespace": "shop", "name_prefix": "web-", "container": "istio-proxy"},
            "logs": [{"lines": ["a bad line"]}],
        }
    ]
    objects = scenario["objects"]
    assert {"helm_release": snap["api_uses"]["helm"][0]} in objects
    # The twin's own budget of that name carries the last-applied configuration…
    (pdb,) = [o for o in objects if o.get("kind") == "PodDisruptionBudget"]
    assert json.loads(pdb["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]) == {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
    }
    assert pdb["spec"]["minAvailable"] == 1
    # …and an object the twin does not make otherwise comes as the snapshot kept it.
    (hpa,) = [o for o in objects if o.get("kind") == "HorizontalPodAutoscaler"]
    assert hpa["spec"] == {"maxReplicas": 3}
    assert [m["apiVersion"] for m in hpa["metadata"]["managedFields"]] == ["autoscaling/v2beta1"]


def test_the_logs_read_several_at_a_time_are_kept_as_reading_them_in_turn_keeps(
    sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = log_probe(load_rules([Path("templates/rules/known-issues.yaml")]))
    assert probe is not None
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim_eks)))
    now = datetime.now(UTC)
    try:
        at_once = take_snapshot(cluster, label="x", taken_by="U1", now=now, logs=probe)
        monkeypatch.setattr(logreads, "READERS", 1)
        in_turn = take_snapshot(cluster, label="x", taken_by="U1", now=now, logs=probe)
    finally:
        cluster.close()
    # The scenario's proxies log KI002's read-only socket: the probe keeps those lines.
    assert any("read-only file system" in line for log in at_once["logs"] for line in log["lines"])
    assert at_once["logs"] == in_turn["logs"]
