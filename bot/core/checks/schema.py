"""The wire schema of the pre-flight checks: only the fields of each object that a check reads.

The kube adapter decodes list pages straight into these structs (see `bot/core/snapshots/schema.py`
for why msgspec, and the conventions: camel case on the wire, `X | None = None` for what Go may
omit, `gc=False` and tuples so a page of 500 pods adds nothing for the collector to walk). Of a
pod's labels and annotations only the keys read are decoded (`pod_schema`: the checks' and the
known-issue rules'); the gatherer folds each page into slim records and drops it, so memory stays
bounded at 150,000 pods.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar, cast

import msgspec

from bot.core.kube.wire import Container as WireContainer
from bot.core.kube.wire import (
    Controller,
    InvolvedObject,
    NodeSpec,
    PdbStatus,
    Present,
    Toleration,
    Volume,
    Wire,
)
from bot.core.kube.wire import NodeStatus as SharedNodeStatus
from bot.errors import ClusterError


class Meta(Wire):
    name: str | None = None
    namespace: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: tuple[Controller, ...] | None = None


# ----- pods ------------------------------------------------------------------------------------
# Every pod is decoded, so a pod's struct holds only what the checks read of every pod; of its
# labels and annotations, only the keys read (a dict of each, built for every one of 150,000 pods,
# was a third of the decoding). `pod_schema` adds the keys the known-issue rules name.


class PodLabels(Wire):
    """The labels read of every pod (`pod_schema` adds the rules' keys)."""

    pod_template_hash: str | None = msgspec.field(default=None, name="pod-template-hash")


class PodAnnotations(Wire):
    """The annotations read of every pod (`pod_schema` adds the rules' keys)."""

    safe_to_evict: str | None = msgspec.field(
        default=None, name="cluster-autoscaler.kubernetes.io/safe-to-evict"
    )
    config_mirror: str | None = msgspec.field(default=None, name="kubernetes.io/config.mirror")


class PodMeta(Wire):
    name: str | None = None
    namespace: str | None = None
    deletion_timestamp: str | None = None
    labels: PodLabels | None = None
    annotations: PodAnnotations | None = None
    owner_references: tuple[Controller, ...] | None = None


class Container(WireContainer):
    readiness_probe: Present | None = None


class Requests(Wire):
    cpu: str | None = None
    memory: str | None = None


class Resources(Wire):
    requests: Requests | None = None


class PodContainer(WireContainer):
    #: the requests, for the room a drain needs (`cluster_health.check_capacity`)
    resources: Resources | None = None


class PodSpec(Wire):
    node_name: str | None = None
    #: The JSON array as it came, decoded by `tolerations` where a rule may read it and only where
    #: it differs from the last pod's (the pods of a workload share theirs): building every pod's
    #: cost 20 ms of 150,000 pods' decoding. A view of the page's buffer, as `container_statuses`.
    tolerations: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    containers: tuple[PodContainer, ...] | None = None
    volumes: tuple[Volume, ...] | None = None
    #: The JSON array as it came, decoded by `init_containers` only where the containers are read
    #: (which of them are sidecars, for kubectl's READY count).
    init_containers: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class StateDetail(Wire):
    reason: str | None = None


class ContainerState(Wire):
    waiting: StateDetail | None = None
    terminated: StateDetail | None = None


class ContainerStatus(Wire):
    name: str | None = None
    image: str | None = None
    ready: bool | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class PodCondition(Wire):
    type: str | None = None
    status: str | None = None


class PodStatus(Wire):
    phase: str | None = None
    reason: str | None = None
    #: The JSON array as it came, read by `pod_ready`.
    conditions: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    #: The JSON array as it came, decoded by `container_statuses` only for the few pods whose
    #: containers something reads (an unhealthy pod, a pod a rule may match or whose log a rule
    #: may read): building every pod's statuses was a sixth of the pods' decoding. A view of the
    #: page's buffer: read it while the page is being reduced, not after.
    container_statuses: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    #: As `container_statuses`, for the init containers (sidecars among them).
    init_container_statuses: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class InitContainer(Wire):
    name: str | None = None
    restart_policy: str | None = None


class Pod(Wire):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


_Item = TypeVar("_Item")
_STATUSES = msgspec.json.Decoder(tuple[ContainerStatus, ...] | None)
_CONDITIONS = msgspec.json.Decoder(tuple[PodCondition, ...] | None)
_TOLERATIONS = msgspec.json.Decoder(tuple[Toleration, ...] | None)
_INITS = msgspec.json.Decoder(tuple[InitContainer, ...] | None)
#: A Ready condition that is True, as the API server writes it (its fields in the Go struct's
#: order). A JSON string never holds an unescaped quote, so the bytes found are a condition's.
READY_TRUE = re.compile(rb'"type":"Ready","status":"True"')


def pod_ready(status: PodStatus) -> bool:
    """Whether the pod's Ready condition is True: the bytes as the API server writes them, else
    the conditions decoded (another writer's order, or not Ready)."""
    return READY_TRUE.search(status.conditions) is not None or ready_decoded(status)


def ready_decoded(status: PodStatus) -> bool:
    """`pod_ready` from the decoded conditions alone (where the bytes were searched already); a
    field of an unexpected type is a ClusterError, as it would have been where the page was decoded."""
    conditions = _decoded(_CONDITIONS, status.conditions, "status.conditions")
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def container_statuses(status: PodStatus) -> tuple[ContainerStatus, ...]:
    """A pod's container statuses, decoded from the page's bytes now; a field of an unexpected
    type is a ClusterError, as it would have been where the page was decoded."""
    return _decoded(_STATUSES, status.container_statuses, "status.containerStatuses")


def init_container_statuses(status: PodStatus) -> tuple[ContainerStatus, ...]:
    """A pod's init container statuses, decoded now (as `container_statuses`)."""
    return _decoded(_STATUSES, status.init_container_statuses, "status.initContainerStatuses")


def init_containers(spec: PodSpec) -> tuple[InitContainer, ...]:
    """A pod's init containers (name and restartPolicy), decoded now (as `container_statuses`)."""
    return _decoded(_INITS, spec.init_containers, "spec.initContainers")


def tolerations(spec: PodSpec) -> tuple[Toleration, ...]:
    """A pod's tolerations, decoded from the page's bytes now (as `container_statuses`)."""
    return _decoded(_TOLERATIONS, spec.tolerations, "spec.tolerations")


def _decoded(
    decoder: msgspec.json.Decoder[tuple[_Item, ...] | None], raw: msgspec.Raw, field: str
) -> tuple[_Item, ...]:
    """A field kept as the page's bytes, decoded now; () if absent or null."""
    if not raw:
        return ()
    try:
        return decoder.decode(raw) or ()
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ClusterError(f"a pod's {field} is not what was expected ({exc})") from None


@dataclass(frozen=True)
class PodSchema:
    """`Pod` with labels and annotations that also hold the keys some rules name."""

    pod: type[Pod]
    #: (key, attribute) of every label key the rules name, on `pod.metadata.labels`
    labels: tuple[tuple[str, str], ...]
    #: (key, attribute) of every annotation key the rules name, on `pod.metadata.annotations`
    annotations: tuple[tuple[str, str], ...]


@cache  # one set of types per set of keys: the kube adapter keeps a decoder per type
def pod_schema(label_keys: frozenset[str], annotation_keys: frozenset[str]) -> PodSchema:
    labels, label_type = _keyed(PodLabels, label_keys)
    annotations, annotation_type = _keyed(PodAnnotations, annotation_keys)
    if not labels and not annotations:
        return PodSchema(pod=Pod, labels=(), annotations=())
    meta = msgspec.defstruct(
        "PodMeta",
        [("labels", label_type | None, None), ("annotations", annotation_type | None, None)],
        bases=(PodMeta,),
    )
    pod = msgspec.defstruct("Pod", [("metadata", meta, msgspec.field(default_factory=meta))], bases=(Pod,))
    return PodSchema(pod=cast(type[Pod], pod), labels=labels, annotations=annotations)


def _keyed(base: type[msgspec.Struct], keys: frozenset[str]) -> tuple[tuple[tuple[str, str], ...], Any]:
    """`base` with a field for each of `keys` it lacks, and (key, attribute) of every key."""
    have = dict(zip(base.__struct_encode_fields__, base.__struct_fields__, strict=True))
    extra = {key: f"key{i}" for i, key in enumerate(sorted(keys - have.keys()))}
    pairs = tuple((key, have.get(key) or extra[key]) for key in sorted(keys))
    if not extra:
        return pairs, base
    return pairs, msgspec.defstruct(
        base.__name__,
        [(attr, str | None, None) for attr in extra.values()],
        bases=(base,),
        rename={attr: key for key, attr in extra.items()},
    )


# ----- nodes -----------------------------------------------------------------------------------


class Allocatable(Wire):
    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None


class NodeStatus(SharedNodeStatus):
    """The shared node status, plus what the drain's room check reads (`allocatable`)."""

    allocatable: Allocatable | None = None


class Node(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# ----- workloads ---------------------------------------------------------------------------------


class Requirement(Wire):
    key: str = ""
    operator: str = ""
    values: tuple[str, ...] | None = None


class Selector(Wire):
    match_labels: dict[str, str] | None = None
    match_expressions: tuple[Requirement, ...] | None = None


class TemplateSpec(Wire):
    containers: tuple[Container, ...] | None = None
    termination_grace_period_seconds: int | None = None


class TemplateMeta(Wire):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Template(Wire):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: TemplateSpec = msgspec.field(default_factory=TemplateSpec)


class WorkloadSpec(Wire):
    replicas: int | None = None
    selector: Selector | None = None
    template: Template = msgspec.field(default_factory=Template)


class Workload(Wire):
    """A Deployment or a StatefulSet (a DaemonSet runs one pod per node: no replica count)."""

    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


# ----- PodDisruptionBudgets ---------------------------------------------------------------------


class PdbSpec(Wire):
    selector: Selector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class Pdb(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: PdbSpec = msgspec.field(default_factory=PdbSpec)
    status: PdbStatus = msgspec.field(default_factory=PdbStatus)


# ----- admission webhooks and their services ------------------------------------------------------


class ServiceRef(Wire):
    namespace: str | None = None
    name: str | None = None


class ClientConfig(Wire):
    service: ServiceRef | None = None
    url: str | None = None
    ca_bundle: str | None = None


class Webhook(Wire):
    name: str | None = None
    failure_policy: str | None = None
    client_config: ClientConfig = msgspec.field(default_factory=ClientConfig)


class WebhookConfiguration(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    webhooks: tuple[Webhook, ...] | None = None


# ----- custom resource definitions -----------------------------------------------------------------


class CrdVersion(Wire):
    name: str = ""
    served: bool = False
    storage: bool = False
    #: The CRD's author announced the version's removal (apiextensions/v1 `deprecated`).
    deprecated: bool = False
    deprecation_warning: str | None = None


class CrdWebhook(Wire):
    client_config: ClientConfig | None = None


class CrdConversion(Wire):
    webhook: CrdWebhook | None = None


class CrdSpec(Wire):
    group: str = ""
    versions: tuple[CrdVersion, ...] | None = None
    conversion: CrdConversion | None = None


class CrdStatus(Wire):
    stored_versions: tuple[str, ...] | None = None


class Crd(Wire):
    """A CustomResourceDefinition: its versions (not their schemas, skipped) and what is stored."""

    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: CrdSpec = msgspec.field(default_factory=CrdSpec)
    status: CrdStatus = msgspec.field(default_factory=CrdStatus)


class Address(Wire):
    ip: str | None = None


class Subset(Wire):
    addresses: tuple[Address, ...] | None = None
    not_ready_addresses: tuple[Address, ...] | None = None


class Endpoints(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    subsets: tuple[Subset, ...] | None = None


class ServiceSpec(Wire):
    selector: dict[str, str] | None = None


class Service(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class Named(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)


# ----- events ------------------------------------------------------------------------------------


class Event(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    count: int | None = None
    involved_object: InvolvedObject | None = None
