"""The one registry of cluster job kinds: cordon, uncordon, drain, restart, delete-pod, set-image,
wait-nodegroup, wait-controlplane, and the EKS actions (eks-update-cluster, eks-update-nodegroup,
eks-update-addon).

A kind is declared once, here (`KINDS`): its name as plans write it, its one-line summary, its
arguments and their check, whether it changes the cluster, whether `/upgrade action` offers it
outside a plan, and how its job is built from the bot's `JobDeps`. The plan actions (`bot.core.actions.jobs`), the plan
validator's argument checks, the drivers' `JobRegistry` (`default_jobs`) and the command's list of
kinds and its help all derive from it. Adding a kind is one `JobKind` here and its job module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from bot.core.jobs import aks as aks_jobs
from bot.core.jobs import gke as gke_jobs
from bot.core.jobs.alerts import AlertsJob, Evidence
from bot.core.jobs.alerts import check_args as _check_alerts
from bot.core.jobs.analysis import AnalysisJob
from bot.core.jobs.analysis import check_args as _check_analysis
from bot.core.jobs.apphealth import AppHealthJob
from bot.core.jobs.apphealth import check_args as _check_app_health
from bot.core.jobs.background import Backgrounded, default_checks, next_node, next_workloads
from bot.core.jobs.base import Job, JobRegistry
from bot.core.jobs.common import (
    MAX_SELECTOR,
    duration_arg,
    int_arg,
    kind_namespace_name,
    label_value,
    names_arg,
    namespace_name,
    object_name,
    version_arg,
)
from bot.core.jobs.controlplane import WaitControlPlaneJob, version_target
from bot.core.jobs.drain import DrainJob, depool_arg
from bot.core.jobs.eks import (
    EksAccess,
    EksActs,
    EksUpdateAddonJob,
    EksUpdateClusterJob,
    EksUpdateNodegroupJob,
    no_eks,
)
from bot.core.jobs.eksargs import addon_arg, addon_version_arg, conflicts_arg, minor_arg
from bot.core.jobs.gitops import (
    ArgoPauseJob,
    ArgoResumeJob,
    FluxResumeJob,
    FluxSuspendJob,
    check_argo,
    check_flux,
)
from bot.core.jobs.image import SetImageJob
from bot.core.jobs.image import check_args as _check_image
from bot.core.jobs.nodes import CordonJob, UncordonJob
from bot.core.jobs.pods import DeletePodJob
from bot.core.jobs.pods import check_args as _check_pods
from bot.core.jobs.restart import FROM_CHECK, RestartJob, check_scope
from bot.core.jobs.waitgroup import WaitNodeGroupJob
from bot.core.providers import no_aks_provider, no_gke_provider
from bot.core.rules import Rule
from bot.errors import UserError, clip

#: CloudFormation's stack names (wait-nodegroup's `stack`).
STACK_NAME = re.compile(r"[A-Za-z][-A-Za-z0-9]{0,127}")
#: Every job takes `dry_run: true`: it lists exactly what would happen and changes nothing.
DRY_RUN = "dry_run"


@dataclass(frozen=True, kw_only=True)
class JobDeps:
    """What the jobs are built from: the settings' node-group label keys (in priority order), the
    known-issue rules, and the EKS access (cluster name → its EKS client, or a short refusal)."""

    labels: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    eks: Callable[[str], EksActs] = no_eks
    #: Cluster name → its AKS provider (`provider: {aks: …}`), or a short refusal.
    aks: Callable[[str], EksActs] = no_aks_provider
    #: Cluster name → its GKE provider (`provider: {gke: …}`), or a short refusal.
    gke: Callable[[str], EksActs] = no_gke_provider
    #: The clusters' Alertmanagers and Prometheuses (the evidence gate); without one, `alerts` /
    #: `analysis` refuse.
    evidence: Evidence = field(default_factory=Evidence)


def _backgrounded(deps: JobDeps, job: Job, ready: Callable[[dict[str, object]], bool] | None) -> Job:
    """A disruptive job with its step's `background:` evidence (bot.core.jobs.background)."""
    return Backgrounded(job, default_checks(lambda: deps.evidence), ready, evidence=lambda: deps.evidence)


@dataclass(frozen=True, kw_only=True)
class JobKind:
    """One kind of cluster job, as plans and `/upgrade action` name it."""

    name: str
    summary: str
    required: frozenset[str] = frozenset()
    #: The other arguments it takes (`dry_run` is added to every kind's).
    optional: frozenset[str] = frozenset()
    #: True when it changes the cluster (a plan's gate then needs two people, unless a dry run).
    mutating: bool
    #: True when `/upgrade action` offers it outside a plan.
    command: bool
    #: Checks the arguments' values without a cluster; raises UserError.
    check: Callable[[Mapping[str, str]], object]
    #: Builds the job from what the bot gives the jobs.
    make: Callable[[JobDeps], Job]
    #: The cloud whose API it calls (`eks`, `aks`, `gke`; "" for none): without that cloud's SDK
    #: extra it cannot run at all (`bot.core.jobs.preflight.sdk_warnings`).
    cloud: str = ""

    @property
    def arguments(self) -> frozenset[str]:
        return self.required | self.optional | {DRY_RUN}


def _nodes(args: Mapping[str, str]) -> None:
    nodes, group = names_arg(args, "node"), str(args.get("nodegroup", "")).strip()
    if bool(nodes) == bool(group):
        raise UserError("name the nodes: either node (comma-separated names) or nodegroup, not both")
    for node in nodes:
        object_name("node", node)
    if group:
        label_value("nodegroup", group)
    version_arg(args)


def _check_drain(args: Mapping[str, str]) -> None:
    _nodes(args)
    duration_arg(args, "timeout", timedelta(minutes=15))
    int_arg(args, "parallel", 5)
    depool = depool_arg(args)
    if str(args.get("depool_wait", "")).strip():
        if not depool:
            raise UserError("depool_wait: only with depool: true (or keep)")
        duration_arg(args, "depool_wait", timedelta(seconds=1))


def _check_restart(args: Mapping[str, str]) -> None:
    check_scope(args)
    for text in names_arg(args, "workloads"):
        kind_namespace_name("workloads", text, None, "deployment/NS/NAME")
    namespace = str(args.get("namespace", "")).strip()
    if namespace:
        namespace_name("namespace", namespace)
    listed = str(args.get("namespaces", "")).strip()
    if listed and not listed.startswith(FROM_CHECK):
        for name in names_arg(args, "namespaces"):
            namespace_name("namespaces", name)
    if len(str(args.get("selector", ""))) > MAX_SELECTOR:
        raise UserError(f"selector: at most {MAX_SELECTOR} characters")
    for name in ("timeout", "crashloop_after", "imagepull_after"):
        duration_arg(args, name, timedelta(minutes=15))


def _check_delete_pod(args: Mapping[str, str]) -> None:
    _check_pods(args)
    duration_arg(args, "timeout", timedelta(seconds=1))


def _check_set_image(args: Mapping[str, str]) -> None:
    _check_image(args)
    for name in ("timeout", "crashloop_after", "imagepull_after"):
        duration_arg(args, name, timedelta(minutes=15))


def _check_wait(args: Mapping[str, str]) -> None:
    group = label_value("nodegroup", str(args.get("nodegroup", "")).strip())
    version_arg(args, required=True)
    duration_arg(args, "timeout", timedelta(hours=1))
    old = str(args.get("replaces", "")).strip()
    if old:
        label_value("replaces", old)
        if old == group:
            raise UserError("replaces: the old group, not the one waited for (nodegroup)")
    stack = str(args.get("stack", "")).strip()
    if stack and not STACK_NAME.fullmatch(stack):
        raise UserError(
            f"stack: {clip(stack, 40)!r} is not a CloudFormation stack name (a letter, then letters, "
            "digits and hyphens, up to 128)"
        )


def _check_wait_controlplane(args: Mapping[str, str]) -> None:
    version_target(args)
    int_arg(args, "answers", 3, low=1, high=20)
    duration_arg(args, "timeout", timedelta(minutes=30))


def _check_eks_cluster(args: Mapping[str, str]) -> None:
    minor_arg(args, required=True)
    duration_arg(args, "timeout", timedelta(hours=1))


def _check_eks_nodegroup(args: Mapping[str, str]) -> None:
    label_value("nodegroup", str(args.get("nodegroup", "")).strip())
    minor_arg(args, required=False)
    force = str(args.get("force", "")).strip().lower()
    if force not in ("", "true", "false", "yes", "no", "1", "0", "on", "off"):
        raise UserError(f"force: {clip(force, 20)!r} is not true or false")
    duration_arg(args, "timeout", timedelta(hours=2))


def _check_eks_addon(args: Mapping[str, str]) -> None:
    addon_arg(args)
    addon_version_arg(args)
    conflicts_arg(args)
    duration_arg(args, "timeout", timedelta(minutes=30))


NODES = frozenset({"node", "nodegroup", "version"})

KINDS: tuple[JobKind, ...] = (
    JobKind(
        name="cordon",
        summary="mark nodes (a node, a list, or a node group's old nodes) unschedulable",
        optional=NODES,
        mutating=True,
        command=True,
        check=_nodes,
        make=lambda deps: CordonJob(deps.labels),
    ),
    JobKind(
        name="uncordon",
        summary="make nodes schedulable again",
        optional=NODES,
        mutating=True,
        command=True,
        check=_nodes,
        make=lambda deps: UncordonJob(deps.labels),
    ),
    JobKind(
        name="drain",
        summary="cordon and drain nodes through the eviction API (PDBs respected; a per-node timeout "
        "asks people)",
        optional=NODES
        | {"timeout", "parallel", "allow_local_storage", "allow_unmanaged", "depool", "depool_wait"},
        mutating=True,
        command=True,
        check=_check_drain,
        make=lambda deps: _backgrounded(deps, DrainJob(deps.labels, deps.rules), next_node),
    ),
    JobKind(
        name="restart",
        summary="rollout restart of Deployments/DaemonSets/StatefulSets, then wait for each rollout's "
        "verdict",
        optional=frozenset(
            {
                "workloads",
                "namespace",
                "namespaces",
                "selector",
                "kinds",
                "timeout",
                "crashloop_after",
                "imagepull_after",
            }
        ),
        mutating=True,
        command=True,
        check=_check_restart,
        make=lambda deps: _backgrounded(deps, RestartJob(deps.rules), next_workloads),
    ),
    JobKind(
        name="delete-pod",
        summary="evict stuck pods (named, or a workload's pods that are terminating or not ready) so "
        "their controller starts them again, never a whole workload; the gate's force option (with "
        "its reason) deletes past budgets, for a pod on a dead node",
        optional=frozenset({"pod", "workload", "only", "force", "allow_unmanaged", "timeout"}),
        mutating=True,
        command=True,
        check=_check_delete_pod,
        make=lambda deps: DeletePodJob(),
    ),
    JobKind(
        name="set-image",
        summary="set kube-proxy's image to the one EKS documents for the cluster's version (in its "
        "registry), then wait for the rollout",
        required=frozenset({"workload"}),
        optional=frozenset({"container", "timeout", "crashloop_after", "imagepull_after"}),
        mutating=True,
        command=True,
        check=_check_set_image,
        make=lambda deps: SetImageJob(deps.rules),
    ),
    JobKind(
        name="wait-nodegroup",
        summary="wait until a node group is entirely on a kubelet version and Ready (on EKS, its "
        "CloudFormation stack's status and failing events shown)",
        required=frozenset({"nodegroup", "version"}),
        optional=frozenset({"timeout", "replaces", "stack"}),
        mutating=False,
        command=False,
        check=_check_wait,
        make=lambda deps: WaitNodeGroupJob(deps.labels, stacks=deps.eks),
    ),
    JobKind(
        name="wait-controlplane",
        summary="wait until the API server's /version reports a version on several answers in a row",
        required=frozenset({"version"}),
        optional=frozenset({"answers", "timeout"}),
        mutating=False,
        command=False,
        check=_check_wait_controlplane,
        make=lambda deps: WaitControlPlaneJob(),
    ),
    JobKind(
        name="eks-update-cluster",
        cloud="eks",
        summary="update the EKS control plane (UpdateClusterVersion) and follow it until /version reports it",
        required=frozenset({"version"}),
        optional=frozenset({"timeout"}),
        mutating=True,
        command=False,
        check=_check_eks_cluster,
        make=lambda deps: EksUpdateClusterJob(deps.eks, deps.labels),
    ),
    JobKind(
        name="eks-update-nodegroup",
        cloud="eks",
        summary="update an EKS managed node group (UpdateNodegroupVersion), following its nodes and "
        "the disruption budgets that block its drain",
        required=frozenset({"nodegroup"}),
        optional=frozenset({"version", "force", "timeout"}),
        mutating=True,
        command=False,
        check=_check_eks_nodegroup,
        make=lambda deps: _backgrounded(deps, EksUpdateNodegroupJob(deps.eks, deps.labels), None),
    ),
    JobKind(
        name="eks-update-addon",
        cloud="eks",
        summary="update an EKS add-on (UpdateAddon) with the conflict policy the gate shows",
        required=frozenset({"addon", "version"}),
        optional=frozenset({"resolve_conflicts", "timeout"}),
        mutating=True,
        command=False,
        check=_check_eks_addon,
        make=lambda deps: EksUpdateAddonJob(deps.eks, deps.labels),
    ),
    JobKind(
        name="aks-upgrade-control-plane",
        cloud="aks",
        summary="upgrade the AKS control plane only (PUT managedClusters, agent pools kept) and follow "
        "its operation until /version reports it; AKS's deprecated-API block is a gated override with an expiry",
        required=frozenset({"version"}),
        optional=frozenset({"timeout", "override_for"}),
        mutating=True,
        command=False,
        check=aks_jobs.check_control_plane,
        make=lambda deps: aks_jobs.AksUpgradeControlPlaneJob(deps.aks, deps.labels),
    ),
    JobKind(
        name="aks-upgrade-nodepool",
        cloud="aks",
        summary="upgrade an AKS agent pool (PUT agentPools orchestratorVersion, the max surge shown at "
        "the gate) and follow its operation while its nodes roll",
        required=frozenset({"nodepool"}),
        optional=frozenset({"version", "max_surge", "timeout"}),
        mutating=True,
        command=False,
        check=aks_jobs.check_nodepool,
        make=lambda deps: _backgrounded(deps, aks_jobs.AksUpgradeNodepoolJob(deps.aks, deps.labels), None),
    ),
    JobKind(
        name="gke-update-master",
        cloud="gke",
        summary="upgrade the GKE master (update_master; the node pools stay) and follow its operation "
        "until /version reports it; a maintenance exclusion in force is shown at the gate",
        required=frozenset({"version"}),
        optional=frozenset({"timeout"}),
        mutating=True,
        command=False,
        check=gke_jobs.check_master,
        make=lambda deps: gke_jobs.GkeUpdateMasterJob(deps.gke, deps.labels),
    ),
    JobKind(
        name="gke-update-nodepool",
        cloud="gke",
        summary="upgrade a GKE node pool (update_node_pool, its surge or blue-green settings shown at the "
        "gate) and follow its operation; a blue-green soak asks people: finish, or roll back",
        required=frozenset({"nodepool"}),
        optional=frozenset({"version", "strategy", "max_surge", "max_unavailable", "soak", "timeout"}),
        mutating=True,
        command=False,
        check=gke_jobs.check_nodepool,
        make=lambda deps: _backgrounded(deps, gke_jobs.GkeUpdateNodepoolJob(deps.gke, deps.labels), None),
    ),
    JobKind(
        name="alerts",
        summary="no new alerts: pass after `settle` with none new since the step began, fail on a new "
        "critical one or at `timeout`; no answer from Alertmanager asks people",
        optional=frozenset({"settle", "ignore", "timeout"}),
        mutating=False,
        command=False,
        check=_check_alerts,
        make=lambda deps: AlertsJob(lambda: deps.evidence),
    ),
    JobKind(
        name="analysis",
        summary="measure a PromQL query `count` times, `interval` apart, judged by `success`/`failure` over "
        "`result` and `baseline` (Argo Rollouts' outcomes); Inconclusive or Error asks people",
        required=frozenset({"query"}),
        optional=frozenset(
            {"success", "failure", "interval", "count", "failure_limit", "inconclusive_limit"}
        ),
        mutating=False,
        command=False,
        check=_check_analysis,
        make=lambda deps: AnalysisJob(lambda: deps.evidence),
    ),
    JobKind(
        name="app-health",
        summary="Argo CD Applications Healthy and Synced, Flux Kustomizations/HelmReleases Ready (read "
        "through the cluster's API); apps unhealthy at the run's baseline (its first snapshot) are reported, not blocking; no "
        "answer asks people",
        optional=frozenset({"namespaces", "selector", "timeout"}),
        mutating=False,
        command=False,
        check=_check_app_health,
        make=lambda deps: AppHealthJob(),
    ),
    # The owner's path for objects a GitOps controller owns (bot/core/jobs/gitops.py, docs/ownership.md).
    JobKind(
        name="flux-suspend",
        summary="suspend a Flux Kustomization or HelmRelease (spec.suspend: true) before a fix, as "
        "`flux suspend` does; its manifest is kept with the run",
        required=frozenset({"object"}),
        mutating=True,
        command=True,
        check=check_flux,
        make=lambda deps: FluxSuspendJob(),
    ),
    JobKind(
        name="flux-resume",
        summary="resume a suspended Flux Kustomization or HelmRelease (spec.suspend: false)",
        required=frozenset({"object"}),
        mutating=True,
        command=True,
        check=check_flux,
        make=lambda deps: FluxResumeJob(),
    ),
    JobKind(
        name="argocd-pause",
        summary="pause an Argo CD Application's auto-sync (spec.syncPolicy.automated removed and kept "
        "in an annotation) before a fix; its manifest is kept with the run",
        required=frozenset({"application"}),
        mutating=True,
        command=True,
        check=check_argo,
        make=lambda deps: ArgoPauseJob(),
    ),
    JobKind(
        name="argocd-resume",
        summary="restore the auto-sync argocd-pause removed from an Argo CD Application",
        required=frozenset({"application"}),
        mutating=True,
        command=True,
        check=check_argo,
        make=lambda deps: ArgoResumeJob(),
    ),
)

#: What `/upgrade action` offers outside a plan, in the command's order.
COMMAND_KINDS: tuple[str, ...] = tuple(kind.name for kind in KINDS if kind.command)


def job_kind(name: str) -> JobKind | None:
    return next((kind for kind in KINDS if kind.name == name), None)


def default_jobs(
    node_group_labels: Sequence[str],
    rules: Sequence[Rule] = (),
    *,
    eks: EksAccess | None = None,
    evidence: Evidence | None = None,
    aks: EksAccess | None = None,
    gke: EksAccess | None = None,
) -> JobRegistry:
    """Every job kind; `node_group_labels` are the settings' node-group label keys, in priority
    order (how `nodegroup: NAME` finds a group's nodes); `rules`, the known-issue rules a drain
    matches the eviction API's refusals against, and a restart or a drain names in its failure
    lines; `eks`, the clusters' EKS providers (without it every EKS action refuses)."""
    deps = JobDeps(
        labels=tuple(node_group_labels),
        rules=tuple(rules),
        eks=eks or no_eks,
        aks=aks or no_aks_provider,
        gke=gke or no_gke_provider,
        evidence=evidence or Evidence(),
    )
    return JobRegistry(jobs={kind.name: kind.make(deps) for kind in KINDS})
