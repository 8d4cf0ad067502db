"""Fixes that know who owns the object (issue 40 item 7), on the `gitops` sim through the kube
adapter: the set-image fix's gate names a Flux, Argo CD or Helm owner and what will happen to the
change, with the owner's path; an EKS managed add-on is refused with `eks-update-addon`; the
owner's path itself (`flux-suspend`/`flux-resume`, `argocd-pause`/`argocd-resume`) changes the
object once, keeps its manifest with the run first, and survives a crash between write and store."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.jobs import preview
from bot.core.jobs.gitops import (
    PAUSED,
    ArgoPauseJob,
    ArgoResumeJob,
    FluxResumeJob,
    FluxSuspendJob,
    backup_files,
)
from bot.core.jobs.image import SetImageJob
from bot.core.jobs.registry import default_jobs
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig
from bot.sim import SimCluster
from tests.support.blockkit import text_of
from tests.support.gates import gate_blocks
from tests.support.jobs import JobDriver

NOW = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
KUBE_PROXY = "daemonset/kube-system/kube-proxy"
FLUX = {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def cluster(sim: SimCluster, tmp_path: Path) -> Iterator[Cluster]:
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    adapter = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    yield adapter
    adapter.close()


@pytest.fixture
def api(sim: SimCluster, tmp_path: Path) -> client.ApiClient:
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig-client")
    return config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)


def self_managed_kube_proxy(
    api: client.ApiClient, labels: dict[str, Any], annotations: dict[str, Any]
) -> None:
    """kube-proxy as a team that manages it themselves has it: EKS's field manager gone (an empty
    managedFields list clears them), the owner's marks on."""
    client.AppsV1Api(api).patch_namespaced_daemon_set(
        "kube-proxy",
        "kube-system",
        {"metadata": {"managedFields": [{}], "labels": labels, "annotations": annotations}},
    )


def gate_of(cluster: Cluster) -> tuple[dict[str, Any], str]:
    body = preview.read(
        cluster, [ActionCall(name="set-image", args={"workload": KUBE_PROXY})], default_jobs(()), now=NOW
    )
    blocks, text = gate_blocks(json.loads(json.dumps(body)))  # validated by slack_sdk's models
    action: dict[str, Any] = body["actions"][0]
    for owner in action.get("owners") or []:
        # The text message (notifications, the terminal) says the same as the blocks.
        assert owner["path"] in text
    return action, text_of(blocks)


def test_an_eks_managed_kube_proxy_is_refused_with_eks_update_addon_on_the_gate_and_at_the_start(
    cluster: Cluster,
) -> None:
    action, text = gate_of(cluster)
    assert action["error"].startswith(
        "daemonset/kube-system/kube-proxy is the EKS managed add-on kube-proxy: "
    )
    # The command names the cluster the job reads (the adapter's configured name): with several
    # clusters configured, one pasted without `--cluster` only asks which.
    said = 'Use `/upgrade action eks-update-addon addon=kube-proxy version=… --cluster prod --reason "…"` instead of'
    assert f"{said} `set-image`" in text
    with pytest.raises(UserError) as refused:
        SetImageJob().plan(cluster, {"workload": KUBE_PROXY}, now=NOW)
    assert said in refused.value.user_message


@pytest.mark.parametrize(
    ("labels", "annotations", "says", "path"),
    [
        (FLUX, {}, "Flux Kustomization flux-system/apps will revert this change at its next reconcile",
         "The owner's way: `/upgrade action flux-suspend object=kustomization/flux-system/apps --reason \"…\"` first, "
         "then `/upgrade action flux-resume object=kustomization/flux-system/apps --reason \"…\"` once the fix is in Git"),
        ({"argocd.argoproj.io/instance": "shop"}, {},
         "Argo CD Application shop will revert this change (self-heal) or overwrite it at its next sync",
         "The owner's way: `/upgrade action argocd-pause application=argocd/shop --reason \"…\"` first (Argo CD's "
         "namespace, if not argocd), then `/upgrade action argocd-resume application=argocd/shop --reason \"…\"` once "
         "the fix is in Git"),
        ({"app.kubernetes.io/managed-by": "Helm"},
         {"meta.helm.sh/release-name": "kube-proxy", "meta.helm.sh/release-namespace": "kube-system"},
         "the next `helm upgrade` of Helm release kube-system/kube-proxy will overwrite this change",
         "The owner's way: change the values of release kube-system/kube-proxy and run `helm upgrade`"),
    ],
    ids=["flux", "argocd", "helm"],
)  # fmt: skip
def test_the_gate_says_who_owns_the_object_what_will_happen_and_the_owners_way(
    cluster: Cluster,
    api: client.ApiClient,
    labels: dict[str, str],
    annotations: dict[str, str],
    says: str,
    path: str,
) -> None:
    self_managed_kube_proxy(api, labels, annotations)
    action, text = gate_of(cluster)
    assert "error" not in action
    [owner] = action["owners"]
    assert owner["target"] == KUBE_PROXY
    assert owner["consequence"] == says
    assert ":warning: *Owned by someone else*" in text
    assert says.replace("`", "") in text.replace("`", "")
    assert path in text


def test_the_gate_reads_the_owner_as_it_stands_suspended_gone_or_not_syncing(
    cluster: Cluster, api: client.ApiClient
) -> None:
    # The gate once said "will revert this change at its next reconcile" from the workload's marks
    # alone: of a Kustomization the run had just suspended, and of one that did not exist.
    self_managed_kube_proxy(api, FLUX, {})
    JobDriver(FluxSuspendJob(), cluster, {"object": "kustomization/flux-system/apps"}, now=lambda: NOW).tick()
    [owner] = gate_of(cluster)[0]["owners"]
    assert owner["consequence"] == (
        "Flux Kustomization flux-system/apps is suspended: it will not revert this change until it is "
        "resumed, and will then unless the fix is in Git"
    )
    assert owner["path"] == (
        'put the fix in Git, then `/upgrade action flux-resume object=kustomization/flux-system/apps --reason "…"`'
    )

    self_managed_kube_proxy(api, {**FLUX, "kustomize.toolkit.fluxcd.io/name": "nope"}, {})
    [owner] = gate_of(cluster)[0]["owners"]
    assert owner["consequence"] == (
        "Flux Kustomization flux-system/nope, which the object's marks name, does not exist: it will not "
        "revert this change (the marks may be stale: find who applies the object)"
    )

    self_managed_kube_proxy(api, {"kustomize.toolkit.fluxcd.io/name": None, "kustomize.toolkit.fluxcd.io/namespace": None,
                                  "argocd.argoproj.io/instance": "shop"}, {})  # fmt: skip
    JobDriver(ArgoPauseJob(), cluster, {"application": "argocd/shop"}, now=lambda: NOW).tick()
    [owner] = gate_of(cluster)[0]["owners"]
    assert owner["consequence"] == (
        "Argo CD Application shop does not sync automatically (the bot paused it): it will not revert "
        "this change, but its next sync will overwrite it"
    )
    assert (
        owner["path"]
        == 'put the fix in Git before its next sync, then `/upgrade action argocd-resume application=argocd/shop --reason "…"`'
    )


def test_a_workload_nobody_owns_has_no_owner_lines(cluster: Cluster, api: client.ApiClient) -> None:
    self_managed_kube_proxy(api, {}, {})
    action, text = gate_of(cluster)
    assert "owners" not in action
    assert "Owned by someone else" not in text


def test_flux_suspend_keeps_the_manifest_first_patches_once_and_flux_resume_undoes_it(
    cluster: Cluster, api: client.ApiClient
) -> None:
    objects = client.CustomObjectsApi(api)

    def suspended() -> Any:
        ks = objects.get_namespaced_custom_object(
            "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations", "apps"
        )
        return ks["spec"].get("suspend")

    driver = JobDriver(
        FluxSuspendJob(), cluster, {"object": "kustomization/flux-system/apps"}, now=lambda: NOW
    )
    backup = yaml.safe_load(driver.progress["backup"]["content"])
    assert backup["spec"].get("suspend") is None
    assert backup["metadata"]["name"] == "apps"
    assert "managedFields" not in backup["metadata"]
    [file] = backup_files(json.dumps(driver.progress))
    assert file.filename == "kustomization-flux-system-apps.before-flux-suspend.yaml"
    assert driver.job.dry_run(cluster, driver.progress) == [
        'would patch Flux Kustomization flux-system/apps (JSON merge patch {"spec": {"suspend": true}}) so it is '
        "suspended (spec.suspend: true); its manifest is kept with the run first"
    ]
    driver.tick(crash=True)  # patched, then died before its progress was stored
    assert suspended() is True
    driver.tick()
    assert driver.done
    assert driver.audit == []  # the write was the crashed tick's: not made (nor audited) twice
    # Suspending it again changes nothing and succeeds, saying so (it once failed the step, and
    # paused the run, on a state that already held); its gate's dry run says it first.
    again = JobDriver(
        FluxSuspendJob(), cluster, {"object": "kustomization/flux-system/apps"}, now=lambda: NOW
    )
    assert again.job.dry_run(cluster, again.progress) == [
        "would change nothing: Flux Kustomization flux-system/apps is already suspended (spec.suspend: true): "
        "nothing to change"
    ]
    again.tick()
    assert again.done
    assert again.last is not None
    assert (again.last.ok, again.last.detail) == (
        True,
        "flux-suspend: Flux Kustomization flux-system/apps is already suspended (spec.suspend: true): nothing to change",
    )
    assert again.audit == []
    resume = JobDriver(
        FluxResumeJob(), cluster, {"object": "kustomization/flux-system/apps"}, now=lambda: NOW
    )
    resume.tick()
    assert suspended() is False
    assert resume.audit == [
        ("flux-resume", 'Flux Kustomization flux-system/apps: {"spec": {"suspend": false}}')
    ]


def test_argocd_pause_removes_auto_sync_keeping_it_on_the_application_and_resume_restores_it(
    cluster: Cluster, api: client.ApiClient
) -> None:
    objects = client.CustomObjectsApi(api)

    def shop() -> Any:
        return objects.get_namespaced_custom_object(
            "argoproj.io", "v1alpha1", "argocd", "applications", "shop"
        )

    pause = JobDriver(ArgoPauseJob(), cluster, {"application": "argocd/shop"}, now=lambda: NOW)
    pause.tick()
    paused = shop()
    assert "automated" not in paused["spec"]["syncPolicy"]
    assert json.loads(paused["metadata"]["annotations"][PAUSED]) == {"prune": True, "selfHeal": True}
    twice = JobDriver(ArgoPauseJob(), cluster, {"application": "argocd/shop"}, now=lambda: NOW)
    twice.tick()
    assert twice.last is not None
    assert twice.last.ok
    assert "paused by the bot before: argocd-resume restores it" in twice.last.detail
    assert twice.audit == []
    JobDriver(ArgoResumeJob(), cluster, {"application": "argocd/shop"}, now=lambda: NOW).tick()
    resumed = shop()
    assert resumed["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert PAUSED not in (resumed["metadata"].get("annotations") or {})
    nothing = ArgoResumeJob().plan(cluster, {"application": "argocd/shop"}, now=NOW)
    assert nothing["noop"] == (
        "Argo CD Application argocd/shop was not paused by the bot (no upgrade-bot.io/paused-automated "
        "annotation): nothing to restore"
    )
    with pytest.raises(UserError, match="no such Argo CD Application argocd/nope"):
        ArgoPauseJob().plan(cluster, {"application": "argocd/nope"}, now=NOW)


def test_a_restart_gate_names_the_owners_and_that_a_restart_is_not_reverted(cluster: Cluster) -> None:
    """A restart changes only the pod template's restartedAt annotation, which no owner keeps: the
    gate names who owns what it restarts (as the README says of every gated change) without the
    set-image warning or an owner's path to take first."""
    calls = [ActionCall(name="restart", args={"workloads": "deployment/apps/podinfo,deployment/cache/redis"})]
    body = preview.read(cluster, calls, default_jobs(()), now=NOW)
    blocks, message = gate_blocks(json.loads(json.dumps(body)))
    [action] = body["actions"]
    assert action["owners"] == [
        {"kind": "flux-kustomization", "target": "deployment/apps/podinfo",
         "title": "Flux Kustomization flux-system/apps"},
        {"kind": "flux-helmrelease", "target": "deployment/cache/redis", "title": "Flux HelmRelease cache/redis"},
    ]  # fmt: skip
    text = text_of(blocks)
    assert (
        ":information_source: *Owned by someone else* — a restart only stamps the pod template's "
        "`restartedAt` annotation, which no owner keeps: it will not revert it, and nothing needs "
        "suspending first:\n• `deployment/apps/podinfo`: Flux Kustomization flux-system/apps\n"
        "• `deployment/cache/redis`: Flux HelmRelease cache/redis"
    ) in text
    assert ":warning:" not in text
    assert "flux-suspend" not in text
    assert "Flux HelmRelease cache/redis" in message
