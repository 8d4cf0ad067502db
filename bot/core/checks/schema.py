"""The wire schema of the pre-flight checks: only the fields of each object that a check reads.

The kube adapter decodes list pages straight into these structs (see `bot/core/snapshots/schema.py`
for why msgspec, and the conventions: camel case on the wire, `X | None = None` for what Go may
omit, `gc=False` and tuples so a page of 500 pods adds nothing for the collector to walk). Of a
pod's labels and annotations only the keys read are decoded (`pod_schema`: the checks' and the
known-issue rules'); the gatherer folds each page into slim records and drops it, so memory stays
bounded at 150,000 pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import msgspec


class _Wire(msgspec.Struct, rename="camel", gc=False):
    """Python names in snake case, the wire's in camel case."""


class OwnerRef(_Wire):
    kind: str | None = None
    name: str | None = None
    controller: bool | None = None


class Meta(_Wire):
    name: str | None = None
    namespace: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: tuple[OwnerRef, ...] | None = None


# ----- pods ------------------------------------------------------------------------------------
# Every pod is decoded, so a pod's struct holds only what the checks read of every pod; of its
# labels and annotations, only the keys read (a dict of each, built for every one of 150,000 pods,
# was a third of the decoding). `pod_schema` adds the keys the known-issue rules name.


class PodLabels(_Wire):
    """The labels read of every pod (`pod_schema` adds the rules' keys)."""

    pod_template_hash: str | None = msgspec.field(default=None, name="pod-template-hash")


class PodAnnotations(_Wire):
    """The annotations read of every pod (`pod_schema` adds the rules' keys)."""

    safe_to_evict: str | None = msgspec.field(
        default=None, name="cluster-autoscaler.kubernetes.io/safe-to-evict"
    )
    config_mirror: str | None = msgspec.field(default=None, name="kubernetes.io/config.mirror")


class PodMeta(_Wire):
    name: str | None = None
    namespace: str | None = None
    deletion_timestamp: str | None = None
    labels: PodLabels | None = None
    annotations: PodAnnotations | None = None
    owner_references: tuple[OwnerRef, ...] | None = None


class Container(_Wire):
    name: str | None = None
    image: str | None = None
    readiness_probe: Present | None = None


class Present(_Wire):
    """Any object whose presence is all that is read: its fields are skipped, not built."""


class Requests(_Wire):
    cpu: str | None = None
    memory: str | None = None


class Resources(_Wire):
    requests: Requests | None = None


class PodContainer(_Wire):
    name: str | None = None
    image: str | None = None
    #: the requests, for the room a drain needs (`cluster_health.check_capacity`)
    resources: Resources | None = None


class Volume(_Wire):
    empty_dir: Present | None = None
    host_path: Present | None = None


class Toleration(_Wire):
    key: str | None = None
    operator: str | None = None
    effect: str | None = None


class PodSpec(_Wire):
    node_name: str | None = None
    tolerations: tuple[Toleration, ...] | None = None
    containers: tuple[PodContainer, ...] | None = None
    volumes: tuple[Volume, ...] | None = None


class StateDetail(_Wire):
    reason: str | None = None


class ContainerState(_Wire):
    waiting: StateDetail | None = None
    terminated: StateDetail | None = None


class ContainerStatus(_Wire):
    name: str | None = None
    image: str | None = None
    ready: bool | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class PodCondition(_Wire):
    type: str | None = None
    status: str | None = None


class PodStatus(_Wire):
    phase: str | None = None
    reason: str | None = None
    conditions: tuple[PodCondition, ...] | None = None
    container_statuses: tuple[ContainerStatus, ...] | None = None


class Pod(_Wire):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


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


class NodeSpec(_Wire):
    unschedulable: bool | None = None


class NodeCondition(_Wire):
    type: str | None = None
    status: str | None = None


class NodeInfo(_Wire):
    kubelet_version: str = ""


class Allocatable(_Wire):
    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None


class NodeStatus(_Wire):
    node_info: NodeInfo | None = None
    conditions: tuple[NodeCondition, ...] | None = None
    allocatable: Allocatable | None = None


class Node(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# ----- workloads ---------------------------------------------------------------------------------


class Requirement(_Wire):
    key: str = ""
    operator: str = ""
    values: tuple[str, ...] | None = None


class Selector(_Wire):
    match_labels: dict[str, str] | None = None
    match_expressions: tuple[Requirement, ...] | None = None


class TemplateSpec(_Wire):
    containers: tuple[Container, ...] | None = None
    termination_grace_period_seconds: int | None = None


class TemplateMeta(_Wire):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Template(_Wire):
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: TemplateSpec = msgspec.field(default_factory=TemplateSpec)


class WorkloadSpec(_Wire):
    replicas: int | None = None
    selector: Selector | None = None
    template: Template = msgspec.field(default_factory=Template)


class Workload(_Wire):
    """A Deployment or a StatefulSet (a DaemonSet runs one pod per node: no replica count)."""

    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


# ----- PodDisruptionBudgets ---------------------------------------------------------------------


class PdbSpec(_Wire):
    selector: Selector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PdbStatus(_Wire):
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class Pdb(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: PdbSpec = msgspec.field(default_factory=PdbSpec)
    status: PdbStatus = msgspec.field(default_factory=PdbStatus)


# ----- admission webhooks and their services ------------------------------------------------------


class ServiceRef(_Wire):
    namespace: str | None = None
    name: str | None = None


class ClientConfig(_Wire):
    service: ServiceRef | None = None
    url: str | None = None
    ca_bundle: str | None = None


class Webhook(_Wire):
    name: str | None = None
    failure_policy: str | None = None
    client_config: ClientConfig = msgspec.field(default_factory=ClientConfig)


class WebhookConfiguration(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    webhooks: tuple[Webhook, ...] | None = None


# ----- custom resource definitions -----------------------------------------------------------------


class CrdVersion(_Wire):
    name: str = ""
    served: bool = False
    storage: bool = False


class CrdWebhook(_Wire):
    client_config: ClientConfig | None = None


class CrdConversion(_Wire):
    webhook: CrdWebhook | None = None


class CrdSpec(_Wire):
    group: str = ""
    versions: tuple[CrdVersion, ...] | None = None
    conversion: CrdConversion | None = None


class CrdStatus(_Wire):
    stored_versions: tuple[str, ...] | None = None


class Crd(_Wire):
    """A CustomResourceDefinition: its versions (not their schemas, skipped) and what is stored."""

    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: CrdSpec = msgspec.field(default_factory=CrdSpec)
    status: CrdStatus = msgspec.field(default_factory=CrdStatus)


class Address(_Wire):
    ip: str | None = None


class Subset(_Wire):
    addresses: tuple[Address, ...] | None = None
    not_ready_addresses: tuple[Address, ...] | None = None


class Endpoints(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    subsets: tuple[Subset, ...] | None = None


class ServiceSpec(_Wire):
    selector: dict[str, str] | None = None


class Service(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class Named(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)


# ----- events ------------------------------------------------------------------------------------


class InvolvedObject(_Wire):
    namespace: str | None = None
    kind: str | None = None
    name: str | None = None


class Event(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    count: int | None = None
    involved_object: InvolvedObject | None = None
