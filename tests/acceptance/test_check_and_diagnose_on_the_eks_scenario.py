"""Issue 14's acceptance on the sim's `eks-nodegroups` scenario.

`check` reports exactly what the scenario plants and nothing else: the removed APIs (last-applied,
managedFields only, a Helm release, the apiserver metric), the budget at zero with a
matchExpressions selector, the fail-closed webhook without endpoints, the node group that falls
out of skew after the control-plane step, the safe-to-evict Knative pods, the old sidecars, the
Vault-injected worker that never gets ready, and what the scenario's workloads are (single
replicas, emptyDir scratch volumes, no readiness probes behind Services). Each known-issue rule
the sim can play is played and diagnosed with its remediation, once per workload and episode.
Through the terminal front door (a subprocess, JSON and exit codes) and the router (`/upgrade
check`, `/upgrade diagnose`) with the real kube adapter.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks import service as checks
from bot.core.rules import Episodes, read_rules
from bot.frontdoor.assemble import assemble
from bot.records import ClusterConfig
from bot.resources import BUILTIN_RULES
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.bot_process import bot_command

RULES = read_rules(BUILTIN_RULES)

#: (id, first object) of every finding on the scenario before its upgrade.
EXPECTED_CHECK = {
    # removed and deprecated APIs (apis' plants)
    ("API001", "HorizontalPodAutoscaler payments/payments-api (managedFields: argocd-controller Apply)"),
    ("API001", "requests to cronjobs.v1beta1.batch (apiserver metric)"),
    ("API001", "requests to poddisruptionbudgets.v1beta1.policy (apiserver metric)"),
    ("API002", "HorizontalPodAutoscaler checkout/checkout (last-applied-configuration)"),
    # pre-flight plants
    ("HOOK001", "ValidatingWebhookConfiguration gatekeeper-validating-webhook-configuration"),
    ("PDB001", "PodDisruptionBudget billing/ledger"),
    (
        "SKEW004",
        "Node ip-10-0-0-19.ap-northeast-1.compute.internal (kubelet v1.22.17-eks-0744ccd, group others)",
    ),
    ("DRAIN001", "Deployment knative-serving/activator (2 pods)"),
    ("ISTIO001", "Deployment checkout/checkout (istio-proxy 1.16.1)"),
    ("POD001", "Deployment billing/ledger"),
    # what the scenario's workloads are
    ("DRAIN002", "Deployment checkout/checkout (2 pods)"),
    ("RES001", "Deployment billing/ledger"),
    ("RES002", "Deployment knative-serving/activator"),
    ("RES003", "Deployment cert-manager/cert-manager-webhook"),
    # known issues the scenario plays before the upgrade
    ("KI002", "Deployment checkout/checkout"),
    ("KI002", "Deployment payments/payments-api"),
    ("KI002", "Deployment payments/payments-worker"),
    ("KI002", "Deployment reporting/reporting-api"),
    ("KI004", "Deployment payments/payments-worker"),
    ("KI010", "Deployment knative-serving/activator"),
    ("KI010", "Deployment knative-serving/autoscaler"),
    ("KI010", "Deployment knative-serving/controller"),
    ("KI010", "Deployment knative-serving/webhook"),
}
REQUIRED = {"API001", "HOOK001", "PDB001", "SKEW004"}


def key(finding: dict[str, Any]) -> tuple[str, str]:
    return finding["id"], finding["objects"][0].split(": Pod ")[0]


@pytest.fixture
def eks(
    sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path], write_config: Callable[..., Path]
) -> Path:
    kubeconfig = sim_kubeconfig(sim_eks)
    return write_config(f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n")


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_check_reports_exactly_the_planted_problems_and_fails_on_the_required_ones(eks: Path) -> None:
    result = cli(eks, "check", "--to", "1.25", "--format", "json")
    assert result.returncode == 3, result.stderr  # 3: done, and found Required problems
    report = json.loads(result.stdout)
    keys = [key(f) for f in report["findings"]]
    assert len(keys) == len(set(keys))
    assert set(keys) == EXPECTED_CHECK
    assert report["failed"] is True
    # Required first, and exactly the planted blockers.
    severities = [f["severity"] for f in report["findings"]]
    assert severities == sorted(severities, key=lambda s: s != "Required")
    assert {f["id"] for f in report["findings"] if f["severity"] == "Required"} == REQUIRED
    by_key = {key(f): f for f in report["findings"]}
    skew = by_key[("SKEW004", next(k[1] for k in EXPECTED_CHECK if k[0] == "SKEW004"))]
    assert len(skew["objects"]) == 2
    assert "before the control-plane step" in skew["remedy"]
    pdb = by_key[("PDB001", "PodDisruptionBudget billing/ledger")]
    assert "app In (ledger,ledger-canary), tier Exists" in pdb["why"]
    assert "Deployment billing/ledger" in pdb["objects"]


def test_check_in_text_and_markdown_and_its_usage_errors(eks: Path) -> None:
    text = cli(eks, "check")
    assert text.returncode == 3
    assert text.stdout.startswith("Pre-flight check of sim for 1.25: FAILED — 6 required, 17 recommended")
    assert "[Required] PDB001 PodDisruptionBudget billing/ledger allows no disruption" in text.stdout
    md = cli(eks, "check", "--format", "md")
    assert md.stdout.startswith("# Pre-flight check of sim for 1.25: FAILED")
    assert "## Required · HOOK001 · Webhook validation.gatekeeper.sh" in md.stdout
    bad = cli(eks, "check", "--to", "next")
    assert bad.returncode == 2
    assert "--to 'next' is not a Kubernetes version" in bad.stderr
    unknown = cli(eks, "check", "--cluster", "prod")
    assert unknown.returncode == 2
    assert "no cluster named `prod`" in unknown.stderr
    assert "Traceback" not in bad.stderr + unknown.stderr + text.stderr


def test_upgrade_check_in_chat_lists_required_first_and_attaches_the_full_report(eks: Path) -> None:
    services = assemble(load_settings(eks, {}), with_slack=False)
    try:
        outcome = services.router.handle(
            CommandRequest(text="check --to 1.25", user_id="U0PRIMARY", source="terminal")
        )
    finally:
        services.close()
    assert outcome.ok
    text = outcome.rendered.text
    assert text.startswith(
        ":no_entry: Pre-flight check of *sim* for *1.25*: *FAILED* — 6 required, 17 recommended"
    )
    assert text.index("*Required*") < text.index("*Recommended*")
    assert "• `PDB001` PodDisruptionBudget billing/ledger allows no disruption — " in text
    # One line per finding id, naming the workloads it concerns (the report lists their pods).
    assert text.count("`KI002`") == 1
    assert "(3 objects)" not in text
    assert "…and 1 more in the report" in text
    (attached,) = outcome.reply.files
    assert attached.filename == "check-sim-1.25.md"
    body = attached.content.decode()
    assert "**Fix:** Upgrade these nodes to at least 1.23" in body
    assert body.count("\n## Required · ") == 6
    assert body.count("\n## Recommended · ") == len(EXPECTED_CHECK) - 6


def plant_known_issues(sim: SimCluster, kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    """Play every shipped known issue the sim can play, beyond those the scenario already has."""
    control = sim.control
    # KI012: the new node image's open-files limit, as the scenario's ng-shared step plays it.
    control.inject_fault(
        {
            "type": "logs",
            "match": {"namespace": "checkout", "container": "istio-proxy"},
            "logs": [
                {
                    "lines": ["{time}\twarning\tenvoy main\tlistener accept failure: Too many open files"],
                    "every": "15s",
                }
            ],
        }
    )
    # KI003: an istio operator that applies v2beta1 HPAs, with an hpaSpec in the v2 form.
    control.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "istio-operator", "namespace": "istio-system"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"name": "istio-operator"}},
                "template": {
                    "metadata": {"labels": {"name": "istio-operator"}},
                    "spec": {
                        "containers": [{"name": "istio-operator", "image": "docker.io/istio/operator:1.17.2"}]
                    },
                },
            },
        }
    )
    control.inject_fault(
        {
            "type": "logs",
            "match": {"container": "istio-operator"},
            "logs": [
                {
                    "lines": [
                        "{time}\terror\tinstaller\tfailed to update resource with server-side apply for obj "
                        "HorizontalPodAutoscaler/istio-system/istiod: failed to create typed patch object "
                        "(istio-system/istiod; autoscaling/v2beta1, Kind=HorizontalPodAutoscaler): "
                        ".spec.metrics[0].resource.target: field not declared in schema"
                    ],
                    "every": "30s",
                }
            ],
        }
    )
    # KI005: a kube-proxy tag that does not exist; the next node's kube-proxy cannot pull it.
    control.inject_fault(
        {
            "type": "image_pull_error",
            "match": {"namespace": "kube-system", "labels": {"k8s-app": "kube-proxy"}},
        }
    )
    control.add_node("ng-shared")
    # KI007: the attach/detach controller's Multi-Attach event for es-1's volume.
    control.inject_fault(
        {
            "type": "event",
            "object": {"kind": "Pod", "namespace": "logging", "name": "es-1"},
            "event_type": "Warning",
            "reason": "FailedAttachVolume",
            "component": "attachdetach-controller",
            "message": 'Multi-Attach error for volume "pvc-es-1" Volume is already exclusively attached to one node'
            " and can't be attached to another",
        }
    )
    # KI009: a controller that tolerates every taint.
    control.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tigera-operator"}},
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "tigera-operator", "namespace": "tigera-operator"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"name": "tigera-operator"}},
                    "template": {
                        "metadata": {"labels": {"name": "tigera-operator"}},
                        "spec": {
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [
                                {"name": "tigera-operator", "image": "quay.io/tigera/operator:v1.29.3"}
                            ],
                        },
                    },
                },
            },
        ]
    )
    # KI011: a KServe predictor whose pod takes its 300 s grace period to go.
    control.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "models"}},
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "sklearn-iris-predictor", "namespace": "models"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "sklearn-iris"}},
                    "template": {
                        "metadata": {
                            "labels": {
                                "app": "sklearn-iris",
                                "serving.kserve.io/inferenceservice": "sklearn-iris",
                            }
                        },
                        "spec": {
                            "terminationGracePeriodSeconds": 300,
                            "containers": [
                                {"name": "kserve-container", "image": "kserve/sklearnserver:v0.10.1"}
                            ],
                        },
                    },
                },
            },
        ]
    )
    control.inject_fault({"type": "stuck_terminating", "match": {"namespace": "models"}})
    control.advance("1m")
    deleted = kubectl(sim, "-n", "models", "delete", "pods", "-l", "app=sklearn-iris", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    # KI008: a logging node's kubelet stops; after the 300 s toleration es's pod is left Terminating.
    es_node = kubectl(sim, "-n", "logging", "get", "pod", "es-0", "-o", "jsonpath={.spec.nodeName}").stdout
    control.inject_fault({"type": "node_not_ready", "node": es_node})
    control.advance("7m")


EXPECTED_DIAGNOSE = {
    ("KI012", "Deployment checkout/checkout"),
    ("KI002", "Deployment checkout/checkout"),
    ("KI002", "Deployment payments/payments-api"),
    ("KI002", "Deployment payments/payments-worker"),
    ("KI002", "Deployment reporting/reporting-api"),
    ("KI003", "Deployment istio-system/istio-operator"),
    ("KI004", "Deployment payments/payments-worker"),
    ("KI005", "DaemonSet kube-system/kube-proxy"),
    ("KI007", "StatefulSet logging/es"),
    ("KI008", "StatefulSet logging/es"),
    ("KI009", "Deployment tigera-operator/tigera-operator"),
    ("KI010", "Deployment knative-serving/activator"),
    ("KI010", "Deployment knative-serving/autoscaler"),
    ("KI010", "Deployment knative-serving/controller"),
    ("KI010", "Deployment knative-serving/webhook"),
    ("KI011", "Deployment models/sklearn-iris-predictor"),
}


def test_each_known_issue_the_sim_plays_is_diagnosed_once_per_workload_and_episode(
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    write_config: Callable[..., Path],
) -> None:
    plant_known_issues(sim_eks, kubectl)
    kubeconfig = sim_kubeconfig(sim_eks)
    reader = Cluster.connect(ClusterConfig(name="sim", kubeconfig=kubeconfig, context="sim"))
    try:
        hits = checks.diagnose(reader, rules=RULES).hits
        again = checks.diagnose(reader, rules=RULES).hits
    finally:
        reader.close()
    assert [h.key for h in hits] == sorted(EXPECTED_DIAGNOSE)
    assert [(h.key, h.pods) for h in again] == [(h.key, h.pods) for h in hits]
    # The stream's view: the second evaluation opens no new episode.
    episodes = Episodes()
    now = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
    assert len(episodes.new(hits, now)) == len(EXPECTED_DIAGNOSE)
    assert episodes.new(again, now + timedelta(minutes=1)) == []
    by_key = {h.key: h for h in hits}
    assert "Too many open files" in by_key[("KI012", "Deployment checkout/checkout")].evidence
    assert (
        by_key[("KI005", "DaemonSet kube-system/kube-proxy")].evidence
        == "kube-proxy waiting: ImagePullBackOff"
    )
    assert by_key[("KI008", "StatefulSet logging/es")].pods == ("es-0",)

    # In chat, for one namespace: the rule, what was seen, and the remedy as commands.
    config = write_config(f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n")
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(
            CommandRequest(text="diagnose logging", user_id="U0PRIMARY", source="terminal")
        )
        one = services.router.handle(
            CommandRequest(text="diagnose payments/nope", user_id="U0PRIMARY", source="terminal")
        )
        bad = services.router.handle(
            CommandRequest(text="diagnose Bad/Name", user_id="U0PRIMARY", source="terminal")
        )
        everywhere = services.router.handle(
            CommandRequest(text="diagnose", user_id="U0PRIMARY", source="terminal")
        )
    finally:
        services.close()
    # Every known issue once, each with its workload once: no line of the answer is repeated
    # (issue 40 item 11, "duplicated diagnose output").
    every = everywhere.rendered.text
    assert every.startswith(f":mag: {len(EXPECTED_DIAGNOSE)} known issues in *every namespace* on *sim*")
    # No line outside the commands and what was seen is repeated (the commands name each
    # workload's own pods; two workloads may log the very same line).
    lines, in_code = [], False
    for line in every.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif line.strip() and not in_code and not line.startswith(">"):
            lines.append(line)
    assert len(set(lines)) == len(lines), every
    # KI002 matched four workloads: its explanation once, its four workloads under it.
    assert (
        "*`KI002` istio-proxy cannot create the workload-spiffe-uds socket (read-only file system)* — 4 workloads"
        in every
    )
    assert "• Deployment payments/payments-api (2 pods)" in every
    assert f"…and {len(EXPECTED_DIAGNOSE) - 10} more not shown: narrow it to a namespace." in every
    text = outcome.rendered.text
    assert text.startswith(":mag: 2 known issues in *logging* on *sim*")
    assert "*`KI008` Pods stuck Terminating on a NotReady node* — StatefulSet logging/es (1 pod)" in text
    # The remedy names the node es-0 was on and the pod, ready to paste.
    assert re.search(r"\n  kubectl delete node ip-[a-z0-9.-]+\.compute\.internal\n", text), text
    assert "kubectl -n logging delete pod es-0 --grace-period=0 --force" in text
    assert "kubectl delete node NODE" not in text
    assert "https://github.com/kubernetes/kubernetes/issues/55713" in text
    # A pod that is not there is nothing diagnosed, not an all-clear.
    assert one.rendered.text.startswith(
        ":warning: No pod named *payments/nope* on *sim*: nothing to diagnose (`kubectl get pods -n payments` "
        "lists what there is)."
    )
    assert not bad.ok
    assert "is not NAMESPACE or NAMESPACE/POD" in bad.rendered.text


def test_rules_check_validates_a_file_with_file_and_line(tmp_path: Path) -> None:
    good = subprocess.run(
        [*bot_command(), "rules", "check", str(BUILTIN_RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0
    assert good.stdout.strip().endswith(
        "13 rules are valid: " + ", ".join([*(f"KI{n:03d}" for n in range(1, 13)), "CNI002"])
    )
    broken = tmp_path / "team-rules.yaml"
    broken.write_text("rules:\n  - id: TEAM001\n    title: x\n    match: {contaners: [a]}\n")
    bad = subprocess.run(
        [*bot_command(), "rules", "check", str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"{broken}:2: rules[0].explanation: required")
    # Every problem, each with its line, then how many: not only the first.
    lines = bad.stderr.strip().splitlines()
    assert f"{broken}:4: rules[0].match.contaners: unknown key (did you mean 'containers'?)" in lines
    assert lines[-1] == f"{broken}: {len(lines) - 1} problems"
    assert len(lines) - 1 >= 4
    assert "Traceback" not in bad.stderr


def test_check_over_manifests_needs_no_cluster_and_no_configuration(tmp_path: Path) -> None:
    manifest = tmp_path / "pdb.yaml"
    manifest.write_text(
        "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\n"
        "spec: {maxUnavailable: 1}\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*bot_command(), "check", "--manifests", str(manifest), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
        )

    failed = run("--to", "1.25", "--format", "json")
    assert failed.returncode == 3, failed.stderr
    (finding,) = json.loads(failed.stdout)["findings"]
    assert finding["id"] == "API001"
    assert finding["objects"] == [f"{manifest}:1 PodDisruptionBudget shop/web"]
    assert run("--to", "1.24").returncode == 0
    usage = run()
    assert usage.returncode == 2
    assert "needs --to VERSION" in usage.stderr
