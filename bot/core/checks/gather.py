"""Reading a cluster for the checks: pages of typed structs folded into `Facts` and rule hits.

Every list is paged (500 at a time) and decoded by the kube adapter into the structs of
`schema.py`, which declare only the fields read here (of a pod's labels and annotations, only the
keys read). The pods, most of a large cluster's bytes, are listed, decoded and reduced in a helper
process of the kube adapter (`map_pages`, `PodReducer`) while the other lists are read here: each
page comes back as what the checks need of it (per-workload pod names, a few counters) and the
`PodState`s of the pods a known-issue rule may match, and is folded here (`_PodFold`), so the
bot's interpreter never decodes a page of pods and a 150,000-pod cluster is read in bounded memory
(`benchmarks/bench_check.py`). A pod becomes a `PodState` only if it shows the signals some rule
requires (`rules.Screen`, computed from the wire structs): most pods are healthy and no rule can
match them.

Log tails are read here only for containers that pass every other test of a rule that asks for its
log, at most `MAX_LOG_READS` per check (a note says when the budget ran out). A resource the bot
may not read (403) is a named gap in the report, not a crash; the check never writes anything.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bot.core.checks import schema
from bot.core.checks.certs import read_ca_bundle, read_pem_bundle
from bot.core.checks.cluster_health import (
    CNI_ENV,
    ISTIO_ROOT_CONFIGMAP,
    ISTIO_ROOT_KEY,
    CertFacts,
    CniFacts,
    CrdFacts,
    HealthFacts,
    NodeRoom,
    ServingCert,
    quantity,
)
from bot.core.checks.logprobe import MAX_LOG_READS
from bot.core.checks.podreducer import (
    _BIG_CPU,
    _BIG_MEM,
    _EVICT_CPU,
    _EVICT_PODS,
    _USED_CPU,
    _USED_PODS,
    PodReducer,
    _Everything,
    _PodFold,
    _tag,
    _tolerates_all,
)
from bot.core.checks.preflight import (
    CORDONED_BY,
    Facts,
    NodeFacts,
    PdbFacts,
    PodSummary,
    Selector,
    WebhookFacts,
    WorkloadFacts,
)
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.kube.objects import parse_iso
from bot.core.kube.owners import owner_of
from bot.core.kube.wire import InvolvedObject, NodeInfo
from bot.core.rules import (
    ANNOTATED,
    DELETING,
    IN_KIND,
    IN_NAMESPACE,
    LABELLED,
    NODE_NOT_READY,
    TOLERATES_ALL,
    EventRecord,
    Rule,
    RuleHit,
    Screen,
)
from bot.core.rules.patterns import DEFAULT_BUDGET_SECONDS, MatchBudget
from bot.core.snapshots.projection import (
    ClusterReader,
    MappedLike,
    Progress,
    list_total,
    no_progress,
)
from bot.errors import ClusterError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What the report (and a watch's log) says then: reading logs is an opt-in role.
LOGS_FORBIDDEN_NOTE = (
    "not read (forbidden): the log-based rules need the optional `upgrade-bot-pod-logs` role"
    " (deploy/rbac.yaml; Helm value `podLogs: true`)"
)


#: What the checks read through: the snapshot's reader (the kube adapter's `Cluster` in production).
#: Container logs are read with its `get_raw` where it has one; without it, log rules are skipped.
CheckReader = ClusterReader


@dataclass
class Gathered:
    facts: Facts
    hits: list[RuleHit]
    notes: list[str] = field(default_factory=list)
    #: How many pods were listed (in `namespace`, or named `pod_name`, when narrowed).
    pods: int = 0


def _selector(sel: schema.Selector | None) -> Selector:
    if sel is None:
        return Selector(present=False)
    return Selector(
        match_labels=dict(sel.match_labels or {}),
        match_expressions=tuple(
            (r.key, r.operator, tuple(r.values or ())) for r in sel.match_expressions or ()
        ),
    )


def _ready(conditions: Sequence[Any] | None) -> bool:
    for c in conditions or ():
        if c.type == "Ready":
            return bool(c.status == "True")
    return False


def _pod_signals(
    pod: schema.Pod, workload: str, screen: Screen, shape: schema.PodSchema, node_ready: Mapping[str, bool]
) -> int:
    """The pod-level part of `screen.signals(pod_state(pod, …))`, without building the state:
    the same tests on the wire structs (events and logs are the gatherer's to add)."""
    meta = pod.metadata
    used = screen.used
    out = DELETING if meta.deletion_timestamp else 0
    # With no node known (the pods' helper), every node is Ready: no lookup per pod.
    if used & NODE_NOT_READY and node_ready and not node_ready.get(pod.spec.node_name or "", True):
        out |= NODE_NOT_READY
    if used & TOLERATES_ALL and _tolerates_all(schema.tolerations(pod.spec)):
        out |= TOLERATES_ALL
    if (meta.namespace or "") in screen.namespaces:
        out |= IN_NAMESPACE
    if workload.startswith(screen.kind_prefixes):  # one C call: this runs for every pod
        out |= IN_KIND
    labels, annotations = meta.labels, meta.annotations
    if labels is not None:
        for _, attr in shape.labels:
            if getattr(labels, attr) is not None:
                out |= LABELLED
                break
    if annotations is not None:
        for _, attr in shape.annotations:
            if getattr(annotations, attr) is not None:
                out |= ANNOTATED
                break
    return out & used


def read_facts(
    reader: CheckReader,
    *,
    rules: Sequence[Rule] = (),
    namespace: str = "",
    pod_name: str = "",
    node_group_labels: Sequence[str] = DEFAULT_NODE_GROUP_LABELS,
    progress: Progress | None = None,
    meanwhile: Callable[[str], None] | None = None,
    match_seconds: float = DEFAULT_BUDGET_SECONDS,
) -> Gathered:
    """Read what the checks and rules need; `namespace`/`pod_name` narrow the pods (diagnose).

    `meanwhile` is called with the control plane's version while the pods' helper works, before
    its pages are folded: the caller's own reads (the removed-API signals) overlap the pods.
    The rules' matching spends at most `match_seconds` (a note says so when it ran out)."""
    report: Progress = no_progress if progress is None else progress
    # One matching budget for the whole run: the batches below all spend from it.
    budget = MatchBudget(match_seconds)
    gaps: list[str] = []
    notes: list[str] = []
    pages = _Pages(reader, report, gaps)
    version = str(reader.get_json("/version").get("gitVersion", ""))

    # The events come first, out of the order of the report's gaps: the pods' helper (below) takes
    # the names of the pods they are about with it.
    events, event_gaps = _read_events(pages, rules, namespace)
    ev_by_pod: dict[tuple[str, str], list[EventRecord]] = {}
    for record in events:
        ev_by_pod.setdefault((record.namespace, record.name), []).append(record)

    log_rules = [r for r in rules if r.match.log is not None]
    get_raw: Callable[..., bytes] | None = getattr(reader, "get_raw", None)
    if log_rules and get_raw is None:
        notes.append("this reader cannot read container logs: log-based rules were skipped")
    # Containers some log rule may read; a log rule that names none may read any container.
    log_containers: frozenset[str] | _Everything = frozenset(
        name for r in log_rules for name in r.match.containers
    )
    if any(not r.match.containers for r in log_rules):
        log_containers = _Everything()
    screen = Screen(rules)
    shape = schema.pod_schema(screen.label_keys, screen.annotation_keys)
    pod_path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    pod_query = {"fieldSelector": f"metadata.name={pod_name}"} if pod_name else None

    def list_pods() -> MappedLike:
        reduce = PodReducer(
            screen=screen,
            shape=shape,
            rules=bool(rules),
            with_events=frozenset(ev_by_pod),
            log_containers=log_containers if log_rules and get_raw is not None else frozenset(),
            log_rules=log_rules,
        )
        return reader.map_pages(pod_path, pod_query, item_type=shape.pod, transform=reduce)

    # The pods, nine tenths of a large cluster's bytes, are listed, decoded and reduced by a helper
    # process from now on, while the lists below are read here.
    pending: MappedLike | None = list_pods()
    try:
        nodes, node_ready, allocatable = _read_nodes(pages, node_group_labels)
        workloads = _read_workloads(pages)
        pdbs = _read_pdbs(pages)
        # Without the Services (a 403), a webhook's service cannot be called missing: only its
        # Endpoints are asked, and an unreadable Endpoints is a gap, not a finding.
        services_known = not any(g.startswith("services:") for g in gaps)
        health = _read_health(reader, pages, workloads, workloads.service_names if services_known else None)
        kube_proxy = _kube_proxy(reader, gaps)
        gaps.extend(event_gaps)
        if meanwhile is not None:
            meanwhile(version)

        fold = _PodFold(
            rules=rules,
            budget=budget,
            screen=screen,
            node_ready=node_ready,
            events=ev_by_pod,
            log_rules=log_rules,
            get_raw=get_raw,
        )
        mapped, pending = pending, None
        pod_count = _fold_pods(fold, mapped, list_pods, pages)
    finally:
        if pending is not None:
            pending.close()
    hits = fold.finish()
    if budget.exhausted:
        notes.append(budget.describe())
    if fold.logs_forbidden:
        gaps.append(f"container logs: {LOGS_FORBIDDEN_NOTE}")
    elif log_rules and fold.log_budget <= 0 and get_raw is not None:
        notes.append(
            f"log-based rules read at most {MAX_LOG_READS} container logs; more candidates were skipped"
        )

    facts = Facts(
        cluster=reader.name,
        version=version,
        nodes=nodes,
        workloads=workloads.facts,
        pdbs=pdbs,
        webhooks=health.webhooks,
        pods=_pod_summary(fold),
        kube_proxy=kube_proxy,
        istiod=workloads.istiod,
        health=HealthFacts(
            cni=health.cni,
            crds=health.crds,
            istio_operators=workloads.istio_operators,
            istio_operator_crd=any(c.name == "istiooperators.install.istio.io" for c in health.crds),
            certs=health.certs,
            serving=health.serving,
            rooms=_rooms(nodes, allocatable, fold.rooms),
        ),
        gaps=gaps,
    )
    return Gathered(facts=facts, hits=hits, notes=notes, pods=pod_count)


class _Pages:
    """The lists the checks read, page by page, with their progress reported: a resource the bot
    may not read (403, 404, or 410 again after one fresh list) is a gap in the report, not an error."""

    def __init__(self, reader: CheckReader, report: Progress, gaps: list[str]) -> None:
        self.reader, self.report, self.gaps = reader, report, gaps

    def __call__(
        self,
        resource: str,
        path: str,
        item_type: type[T],
        query: Mapping[str, Any] | None = None,
        gaps_to: list[str] | None = None,
    ) -> Iterator[T]:
        """The items, page by page (a resource the bot may not read is a gap, not an error)."""
        for attempt in (1, 2):
            try:
                count = 0
                for page in self.reader.list_pages(path, query, item_type=item_type):
                    yield from page.items
                    count += len(page.items)
                    self.report(resource, count, list_total(count, page))
                return
            except ClusterError as exc:
                if exc.status == 410 and attempt == 1 and count == 0:
                    continue
                if exc.status in (403, 404, 410):
                    (self.gaps if gaps_to is None else gaps_to).append(f"{resource}: {exc.user_message}")
                    return
                raise


def _fold_pods(
    fold: _PodFold, first: MappedLike | None, list_pods: Callable[[], MappedLike], pages: _Pages
) -> int:
    """The pods' pages, reduced by the helper, folded as they come (listed again from the start
    after a 410 before any page; a pods list the bot may not read is a gap); how many pods."""
    pending: MappedLike | None = first
    for attempt in (1, 2):
        mapped, pending = pending or list_pods(), None
        count = 0
        try:
            with contextlib.closing(mapped):
                for page in mapped:
                    fold.add(page.data)
                    count += page.count
                    pages.report("pods", count, list_total(count, page))
            break
        except ClusterError as exc:
            if exc.status == 410 and attempt == 1 and count == 0:
                continue
            if exc.status in (403, 404, 410):
                pages.gaps.append(f"pods: {exc.user_message}")
                break
            raise
    return count


def _pod_summary(fold: _PodFold) -> PodSummary:
    return PodSummary(
        unhealthy=fold.unhealthy,
        not_evictable=fold.not_evictable,
        empty_dir=fold.empty_dir,
        host_path=fold.host_path,
        bare=fold.bare,
        proxy_versions={w: frozenset(v) for w, v in fold.proxies.items()},
    )


def _read_events(pages: _Pages, rules: Sequence[Rule], namespace: str) -> tuple[list[EventRecord], list[str]]:
    """The Warning events, if some rule matches events, and the gaps reading them left."""
    events: list[EventRecord] = []
    event_gaps: list[str] = []
    if any(r.match.events is not None for r in rules):
        ev_path = f"/api/v1/namespaces/{namespace}/events" if namespace else "/api/v1/events"
        for e in pages("events", ev_path, schema.Event, {"fieldSelector": "type=Warning"}, event_gaps):
            inv = e.involved_object or InvolvedObject()
            events.append(
                EventRecord(
                    namespace=inv.namespace or "",
                    kind=inv.kind or "",
                    name=inv.name or "",
                    reason=e.reason or "",
                    message=e.message or "",
                    type=e.type or "",
                    last_seen=e.last_timestamp or e.event_time or "",
                )
            )
    return events, event_gaps


def _read_nodes(
    pages: _Pages, node_group_labels: Sequence[str]
) -> tuple[list[NodeFacts], dict[str, bool], dict[str, tuple[int, int, int]]]:
    """The nodes, which are Ready, and what each can hold (millicores, bytes, pods)."""
    nodes: list[NodeFacts] = []
    node_ready: dict[str, bool] = {}
    allocatable: dict[str, tuple[int, int, int]] = {}
    for n in pages("nodes", "/api/v1/nodes", schema.Node):
        labels = n.metadata.labels or {}
        group = next((labels[k] for k in node_group_labels if k in labels), "")
        ready = _ready(n.status.conditions)
        node_ready[n.metadata.name or ""] = ready
        alloc = n.status.allocatable or schema.Allocatable()
        allocatable[n.metadata.name or ""] = (
            quantity(alloc.cpu, milli=True),
            quantity(alloc.memory),
            quantity(alloc.pods),
        )
        nodes.append(
            NodeFacts(
                name=n.metadata.name or "",
                ready=ready,
                unschedulable=bool(n.spec.unschedulable),
                kubelet=(n.status.node_info or NodeInfo()).kubelet_version,
                group=group,
                cordoned_by=(n.metadata.annotations or {}).get(CORDONED_BY, "")
                if n.spec.unschedulable
                else "",
            )
        )
    return nodes, node_ready, allocatable


@dataclass
class _Workloads:
    """The Deployments and StatefulSets (whether a Service selects their pods), the Services'
    names, and the Istio control plane and operators seen among them."""

    facts: list[WorkloadFacts] = field(default_factory=list)
    service_names: set[str] = field(default_factory=set)
    istiod: str = ""
    istiod_namespace: str = ""
    istio_operators: list[str] = field(default_factory=list)


def _read_workloads(pages: _Pages) -> _Workloads:
    out = _Workloads()
    services: dict[str, list[dict[str, str]]] = {}
    for svc in pages("services", "/api/v1/services", schema.Service):
        ns = svc.metadata.namespace or ""
        out.service_names.add(f"{ns}/{svc.metadata.name}")
        if svc.spec.selector:
            services.setdefault(ns, []).append(svc.spec.selector)
    for kind, plural in (("Deployment", "deployments"), ("StatefulSet", "statefulsets")):
        for w in pages(plural, f"/apis/apps/v1/{plural}", schema.Workload):
            containers = w.spec.template.spec.containers or ()
            ns, name = w.metadata.namespace or "", w.metadata.name or ""
            labels = w.spec.template.metadata.labels or {}
            out.facts.append(
                WorkloadFacts(
                    kind=kind,
                    namespace=ns,
                    name=name,
                    replicas=1 if w.spec.replicas is None else w.spec.replicas,
                    template_labels=dict(labels),
                    readiness_probe=bool(containers)
                    and all(c.readiness_probe is not None for c in containers),
                    grace_seconds=w.spec.template.spec.termination_grace_period_seconds,
                    serves=any(
                        all(labels.get(k) == v for k, v in sel.items()) for sel in services.get(ns, ())
                    ),
                )
            )
            if kind == "Deployment" and name == "istiod" and containers:
                out.istiod = _tag(containers[0].image or "")
                out.istiod_namespace = ns
            if kind == "Deployment" and containers:
                operator = _istio_operator(name, containers[0].image or "")
                if operator:
                    out.istio_operators.append(f"Deployment {ns}/{name} ({operator})")
    return out


def _read_pdbs(pages: _Pages) -> list[PdbFacts]:
    return [
        PdbFacts(
            namespace=p.metadata.namespace or "",
            name=p.metadata.name or "",
            selector=_selector(p.spec.selector),
            min_available=p.spec.min_available,
            max_unavailable=p.spec.max_unavailable,
            disruptions_allowed=p.status.disruptions_allowed,
            expected_pods=p.status.expected_pods,
            owner=owner_of(
                {
                    "kind": "PodDisruptionBudget",
                    "metadata": {
                        "name": p.metadata.name or "",
                        "namespace": p.metadata.namespace or "",
                        "labels": p.metadata.labels or {},
                        "annotations": p.metadata.annotations or {},
                    },
                }
            ),
        )
        for p in pages("poddisruptionbudgets", "/apis/policy/v1/poddisruptionbudgets", schema.Pdb)
    ]


@dataclass
class _Health:
    """The webhooks, CRDs and certificates the cluster-health checks read, and the VPC CNI's set-up."""

    webhooks: list[WebhookFacts]
    crds: list[CrdFacts]
    certs: list[CertFacts]
    serving: list[ServingCert]
    cni: CniFacts | None


def _read_health(
    reader: CheckReader, pages: _Pages, workloads: _Workloads, service_names: set[str] | None
) -> _Health:
    """What the cluster-health checks read (`service_names`: None when the Services were not read)."""
    gaps = pages.gaps
    certs: list[CertFacts] = []
    #: cert-manager Certificates named by `cert-manager.io/inject-ca-from` → who names them
    injected: dict[str, list[str]] = {}
    webhooks = _webhooks(reader, pages, service_names, gaps, certs, injected)
    crds: list[CrdFacts] = []
    for crd in pages(
        "customresourcedefinitions", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", schema.Crd
    ):
        crds.append(_crd(crd, certs))
        _inject_ca_from(crd.metadata, f"CustomResourceDefinition {crd.metadata.name}", injected)
    serving = _serving_certs(reader, injected, gaps)
    cni = _aws_node(reader, gaps)
    if workloads.istiod:
        certs.extend(_istio_root(reader, workloads.istiod_namespace or "istio-system", gaps))
    return _Health(webhooks=webhooks, crds=crds, certs=certs, serving=serving, cni=cni)


def _kube_proxy(reader: CheckReader, gaps: list[str]) -> str:
    """The kube-proxy DaemonSet's image tag ("" when there is none, or it may not be read: a gap)."""
    try:
        ds = reader.get_json("/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy")
    except ClusterError as exc:
        if exc.status not in (403, 404):
            raise
        if exc.status == 403:
            gaps.append(f"kube-proxy DaemonSet: {exc.user_message}")
        return ""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    ds_containers: list[dict[str, Any]] = spec.get("containers") or []
    return _tag(str(ds_containers[0].get("image", ""))) if ds_containers else ""


def _rooms(
    nodes: Sequence[NodeFacts],
    allocatable: Mapping[str, tuple[int, int, int]],
    rooms: Mapping[str, list[int]],
) -> list[NodeRoom]:
    """Each node's room: what it can hold, what its pods request, what a drain would move."""
    return [
        NodeRoom(
            name=n.name,
            group=n.group,
            schedulable=n.ready and not n.unschedulable,
            allocatable=allocatable.get(n.name, (0, 0, 0)),
            used=tuple(room[_USED_CPU : _USED_PODS + 1]),  # type: ignore[arg-type]
            evict=tuple(room[_EVICT_CPU : _EVICT_PODS + 1]),  # type: ignore[arg-type]
            biggest=(room[_BIG_CPU], room[_BIG_MEM]),
        )
        for n in nodes
        for room in (rooms.get(n.name) or [0] * 8,)
    ]


def _webhooks(
    reader: CheckReader,
    pages: Callable[..., Iterator[Any]],
    service_names: set[str] | None,
    gaps: list[str],
    certs: list[CertFacts],
    injected: dict[str, list[str]],
) -> list[WebhookFacts]:
    out: list[WebhookFacts] = []
    services: dict[str, tuple[bool, int]] = {}
    for kind, plural in (
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ):
        for cfg in pages(
            plural, f"/apis/admissionregistration.k8s.io/v1/{plural}", schema.WebhookConfiguration
        ):
            _inject_ca_from(cfg.metadata, f"{kind} {cfg.metadata.name}", injected)
            for hook in cfg.webhooks or ():
                if hook.client_config.ca_bundle:
                    certs.extend(
                        _bundle(
                            "webhook",
                            f"{kind} {cfg.metadata.name}",
                            f"webhook {hook.name} caBundle",
                            hook.client_config.ca_bundle,
                        )
                    )
                svc = hook.client_config.service
                ref = f"{svc.namespace}/{svc.name}" if svc is not None else ""
                if ref and ref not in services:
                    exists = service_names is None or ref in service_names
                    services[ref] = (exists, _ready_endpoints(reader, ref, gaps) if exists else 0)
                exists, ready = services.get(ref, (True, 1))
                out.append(
                    WebhookFacts(
                        configuration=f"{kind} {cfg.metadata.name}",
                        webhook=hook.name or "",
                        # failurePolicy defaults to Fail in admissionregistration/v1.
                        fail_closed=(hook.failure_policy or "Fail") == "Fail",
                        service=ref,
                        service_exists=exists,
                        ready_endpoints=ready,
                    )
                )
    return out


#: cert-manager's cainjector annotation: "NAMESPACE/NAME" of the Certificate whose CA it injects.
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"
_REF = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _inject_ca_from(meta: schema.Meta, owner: str, injected: dict[str, list[str]]) -> None:
    ref = ((meta.annotations or {}).get(INJECT_CA_FROM) or "").strip()
    if ref:
        injected.setdefault(ref, []).append(owner)


def _serving_certs(
    reader: CheckReader, injected: Mapping[str, list[str]], gaps: list[str]
) -> list[ServingCert]:
    """The cert-manager Certificates the webhooks and CRDs name, one GET each (their status only:
    the bot never reads their Secrets); a 403 is one gap for all of them."""
    out: list[ServingCert] = []
    for ref in sorted(injected):
        users = tuple(injected[ref])
        if not _REF.match(ref):
            out.append(ServingCert(ref=ref[:120], users=users, error="not NAMESPACE/NAME"))
            continue
        namespace, name = ref.split("/", 1)
        try:
            cert = reader.get_json(f"/apis/cert-manager.io/v1/namespaces/{namespace}/certificates/{name}")
        except ClusterError as exc:
            if exc.status == 403:
                gaps.append(f"certificates.cert-manager.io: {exc.user_message}")
                return out
            if exc.status != 404:
                raise
            out.append(ServingCert(ref=ref, users=users, error="no such Certificate"))
            continue
        status = cert.get("status") or {}
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"),
            {},
        )
        out.append(
            ServingCert(
                ref=ref,
                users=users,
                not_after=parse_iso(status.get("notAfter")),
                renewal=parse_iso(status.get("renewalTime")),
                ready=str(ready.get("status") or ""),
                message=str(ready.get("message") or "")[:300],
            )
        )
    return out


def _ready_endpoints(reader: CheckReader, ref: str, gaps: list[str]) -> int:
    """The ready addresses of the Service `ref` ("namespace/name"): 0 when it has no Endpoints;
    when they cannot be read (403), a gap and 1, so the webhook is not reported on a guess."""
    namespace, name = ref.split("/", 1)
    try:
        ep = reader.get_json(f"/api/v1/namespaces/{namespace}/endpoints/{name}")
    except ClusterError as exc:
        if exc.status == 404:
            return 0
        if exc.status == 403:
            gaps.append(f"endpoints {ref}: {exc.user_message}")
            return 1
        raise
    return sum(len(s.get("addresses") or []) for s in ep.get("subsets") or [])


_ISTIO_OPERATOR_IMAGE = re.compile(r"(?:^|/)istio/operator:([^@/]+)")


def _istio_operator(name: str, image: str) -> str:
    """ "image TAG" when a Deployment is the in-cluster Istio operator, else ""."""
    m = _ISTIO_OPERATOR_IMAGE.search(image)
    if m:
        return f"operator {m.group(1)}"
    if name == "istio-operator":
        return f"image {image}" if image else "istio-operator"
    return ""


def _bundle(kind: str, owner: str, where: str, value: str, *, pem: bool = False) -> list[CertFacts]:
    """The certificates of a bundle (base64 of PEM, or PEM), or one entry saying it is unreadable."""
    try:
        infos = read_pem_bundle(value) if pem else read_ca_bundle(value)
    except ValueError as exc:
        return [CertFacts(kind=kind, owner=owner, where=where, error=str(exc))]
    return [
        CertFacts(kind=kind, owner=owner, where=where, subject=i.subject, not_after=i.not_after)
        for i in infos
    ]


def _crd(crd: schema.Crd, certs: list[CertFacts]) -> CrdFacts:
    versions = crd.spec.versions or ()
    conversion = crd.spec.conversion.webhook if crd.spec.conversion is not None else None
    config = conversion.client_config if conversion is not None else None
    name = crd.metadata.name or ""
    if config is not None and config.ca_bundle:
        certs.extend(
            _bundle(
                "conversion",
                f"CustomResourceDefinition {name}",
                "spec.conversion.webhook caBundle",
                config.ca_bundle,
            )
        )
    return CrdFacts(
        name=name,
        versions=tuple(v.name for v in versions),
        served=tuple(v.name for v in versions if v.served),
        storage=next((v.name for v in versions if v.storage), ""),
        stored=tuple(crd.status.stored_versions or ()),
        deprecated=tuple(v.name for v in versions if v.deprecated),
        warnings=tuple(
            (v.name, v.deprecation_warning) for v in versions if v.deprecated and v.deprecation_warning
        ),
    )


def _aws_node(reader: CheckReader, gaps: list[str]) -> CniFacts | None:
    """The VPC CNI's settings from the aws-node DaemonSet; None without it."""
    try:
        # A list by name: a cluster without the VPC CNI answers an empty list, not a 404 to log.
        listed = reader.get_json(
            "/apis/apps/v1/namespaces/kube-system/daemonsets", {"fieldSelector": "metadata.name=aws-node"}
        )
    except ClusterError as exc:
        if exc.status == 403:
            gaps.append(f"aws-node DaemonSet: {exc.user_message}")
        elif exc.status != 404:
            raise
        return None
    items: list[dict[str, Any]] = listed.get("items") or []
    if not items:
        return None
    spec = ((items[0].get("spec") or {}).get("template") or {}).get("spec") or {}
    containers: list[dict[str, Any]] = spec.get("containers") or []
    env = {
        str(e.get("name")): str(e.get("value", ""))
        for c in containers[:1]
        for e in c.get("env") or []
        if e.get("name") in CNI_ENV and "value" in e
    }
    return CniFacts(env=env)


def _istio_root(reader: CheckReader, namespace: str, gaps: list[str]) -> list[CertFacts]:
    """The root certificate istiod publishes in its namespace's istio-ca-root-cert ConfigMap
    (the bot reads that ConfigMap by name; never the istio-ca-secret)."""
    owner = f"ConfigMap {namespace}/{ISTIO_ROOT_CONFIGMAP}"
    try:
        cm = reader.get_json(f"/api/v1/namespaces/{namespace}/configmaps/{ISTIO_ROOT_CONFIGMAP}")
    except ClusterError as exc:
        if exc.status == 403:
            gaps.append(f"{owner}: {exc.user_message}")
        elif exc.status != 404:
            raise
        return []
    text = str((cm.get("data") or {}).get(ISTIO_ROOT_KEY) or "")
    if not text:
        return [
            CertFacts(kind="istio-root", owner=owner, where=f"data.{ISTIO_ROOT_KEY}", error="no certificate")
        ]
    return _bundle("istio-root", owner, f"data.{ISTIO_ROOT_KEY}", text, pem=True)
