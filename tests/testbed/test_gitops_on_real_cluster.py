"""GitOps on the real control plane (issue 40 item 7, issue 39 item 3): the real Argo CD and Flux
CRDs (tests/data/crds, with their sources) served by a real kube-apiserver; no controller runs, so
the tests write status themselves — Flux through the status subresource, Argo CD with the object
(its CRD declares no status subresource). The same ownership gates and the same `app-health`
verdicts as on the sim (tests/core/jobs/test_ownership_gates.py, test_app_health.py), through the
bot's own ServiceAccount and deploy/rbac.yaml."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kube import Cluster
from bot.core.jobs import preview
from bot.core.jobs.apphealth import AppHealthJob
from bot.core.jobs.gitops import PAUSED, ArgoPauseJob, FluxSuspendJob
from bot.core.jobs.image import SetImageJob
from bot.core.jobs.registry import default_jobs
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig
from tests.support.backends import bot_role_kubeconfig
from tests.support.blockkit import text_of
from tests.support.gates import gate_blocks
from tests.support.jobs import JobDriver
from tests.support.testbed import RealCluster

pytestmark = pytest.mark.testbed

CRDS = Path(__file__).resolve().parents[1] / "data" / "crds"
NOW = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
NS = "gitops-shop"
IMAGE = "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/eks/kube-proxy:v1.29.0-minimal-eksbuild.1"


def _apply(real: RealCluster, docs: list[dict[str, Any]], *args: str) -> None:
    path = real.workdir / f"gitops-{len(docs)}-{docs[0]['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    out = real.kubectl("apply", "-f", str(path), *args, check=False)
    assert out.returncode == 0, out.stderr


def daemonset(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NS, "labels": {"k8s-app": name, **labels},
                     "annotations": annotations or {}},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {"metadata": {"labels": {"k8s-app": name}},
                         "spec": {"containers": [{"name": "kube-proxy", "image": IMAGE}]}},
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def gitops(real_cluster: RealCluster) -> RealCluster:
    """The CRDs (server-side: Argo CD's is larger than client-side apply's annotation limit),
    established; a namespace with a Kustomization, two Applications and owned DaemonSets."""
    for crd in sorted(CRDS.glob("*.yaml")):
        out = real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd), check=False)
        assert out.returncode == 0, out.stderr
    for name in ("applications.argoproj.io", "kustomizations.kustomize.toolkit.fluxcd.io",
                 "helmreleases.helm.toolkit.fluxcd.io"):  # fmt: skip
        real_cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    real_cluster.kubectl("create", "namespace", NS, check=False)
    _apply(
        real_cluster,
        [
            {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
             "metadata": {"name": "apps", "namespace": NS},
             "spec": {"interval": "10m", "path": "./apps", "prune": True,
                      "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}},
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "shop", "namespace": NS},
             "spec": {"project": "default",
                      "source": {"repoURL": "https://git.example.com/shop.git", "path": "deploy"},
                      "destination": {"server": "https://kubernetes.default.svc", "namespace": NS},
                      "syncPolicy": {"automated": {"prune": True, "selfHeal": True}}}},
            {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "legacy", "namespace": NS},
             "spec": {"project": "default",
                      "source": {"repoURL": "https://git.example.com/legacy.git", "path": "."},
                      "destination": {"server": "https://kubernetes.default.svc", "namespace": NS}}},
            daemonset("flux-proxy", {"kustomize.toolkit.fluxcd.io/name": "apps",
                                     "kustomize.toolkit.fluxcd.io/namespace": NS}),
            daemonset("argo-proxy", {"argocd.argoproj.io/instance": "shop"}),
            daemonset("helm-proxy", {"app.kubernetes.io/managed-by": "Helm"},
                      {"meta.helm.sh/release-name": "proxy", "meta.helm.sh/release-namespace": NS}),
        ],
    )  # fmt: skip
    # kube-proxy as the EKS add-on installs it: applied server-side by field manager `eks`.
    kube_proxy = daemonset("kube-proxy", {"eks.amazonaws.com/component": "kube-proxy"})
    kube_proxy["metadata"]["namespace"] = "kube-system"
    _apply(real_cluster, [kube_proxy], "--server-side", "--field-manager=eks")
    flux_ready(real_cluster, "True", "ReconciliationSucceeded", "Applied revision: main@sha1:5f0c2a1")
    argo_status(real_cluster, "shop", "Healthy", "")
    argo_status(real_cluster, "legacy", "Degraded", "Deployment legacy/batch: Progress deadline exceeded")
    return real_cluster


def flux_ready(real: RealCluster, status: str, reason: str, message: str) -> None:
    """As kustomize-controller writes it: through the status subresource, for the generation it
    reconciled (the object's current one)."""
    generation = int(real.kubectl("get", "kustomization", "apps", "-n", NS, "-o",
                                  "jsonpath={.metadata.generation}").stdout)  # fmt: skip
    body = {"status": {"observedGeneration": generation, "conditions": [
        {"type": "Ready", "status": status, "reason": reason, "message": message,
         "lastTransitionTime": "2026-11-29T14:00:00Z", "observedGeneration": generation}]}}  # fmt: skip
    out = real.kubectl("patch", "kustomization", "apps", "-n", NS, "--subresource=status", "--type=merge",
                       "-p", json.dumps(body), check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr


def argo_status(real: RealCluster, app: str, health: str, message: str) -> None:
    """As Argo CD's controller writes it: with the object (its CRD has no status subresource)."""
    body = {"status": {"health": {"status": health, **({"message": message} if message else {})},
                       "sync": {"status": "Synced", "revision": "9b1e4c7"}}}  # fmt: skip
    out = real.kubectl(
        "patch", "application", app, "-n", NS, "--type=merge", "-p", json.dumps(body), check=False
    )
    assert out.returncode == 0, out.stderr


@pytest.fixture
def bot(gitops: RealCluster, tmp_path: Path) -> Iterator[Cluster]:
    """The kube adapter with the bot's own token (deploy/rbac.yaml: both roles)."""
    kubeconfig = bot_role_kubeconfig(gitops, tmp_path / "kubeconfig")
    context = yaml.safe_load(kubeconfig.read_text())["contexts"][0]["name"]
    adapter = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context=context))
    yield adapter
    adapter.close()


def gate(cluster: Cluster, workload: str) -> tuple[dict[str, Any], str]:
    body = preview.read(
        cluster, [ActionCall(name="set-image", args={"workload": workload})], default_jobs(()), now=NOW
    )
    blocks, _ = gate_blocks(json.loads(json.dumps(body)))  # validated by slack_sdk's models
    return body["actions"][0], text_of(blocks)


def test_an_eks_managed_kube_proxy_is_refused_for_eks_update_addon(bot: Cluster) -> None:
    action, text = gate(bot, "daemonset/kube-system/kube-proxy")
    assert "is the EKS managed add-on kube-proxy" in action["error"]
    assert "eks-update-addon addon=kube-proxy" in text
    with pytest.raises(UserError, match="eks-update-addon"):
        SetImageJob().plan(bot, {"workload": "daemonset/kube-system/kube-proxy"}, now=NOW)


@pytest.mark.parametrize(
    ("name", "says", "path"),
    [
        ("flux-proxy", f"Flux Kustomization {NS}/apps will revert this change", f"flux-suspend object=kustomization/{NS}/apps"),
        ("argo-proxy", "Argo CD Application shop will revert this change (self-heal)", "argocd-pause application=argocd/shop"),
        ("helm-proxy", f"Helm release {NS}/proxy will overwrite this change", f"change the values of release {NS}/proxy"),
    ],
    ids=["flux", "argocd", "helm"],
)  # fmt: skip
def test_the_gate_names_the_owner_and_its_path(bot: Cluster, name: str, says: str, path: str) -> None:
    action, text = gate(bot, f"daemonset/{NS}/{name}")
    # The real control plane runs a Kubernetes newer than EKS's kube-proxy table: the fix itself
    # is refused, and the gate still says who owns the object.
    assert "has no entry for Kubernetes" in action["error"]
    [owner] = action["owners"]
    assert says in owner["consequence"]
    assert path in text


def test_the_owners_path_patches_the_real_objects_with_the_bots_role(
    bot: Cluster, gitops: RealCluster
) -> None:
    JobDriver(FluxSuspendJob(), bot, {"object": f"kustomization/{NS}/apps"}, now=lambda: NOW).tick()
    ks = json.loads(gitops.kubectl("get", "kustomization", "apps", "-n", NS, "-o", "json").stdout)
    assert ks["spec"]["suspend"] is True
    gitops.kubectl(
        "patch", "kustomization", "apps", "-n", NS, "--type=merge", "-p", '{"spec":{"suspend":false}}'
    )
    flux_ready(gitops, "True", "ReconciliationSucceeded", "Applied revision: main@sha1:5f0c2a1")
    pause = JobDriver(ArgoPauseJob(), bot, {"application": f"{NS}/shop"}, now=lambda: NOW)
    pause.tick()
    app = json.loads(gitops.kubectl("get", "application", "shop", "-n", NS, "-o", "json").stdout)
    assert "automated" not in app["spec"]["syncPolicy"]
    assert json.loads(app["metadata"]["annotations"][PAUSED]) == {"prune": True, "selfHeal": True}
    # Put it back for the other tests (the real control plane is shared by the session).
    gitops.kubectl("patch", "application", "shop", "-n", NS, "--type=merge", "-p",
                   json.dumps({"metadata": {"annotations": {PAUSED: None}},
                               "spec": {"syncPolicy": {"automated": {"prune": True, "selfHeal": True}}}}))  # fmt: skip


def test_app_health_on_the_real_control_plane(bot: Cluster, gitops: RealCluster) -> None:
    job = AppHealthJob()
    progress = job.plan(bot, {"namespaces": NS}, now=NOW)
    assert list(progress["baseline"]) == [f"Application {NS}/legacy"]
    ok = job.tick(bot, progress, now=NOW + timedelta(seconds=15))
    assert (ok.done, ok.ok) == (True, True)
    argo_status(gitops, "shop", "Degraded", "Deployment shop/web: Progress deadline exceeded")
    try:
        # The patch has returned: the API server serves the new status to the next read.
        failed = job.tick(bot, progress, now=NOW + timedelta(seconds=30))
        assert (failed.done, failed.ok) == (True, False)
        assert failed.detail == f"app-health: 1 app(s) unhealthy: Application {NS}/shop"
        assert "Deployment shop/web: Progress deadline exceeded" in failed.posts[-1].text
    finally:
        argo_status(gitops, "shop", "Healthy", "")
