"""The pre-flight checks: pure functions from what the cluster looks like (`Facts`) to findings.

`gather.py` reads the cluster into `Facts` page by page; everything here is plain Python over that
data, so each check is tested with a few lines of facts and no cluster. Finding ids are stable
(documented in the README's table): SKEW0xx version skew, NODE0xx nodes, POD0xx pods, PDB0xx and
DRAIN0xx drain blockers, RES0xx workload resilience, ISTIO0xx the mesh's data plane, HOOK0xx
admission webhooks. Removed and deprecated APIs (API0xx) are `apis.py`'s; CNI, CRD, ISTIO002,
CERT and CAP findings are `cluster_health.py`'s.

Where several objects share one problem and one remedy (every single-replica Deployment), they
are one finding listing the objects, so a report stays readable on a cluster of thousands of
workloads; where the remedy names the object (a PDB to relax, a webhook to fix), one finding each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.checks.cluster_health import HealthFacts, run_health_checks
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, FindingKind, declare, listed
from bot.core.kube.owners import Owner, action

#: The ids these checks report (`bot.core.checks.ids` gathers every module's): an id emitted here
#: and not declared is one `waive` refuses, which `tests/core/checks/test_finding_ids.py` catches.
FINDINGS = declare(
    __name__,
    FindingKind(id="SKEW000", severity=REQUIRED, about="the versions cannot be compared"),
    FindingKind(id="SKEW001", severity=REQUIRED, about="the target is not one minor above the control plane"),
    FindingKind(id="SKEW002", severity=REQUIRED, about="kubelets newer than the control plane"),
    FindingKind(id="SKEW003", severity=REQUIRED, about="kubelets out of skew now"),
    FindingKind(id="SKEW004", severity=REQUIRED, about="kubelets out of skew once on the target"),
    FindingKind(id="SKEW005", severity=REQUIRED, about="kube-proxy out of the supported skew"),
    FindingKind(id="NODE001", severity=REQUIRED, about="nodes NotReady before the upgrade"),
    FindingKind(id="NODE002", severity=RECOMMENDED, about="nodes already cordoned"),
    FindingKind(id="NODE003", severity=REQUIRED, about="the API server lists no nodes"),
    FindingKind(id="POD001", severity=RECOMMENDED, about="pods not Running and Ready before the upgrade"),
    FindingKind(id="PDB001", severity=REQUIRED, about="a PodDisruptionBudget allows no disruption now"),
    FindingKind(id="PDB002", severity=REQUIRED, about="a PodDisruptionBudget can never allow an eviction"),
    FindingKind(id="DRAIN001", severity=RECOMMENDED, about='pods annotated safe-to-evict: "false"'),
    FindingKind(id="DRAIN002", severity=RECOMMENDED, about="pods with emptyDir volumes"),
    FindingKind(id="DRAIN003", severity=RECOMMENDED, about="pods with hostPath volumes"),
    FindingKind(id="DRAIN004", severity=REQUIRED, about="pods with no controller"),
    FindingKind(id="RES001", severity=RECOMMENDED, about="workloads with one replica"),
    FindingKind(
        id="RES002", severity=RECOMMENDED, about="replicated workloads without a PodDisruptionBudget"
    ),
    FindingKind(
        id="RES003", severity=RECOMMENDED, about="workloads behind a Service without a readiness probe"
    ),
    FindingKind(id="RES004", severity=RECOMMENDED, about="workloads with terminationGracePeriodSeconds: 0"),
    FindingKind(
        id="ISTIO001", severity=RECOMMENDED, about="sidecars whose proxy differs from the control plane's"
    ),
    FindingKind(id="HOOK001", severity=REQUIRED, about="a failurePolicy Fail webhook whose service is down"),
    FindingKind(
        id="HOOK002", severity=RECOMMENDED, about="a failurePolicy Ignore webhook whose service is down"
    ),
)

#: Listed objects per grouped finding; the rest are counted.
MAX_OBJECTS = 50
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"

_MINOR = re.compile(r"v?(\d+)\.(\d+)", re.ASCII)


def minor_of(version: str) -> tuple[int, int] | None:
    """(1, 25) from "v1.25.16-eks-abc", "1.25" or "v1.24.17-minimal-eksbuild.4"; None otherwise."""
    m = _MINOR.search(version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def kubelet_skew_allowed(apiserver_minor: int) -> int:
    """How many minors a kubelet (and kube-proxy) may trail the API server: 3 from 1.28, 2 before."""
    return 3 if apiserver_minor >= 28 else 2


@dataclass(frozen=True, kw_only=True)
class Selector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    #: (key, operator, values) as the API writes them: In, NotIn, Exists, DoesNotExist.
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    present: bool = True  # False: a PDB without a selector (it selects nothing in policy/v1)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """LabelSelector semantics; an empty selector (`{}`) selects everything."""
        if not self.present:
            return False
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for key, op, values in self.match_expressions:
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and key in labels and labels[key] in values:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                return False
        return True

    def describe(self) -> str:
        if not self.present:
            return "no selector"
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts += [f"{k} {op} ({','.join(vs)})" if vs else f"{k} {op}" for k, op, vs in self.match_expressions]
        return ", ".join(parts) or "{} (every pod in the namespace)"


@dataclass(frozen=True, kw_only=True)
class NodeFacts:
    name: str
    ready: bool
    unschedulable: bool
    kubelet: str
    group: str = ""
    #: The bot's own cordon (`upgrade-bot.io/cordoned-by`: `run=R step=S job=J approved-by=…`).
    cordoned_by: str = ""


@dataclass(frozen=True, kw_only=True)
class WorkloadFacts:
    kind: str  # Deployment | StatefulSet
    namespace: str
    name: str
    replicas: int
    template_labels: Mapping[str, str]
    readiness_probe: bool  # every container has one
    grace_seconds: int | None
    serves: bool = False  # a Service selects its pods

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class PdbFacts:
    namespace: str
    name: str
    selector: Selector
    min_available: int | str | None
    max_unavailable: int | str | None
    disruptions_allowed: int | None
    expected_pods: int | None
    #: Who changes it (a GitOps controller puts back a `kubectl edit`), when its marks say.
    owner: Owner | None = None

    @property
    def ref(self) -> str:
        return f"PodDisruptionBudget {self.namespace}/{self.name}"

    def relax(self, cluster: str) -> str:
        """How to relax it for the upgrade: its owner's way (its commands on `cluster`, the one the
        budget was read from), or `kubectl edit`."""
        if self.owner is not None:
            return f"{self.owner.consequence} if edited: {self.owner.path_on(cluster)}"
        return f"kubectl -n {self.namespace} edit pdb {self.name}"


@dataclass(frozen=True, kw_only=True)
class WebhookFacts:
    configuration: str  # "ValidatingWebhookConfiguration cert-manager-webhook"
    webhook: str
    fail_closed: bool
    service: str  # "ns/name"; "" for a URL webhook
    service_exists: bool
    ready_endpoints: int


@dataclass(frozen=True, kw_only=True)
class PodSummary:
    """What the gatherer folded out of every pod, per workload (pods themselves are not kept)."""

    #: workload → pods not Running and Ready: (pod name, phase, the reason shown by kubectl)
    unhealthy: Mapping[str, Sequence[tuple[str, str, str]]] = field(default_factory=dict)
    #: workload → names of pods annotated safe-to-evict "false"
    not_evictable: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: workload → names of pods with emptyDir volumes (DaemonSet and mirror pods excluded: drain skips them)
    empty_dir: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: workload → names of pods with hostPath volumes (same exclusions)
    host_path: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: "namespace/name" of pods with no controller (drain refuses them unless forced)
    bare: Sequence[str] = ()
    #: workload → istio-proxy versions its pods run
    proxy_versions: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Facts:
    cluster: str
    version: str  # the API server's gitVersion
    nodes: Sequence[NodeFacts] = ()
    workloads: Sequence[WorkloadFacts] = ()
    pdbs: Sequence[PdbFacts] = ()
    webhooks: Sequence[WebhookFacts] = ()
    pods: PodSummary = field(default_factory=PodSummary)
    kube_proxy: str = ""  # the kube-proxy DaemonSet's image tag, "" when there is none
    istiod: str = ""  # the istio control plane's version (istiod's image tag), "" without Istio
    #: CNI settings, CRDs, the Istio install, certificates, node room (`cluster_health.py`)
    health: HealthFacts = field(default_factory=HealthFacts)
    gaps: Sequence[str] = ()


def _listed(objects: Sequence[str]) -> tuple[str, ...]:
    return listed(objects, MAX_OBJECTS)


# ----- version skew ------------------------------------------------------------------------------


def check_skew(facts: Facts, target: str) -> list[Finding]:
    out: list[Finding] = []
    cp = minor_of(facts.version)
    to = minor_of(target)
    if cp is None or to is None:
        return [
            Finding(
                id="SKEW000",
                severity=REQUIRED,
                title="The versions cannot be compared",
                objects=(f"control plane {facts.version or '?'}", f"target {target or '?'}"),
                why="Skew and API checks need both the control plane's version and the target's.",
                fix="Pass --to 1.N (or set target_version in the plan).",
            )
        ]
    if to[1] != cp[1] + 1 or to[0] != cp[0]:
        no_upgrade = to <= cp
        out.append(
            Finding(
                id="SKEW001",
                severity=REQUIRED,
                title=f"The target {target} is not one minor above the control plane {facts.version}",
                objects=(f"control plane {facts.version}",),
                why=(
                    "The control plane is already on the target or past it: there is no upgrade to check,"
                    " and Kubernetes does not downgrade a control plane."
                    if no_upgrade
                    else "A control plane upgrades one minor version at a time; skipping one is refused"
                    " by managed providers and unsupported by Kubernetes."
                ),
                fix=(
                    f"Check for the next minor, {cp[0]}.{cp[1] + 1} (`--to {cp[0]}.{cp[1] + 1}`), or the cluster"
                    " you meant (`--cluster`)."
                    if no_upgrade
                    else f"Upgrade to {cp[0]}.{cp[1] + 1} first, then run the check again for the next step."
                ),
            )
        )
    now_allowed, after_allowed = kubelet_skew_allowed(cp[1]), kubelet_skew_allowed(to[1])
    too_new: dict[str, list[str]] = {}
    old_now: dict[str, list[str]] = {}
    old_after: dict[str, list[str]] = {}
    for node in facts.nodes:
        v = minor_of(node.kubelet)
        if v is None:
            continue
        where = f"Node {node.name} (kubelet {node.kubelet}{', group ' + node.group if node.group else ''})"
        if v[1] > cp[1]:
            too_new.setdefault(node.kubelet, []).append(where)
        elif cp[1] - v[1] > now_allowed:
            old_now.setdefault(node.kubelet, []).append(where)
        elif to[1] - v[1] > after_allowed:
            old_after.setdefault(node.kubelet, []).append(where)
    for _, nodes in sorted(too_new.items()):
        out.append(
            Finding(
                id="SKEW002",
                severity=REQUIRED,
                title="Kubelets newer than the control plane",
                objects=_listed(nodes),
                why="A kubelet must never be newer than the API server.",
                fix="Upgrade the control plane first, or replace these nodes with the control plane's version.",
            )
        )
    for _, nodes in sorted(old_now.items()):
        out.append(
            Finding(
                id="SKEW003",
                severity=REQUIRED,
                title=f"Kubelets more than {now_allowed} minors behind the control plane now",
                objects=_listed(nodes),
                why=f"Kubernetes supports kubelets up to {now_allowed} minors older than the API server"
                f" {facts.version}; these are already outside that.",
                fix="Replace or upgrade these nodes before anything else.",
            )
        )
    for kubelet, nodes in sorted(old_after.items()):
        behind = to[1] - (minor_of(kubelet) or (0, 0))[1]
        out.append(
            Finding(
                id="SKEW004",
                severity=REQUIRED,
                title=f"Kubelets {kubelet} fall out of skew once the control plane is on {target}",
                objects=_listed(nodes),
                why=f"After the control-plane step the API server is 1.{to[1]}, and kubelets may trail"
                f" it by at most {after_allowed} minors; kubelet {kubelet} would be {behind} behind.",
                fix=f"Upgrade these nodes to at least 1.{to[1] - after_allowed} (replace their node group)"
                " before the control-plane step.",
            )
        )
    proxy = minor_of(facts.kube_proxy) if facts.kube_proxy else None
    if proxy is not None:
        if proxy[1] > cp[1]:
            why = f"kube-proxy {facts.kube_proxy} is newer than the API server {facts.version}."
        elif cp[1] - proxy[1] > now_allowed:
            why = (
                f"kube-proxy {facts.kube_proxy} trails the API server by more than {now_allowed} minors now."
            )
        elif to[1] - proxy[1] > after_allowed:
            why = f"kube-proxy {facts.kube_proxy} would trail 1.{to[1]} by more than {after_allowed} minors."
        else:
            why = ""
        if why:
            out.append(
                Finding(
                    id="SKEW005",
                    severity=REQUIRED,
                    title="kube-proxy out of the supported skew",
                    objects=(f"DaemonSet kube-system/kube-proxy ({facts.kube_proxy})",),
                    why=why,
                    fix="Update the kube-proxy add-on to the version the provider documents for the control plane.",
                )
            )
    return out


# ----- nodes and pods ------------------------------------------------------------------------------


#: The annotation the bot writes on a node it cordons (`run=R step=S job=J approved-by=…`; written
#: and removed by `bot.core.jobs.trail`, which takes the name from here).
CORDONED_BY = "upgrade-bot.io/cordoned-by"

#: The nodes one pasted `uncordon` command names (a node list past that is a node group's job).
MAX_UNCORDON = 20


def check_nodes(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    if not facts.nodes and not any(gap.startswith("nodes:") for gap in facts.gaps):
        return [_no_nodes(facts)]
    not_ready = [f"Node {n.name}" for n in facts.nodes if not n.ready]
    cordoned = [f"Node {n.name}" for n in facts.nodes if n.unschedulable]
    if not_ready:
        out.append(
            Finding(
                id="NODE001",
                severity=REQUIRED,
                title="Nodes NotReady before the upgrade",
                objects=_listed(not_ready),
                why="Pods on a NotReady node are not running as the cluster believes, drains of it hang on"
                " pods stuck Terminating, and the upgrade's own NotReady nodes become indistinguishable.",
                fix="Find out why (kubectl describe node NAME); repair or remove these nodes first.",
            )
        )
    if cordoned:
        out.append(_cordoned(facts))
    return out


def _no_nodes(facts: Facts) -> Finding:
    """NODE003: the nodes were read and there are none. Every other check then passes over an
    empty list, so "passed" would vouch for nothing; it is most often the wrong kubeconfig or
    context. Required, so that a cluster empty on purpose passes only by two people's waiver."""
    return Finding(
        id="NODE003",
        severity=REQUIRED,
        title="The API server lists no nodes",
        objects=(f"cluster {facts.cluster}",),
        why="With no nodes, the skew, drain, budget and pod checks had nothing to look at: a pass would"
        " say nothing about the cluster you mean to upgrade. It is usually the wrong kubeconfig or"
        " context, or a cluster whose nodes are all gone.",
        fix="Check that the kubeconfig and context point at the cluster you mean (kubectl get nodes)."
        " If it has no nodes on purpose, waive NODE003 (two people) and check again.",
    )


def _run_of(cordoned_by: str) -> str:
    """`R` of the bot's annotation `run=R step=S …`; "" when it names no run (someone's own note
    under the bot's key): such a node is not the bot's."""
    words = dict(w.partition("=")[::2] for w in cordoned_by.split())
    run = words.get("run", "")
    return run if _RUN_ID.fullmatch(run) else ""


#: A run id as the bot writes it in its cordon annotation.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def _uncordon(
    names: Sequence[str], total: int, *, cluster: str, reason: str = "left cordoned before the upgrade"
) -> str:
    """The pasteable gated uncordon of `names` (the first MAX_UNCORDON of `total`) on `cluster`."""
    return action(f"uncordon node={','.join(names)}", cluster=cluster, reason=reason) + (
        f"\n  (the first {MAX_UNCORDON} of {total}; again for the rest)" if total > MAX_UNCORDON else ""
    )


def _cordoned(facts: Facts) -> Finding:
    """NODE002. A node the bot cordoned (its annotation names the run) is that run's: its drain goes
    on, or its abort offers the uncordon. Only the others — cordoned by someone, for a reason the
    bot cannot know — get the pasteable uncordon and the Fix… button (`action`)."""
    theirs = [n for n in facts.nodes if n.unschedulable and not _run_of(n.cordoned_by)]
    ours = [n for n in facts.nodes if n.unschedulable and _run_of(n.cordoned_by)]
    objects = [f"Node {n.name}" for n in theirs] + [
        f"Node {n.name} (the bot's run {_run_of(n.cordoned_by)})" for n in ours
    ]
    names = [n.name for n in theirs[:MAX_UNCORDON]]
    action = f"uncordon node={','.join(names)}" if names else ""
    fix = ""
    if names:
        fix = (
            "Ask who cordoned them and why; then remove them, or make them schedulable again through"
            " the gated action (two people, the dry run at its gate):\n  "
            + _uncordon(names, len(theirs), cluster=facts.cluster)
        )
    if ours:
        runs = sorted({_run_of(n.cordoned_by) for n in ours})
        fix += (
            ("\n" if fix else "")
            + f"The bot's own cordons (annotation {CORDONED_BY}) belong to run {', '.join(runs)}: its drain"
            " goes on from them, or its abort offers to uncordon them"
            + f" (`/upgrade status {runs[0]}`)."
            + (" They are left out of the command above and of the Fix… button." if names else "")
            + " Only if that run is over:\n  "
            + _uncordon(
                [n.name for n in ours[:MAX_UNCORDON]],
                len(ours),
                cluster=facts.cluster,
                reason="left cordoned by a run that is over",
            )
        )
    return Finding(
        id="NODE002",
        severity=RECOMMENDED,
        title="Nodes already cordoned",
        objects=_listed(objects),
        why="Someone took these out of scheduling before the upgrade: capacity is lower than it"
        " looks, and an upgrade that uncordons nodes may undo their reason.",
        fix=fix,
        action=action,
    )


def check_pods(facts: Facts) -> list[Finding]:
    objects: list[str] = []
    for workload, pods in sorted(facts.pods.unhealthy.items()):
        for name, phase, reason in pods:
            objects.append(f"{workload}: Pod {name} {phase}{' ' + reason if reason else ''}")
    if not objects:
        return []
    return [
        Finding(
            id="POD001",
            severity=RECOMMENDED,
            title="Pods not Running and Ready before the upgrade",
            objects=_listed(objects),
            why="A pod already failing before the upgrade will look like a regression after it, and an"
            " unhealthy pod can hold its disruption budget at zero and stall a drain.",
            fix="Fix or remove them first, or record them as known (the snapshot's diff then tells old from new).",
        )
    ]


# ----- drain blockers ----------------------------------------------------------------------------


def _workloads_of(pdb: PdbFacts, by_namespace: Mapping[str, Sequence[WorkloadFacts]]) -> list[WorkloadFacts]:
    return [w for w in by_namespace.get(pdb.namespace, ()) if pdb.selector.matches(w.template_labels)]


def _by_namespace(workloads: Sequence[WorkloadFacts]) -> dict[str, list[WorkloadFacts]]:
    """Workloads by namespace, in their order: a budget selects only in its own namespace (and a
    scan of every workload for each of thousands of budgets was quadratic)."""
    out: dict[str, list[WorkloadFacts]] = {}
    for w in workloads:
        out.setdefault(w.namespace, []).append(w)
    return out


def _blocks_single(pdb: PdbFacts, selected: Sequence[WorkloadFacts]) -> bool:
    total = sum(w.replicas for w in selected)
    if pdb.max_unavailable in (0, "0", "0%"):
        return bool(selected)
    if isinstance(pdb.min_available, int):
        return bool(selected) and pdb.min_available >= total
    return pdb.min_available == "100%" and bool(selected)


def _never_fix(pdb: PdbFacts, cluster: str) -> str:
    """The fix of a budget that can never allow an eviction, whatever its pods' health."""
    if pdb.max_unavailable in (0, "0", "0%"):
        return (
            "Set maxUnavailable: 1 for the upgrade: 0 refuses every eviction, however many replicas run"
            f" ({pdb.relax(cluster)})."
        )
    return f"Run more replicas than minAvailable, or use maxUnavailable: 1 ({pdb.relax(cluster)})."


def check_drain(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    by_namespace = _by_namespace(facts.workloads)
    for pdb in sorted(facts.pdbs, key=lambda p: (p.namespace, p.name)):
        selected = _workloads_of(pdb, by_namespace)
        names = ", ".join(f"{w.ref} ({w.replicas} replica{'s' if w.replicas != 1 else ''})" for w in selected)
        budget = (
            f"minAvailable {pdb.min_available}"
            if pdb.min_available is not None
            else f"maxUnavailable {pdb.max_unavailable}"
        )
        if pdb.disruptions_allowed == 0 and (pdb.expected_pods or selected):
            out.append(
                Finding(
                    id="PDB001",
                    severity=REQUIRED,
                    title=f"PodDisruptionBudget {pdb.namespace}/{pdb.name} allows no disruption",
                    objects=(pdb.ref, *(w.ref for w in selected)),
                    why=f"Its selector ({pdb.selector.describe()}) with {budget} leaves disruptionsAllowed at 0"
                    f"{' over ' + names if names else ''}: every eviction is refused (429), so the drain of"
                    " its pods' nodes waits until the managed node group gives up (EKS: 15 minutes,"
                    " PodEvictionFailure).",
                    fix=_never_fix(pdb, facts.cluster)
                    if _blocks_single(pdb, selected)
                    else "Fix the unhealthy pods it counts, or scale the workload up, or relax the budget for"
                    f" the upgrade ({pdb.relax(facts.cluster)}).",
                )
            )
        elif _blocks_single(pdb, selected):  # before the disruption controller computed its status
            out.append(
                Finding(
                    id="PDB002",
                    severity=REQUIRED,
                    title=f"PodDisruptionBudget {pdb.namespace}/{pdb.name} can never allow an eviction",
                    objects=(pdb.ref, *(w.ref for w in selected)),
                    why=f"{budget} over {names}: no pod can ever be evicted, so a drain never ends.",
                    fix=_never_fix(pdb, facts.cluster),
                )
            )
    groups = (
        (
            "DRAIN001",
            facts.pods.not_evictable,
            'Pods annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"',
            "The cluster autoscaler never removes a node running one of these, so node groups it"
            " manages cannot scale in around the upgrade, and teams that drain with it wait for ever.",
            "Confirm the workload tolerates eviction and remove the annotation for the upgrade, or move"
            " its pods by hand (kubectl rollout restart) once the new nodes are Ready.",
        ),
        (
            "DRAIN002",
            facts.pods.empty_dir,
            "Pods with emptyDir volumes: their data is lost on drain",
            "`kubectl drain` refuses these unless --delete-emptydir-data; the node's replacement deletes"
            " the data either way.",
            "Make sure the data is scratch (caches, sockets); drain with --delete-emptydir-data.",
        ),
        (
            "DRAIN003",
            facts.pods.host_path,
            "Pods with hostPath volumes: node-local data",
            "The node is replaced, not rebooted: whatever they keep on the host is gone after the upgrade.",
            "Move the data to a persistent volume or confirm it is disposable.",
        ),
    )
    for code, by_workload, title, why, fix in groups:
        if by_workload:
            out.append(
                Finding(
                    id=code,
                    severity=RECOMMENDED,
                    title=title,
                    objects=_listed(
                        [
                            f"{w} ({len(p)} pod{'s' if len(p) != 1 else ''})"
                            for w, p in sorted(by_workload.items())
                        ]
                    ),
                    why=why,
                    fix=fix,
                )
            )
    if facts.pods.bare:
        out.append(
            Finding(
                id="DRAIN004",
                severity=REQUIRED,
                title="Pods with no controller",
                objects=_listed([f"Pod {p}" for p in sorted(facts.pods.bare)]),
                why="Nothing recreates them: `kubectl drain` refuses them unless --force, and after the"
                " node is replaced they are gone for good.",
                fix="Run them under a Deployment or Job, or delete them knowingly before the upgrade.",
            )
        )
    return out


# ----- workload resilience -------------------------------------------------------------------------


def check_resilience(facts: Facts) -> list[Finding]:
    single = [w.ref for w in facts.workloads if w.replicas == 1]
    by_namespace = _by_namespace(facts.workloads)
    covered = {w.ref for pdb in facts.pdbs for w in _workloads_of(pdb, by_namespace)}
    # With the budgets not read, every replicated workload would look unprotected: not judged.
    budgets_read = not any(g.startswith("poddisruptionbudgets:") for g in facts.gaps)
    no_pdb = (
        [w.ref for w in facts.workloads if w.replicas > 1 and w.ref not in covered] if budgets_read else []
    )
    no_probe = [w.ref for w in facts.workloads if w.replicas > 0 and w.serves and not w.readiness_probe]
    no_grace = [w.ref for w in facts.workloads if w.grace_seconds == 0]
    out: list[Finding] = []
    for code, objects, title, why, fix in (
        (
            "RES001",
            single,
            "Workloads with one replica",
            "Every drain of their node is an outage until the pod is Running elsewhere.",
            "Run two replicas (and a PodDisruptionBudget) where an outage matters.",
        ),
        (
            "RES002",
            no_pdb,
            "Workloads with several replicas and no PodDisruptionBudget",
            "Nothing stops a drain from evicting all their replicas at once when they share nodes.",
            "Add a PodDisruptionBudget with maxUnavailable: 1.",
        ),
        (
            "RES003",
            no_probe,
            "Workloads behind a Service without a readiness probe",
            "A rescheduled pod takes traffic (and counts as healthy for its budget) before it can serve.",
            "Add a readinessProbe to every container that serves.",
        ),
        (
            "RES004",
            no_grace,
            "Workloads with terminationGracePeriodSeconds: 0",
            "Their pods are killed without SIGTERM handling: in-flight requests fail on every drain.",
            "Give them a grace period long enough to finish in-flight work (default 30 s).",
        ),
    ):
        if objects:
            out.append(
                Finding(
                    id=code,
                    severity=RECOMMENDED,
                    title=title,
                    objects=_listed(sorted(objects)),
                    why=why,
                    fix=fix,
                )
            )
    return out


# ----- istio ---------------------------------------------------------------------------------------


def stale_sidecars(facts: Facts) -> list[str]:
    """The workloads ("Deployment ns/name") whose istio-proxy differs from istiod's: ISTIO001's."""
    if not facts.istiod:
        return []
    return [w for w, v in sorted(facts.pods.proxy_versions.items()) if v - {facts.istiod}]


def stale_sidecar_namespaces(facts: Facts) -> list[str]:
    """The namespaces ISTIO001 flags: those of `stale_sidecars`."""
    return sorted({w.partition(" ")[2].partition("/")[0] for w in stale_sidecars(facts)})


def check_istio(facts: Facts) -> list[Finding]:
    workloads = stale_sidecars(facts)
    stale = [
        f"{w} (istio-proxy {', '.join(sorted(facts.pods.proxy_versions[w] - {facts.istiod}))})"
        for w in workloads
    ]
    if not stale:
        return []
    return [
        Finding(
            id="ISTIO001",
            severity=RECOMMENDED,
            title=f"Sidecars whose proxy differs from the control plane's ({facts.istiod})",
            objects=_listed(stale),
            why="Sidecars are injected at pod creation: these still run an older proxy than istiod. Istio"
            " supports a proxy one minor behind; after the upgrade's restarts the mix widens.",
            fix="Restart them after the control-plane step:\n" + _restarts(workloads),
        )
    ]


#: Restart commands written out one per workload; past these, one per namespace.
MAX_RESTARTS = 5


def _restarts(workloads: Sequence[str]) -> str:
    """`kubectl rollout restart` for each workload ("Deployment ns/name"), ready to paste: one line
    each up to `MAX_RESTARTS`, then one per namespace and kind of the rest (every one there)."""
    lines: list[str] = []
    rest: dict[tuple[str, str], int] = {}
    for w in workloads:
        kind, _, ref = w.partition(" ")
        namespace, _, name = ref.rpartition("/")
        if kind == "Pod":
            lines.append(
                f"  kubectl -n {namespace} delete pod {name}   (no controller: recreate it yourself)"
            )
        elif len(lines) < MAX_RESTARTS:
            lines.append(f"  kubectl -n {namespace} rollout restart {kind.lower()} {name}")
        else:
            rest[(namespace, kind)] = rest.get((namespace, kind), 0) + 1
    for (namespace, kind), count in sorted(rest.items()):
        lines.append(
            f"  kubectl -n {namespace} rollout restart {kind.lower()}   (every {kind} there: {count} more flagged)"
        )
    return "\n".join(lines)


# ----- admission webhooks ------------------------------------------------------------------------


def check_webhooks(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    for hook in facts.webhooks:
        if not hook.service or hook.ready_endpoints > 0:
            continue
        state = "has no ready endpoints" if hook.service_exists else "does not exist"
        policy = "Fail" if hook.fail_closed else "Ignore"
        out.append(
            Finding(
                id="HOOK001" if hook.fail_closed else "HOOK002",
                severity=REQUIRED if hook.fail_closed else RECOMMENDED,
                title=f"Webhook {hook.webhook}: its service {hook.service} {state}",
                objects=(hook.configuration, f"Service {hook.service}"),
                why=(
                    f"failurePolicy {policy}: every request it intercepts is refused while nothing answers,"
                    " so pods cannot be created on the new nodes (or objects updated) during the upgrade."
                    if hook.fail_closed
                    else f"failurePolicy {policy}: requests pass unchecked (and each waits for the timeout)."
                ),
                fix=f"Bring the service's pods back (kubectl -n {hook.service.split('/')[0]} get pods,endpoints),"
                " or delete the configuration if its owner is gone.",
            )
        )
    return out


def run_checks(facts: Facts, target: str, *, now: float | None = None) -> list[Finding]:
    """Every check of this module and of `cluster_health.py`, in the report's order; `now` (Unix
    seconds, default the present) dates the certificates' expiry."""
    return [
        *check_skew(facts, target),
        *check_nodes(facts),
        *check_pods(facts),
        *check_drain(facts),
        *check_webhooks(facts),
        *check_istio(facts),
        *check_resilience(facts),
        *run_health_checks(facts.health, now=now),
    ]
