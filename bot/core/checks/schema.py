"""The wire schema of the pre-flight checks: only the fields of each object that a check reads.

The kube adapter decodes list pages straight into these structs (see `bot/core/snapshots/schema.py`
for why msgspec, and the conventions: camel case on the wire, `X | None = None` for what Go may
omit, `gc=False` and tuples so a page of 500 pods adds nothing for the collector to walk). A pod
keeps its labels and annotations here because the known-issue rules match on them; the gatherer
folds each page into slim records and drops it, so memory stays bounded at 150,000 pods.
"""

from __future__ import annotations

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


class Container(_Wire):
    name: str | None = None
    image: str | None = None
    readiness_probe: Present | None = None


class Present(_Wire):
    """Any object whose presence is all that is read: its fields are skipped, not built."""


class Volume(_Wire):
    name: str | None = None
    empty_dir: Present | None = None
    host_path: Present | None = None


class Toleration(_Wire):
    key: str | None = None
    operator: str | None = None
    effect: str | None = None


class PodSpec(_Wire):
    node_name: str | None = None
    tolerations: tuple[Toleration, ...] | None = None
    containers: tuple[Container, ...] | None = None
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
    restart_count: int | None = None
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
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


# ----- nodes -----------------------------------------------------------------------------------


class NodeSpec(_Wire):
    unschedulable: bool | None = None


class NodeCondition(_Wire):
    type: str | None = None
    status: str | None = None


class NodeInfo(_Wire):
    kubelet_version: str = ""


class NodeStatus(_Wire):
    node_info: NodeInfo | None = None
    conditions: tuple[NodeCondition, ...] | None = None


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


class Webhook(_Wire):
    name: str | None = None
    failure_policy: str | None = None
    client_config: ClientConfig = msgspec.field(default_factory=ClientConfig)


class WebhookConfiguration(_Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    webhooks: tuple[Webhook, ...] | None = None


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
