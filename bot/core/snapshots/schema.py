"""The wire schema of a snapshot: only the fields of each Kubernetes object that the projection reads.

The kube adapter decodes list pages straight into these types with `msgspec`
(`msgspec.json.Decoder(type=...)`): a schema-directed decoder written in C that builds only the
declared fields and skips everything else in the JSON without building it. A pod is about 5 KB of
JSON of which the snapshot keeps a dozen values; `json.loads` builds every dict, list and string of
those 5 KB under the interpreter lock and the projection then throws almost all of it away. Decoding
into these structs is about ten times faster and allocates only what is kept, so a 150,000-pod
snapshot runs near the speed of the wire, in bounded memory, and leaves the interpreter free for
the threads that must answer Slack. msgspec was chosen over orjson (fast, but still builds every
object of the page) and pydantic (validates, but is slower and heavier per object) because skipping
undeclared fields is what it does by design; its structs are plain data (no I/O, no behaviour), so
the core may use them as it uses dataclasses. The `kubernetes` package stays in the adapter.

Conventions, from how the API server serializes Go types:
- strings and numbers that Go always writes default to their zero value;
- pointers, slices and maps may be null or missing, so they are `X | None = None`;
- structs are not tracked by the garbage collector (`gc=False`: they hold no cycles) and slices are
  tuples, which it stops tracking too: a page of 500 pods then adds nothing for a collection to
  walk, and full collections, which hold the interpreter lock, stay rare and short;
- workloads are read by the rollout verdict (shared with the live rollout watch, on raw JSON), so
  their fields default to `UNSET`: `msgspec.to_builtins` then gives back exactly the raw JSON
  pruned to the declared fields — "missing" and "null" stay distinct, as the verdict expects.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from bot.core.kube.wire import (
    Container,
    ContainerState,
    Controller,
    InvolvedObject,
    NodeCondition,
    PdbStatus,
    Pruned,
    Strategy,
    Wire,
    WorkloadCounts,
)
from bot.core.kube.wire import Volume as WireVolume

# ----- shared pieces (the leaves all schemas share are `bot.core.kube.wire`'s) ------------------


class PodMeta(Wire):
    """A pod's ObjectMeta: `Meta` less the labels, which no pod record keeps (at 150,000 pods their
    dicts were a twentieth of the decode)."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    owner_references: tuple[Controller, ...] | None = None


class Meta(PodMeta):
    """ObjectMeta, reduced to what snapshots read: a pod's, and the labels."""

    labels: dict[str, str] | None = None


class Named(Wire):
    """Any object of which only the metadata is read (namespaces, ReplicaSets)."""

    metadata: Meta = msgspec.field(default_factory=Meta)


# ----- pods ------------------------------------------------------------------------------------


class ContainerStatus(Wire):
    name: str | None = None
    ready: bool | None = None
    restart_count: int | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class Volume(WireVolume):
    """A volume by name, and whether it is one of the kinds a drain loses (a twin of the cluster
    keeps those)."""

    name: str | None = None


class PodSpec(Wire):
    node_name: str | None = None
    containers: tuple[Container, ...] | None = None
    init_containers: tuple[Container, ...] | None = None
    volumes: tuple[Volume, ...] | None = None


class PodStatus(Wire):
    phase: str | None = None
    reason: str | None = None
    pod_ip: str | None = msgspec.field(default=None, name="podIP")
    init_container_statuses: tuple[ContainerStatus, ...] | None = None
    container_statuses: tuple[ContainerStatus, ...] | None = None


class Pod(Wire):
    metadata: PodMeta = msgspec.field(default_factory=PodMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


# ----- nodes -----------------------------------------------------------------------------------


class Taint(Wire):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class NodeSpec(Wire):
    unschedulable: bool | None = None
    taints: tuple[Taint, ...] | None = None


class NodeAddress(Wire):
    type: str | None = None
    address: str | None = None


class NodeInfo(Wire):
    kubelet_version: str = ""
    os_image: str = ""
    kernel_version: str = ""
    container_runtime_version: str = ""
    boot_id: str = msgspec.field(default="", name="bootID")


class NodeStatus(Wire):
    node_info: NodeInfo | None = None
    conditions: tuple[NodeCondition, ...] | None = None
    addresses: tuple[NodeAddress, ...] | None = None
    allocatable: dict[str, Any] | None = None


class Node(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# ----- workloads (Deployment, DaemonSet, StatefulSet): UNSET-pruned raw JSON, see above -------


class WMeta(Pruned):
    name: Any = UNSET
    namespace: Any = UNSET
    generation: Any = UNSET


class WContainer(Pruned):
    name: Any = UNSET
    image: Any = UNSET
    env: Any = UNSET
    resources: Any = UNSET
    readiness_probe: Any = UNSET


class WPodSpec(Pruned):
    containers: list[WContainer] | UnsetType | None = UNSET
    # What a twin of the cluster keeps of the pod template (`projection.template_record`).
    init_containers: list[WContainer] | UnsetType | None = UNSET
    node_selector: Any = UNSET
    affinity: Any = UNSET
    tolerations: Any = UNSET
    volumes: Any = UNSET
    termination_grace_period_seconds: Any = UNSET
    scheduler_name: Any = UNSET


class WTemplateMeta(Pruned):
    labels: Any = UNSET
    annotations: Any = UNSET


class WTemplate(Pruned):
    metadata: WTemplateMeta | UnsetType | None = UNSET
    spec: WPodSpec | UnsetType | None = UNSET


class WSpec(Pruned):
    replicas: Any = UNSET
    selector: Any = UNSET
    update_strategy: Strategy | UnsetType | None = UNSET
    template: WTemplate | UnsetType | None = UNSET


class WCondition(Pruned):
    type: Any = UNSET
    reason: Any = UNSET


class WStatus(WorkloadCounts):
    conditions: list[WCondition] | UnsetType | None = UNSET


class Workload(Pruned):
    metadata: WMeta | UnsetType | None = UNSET
    spec: WSpec | UnsetType | None = UNSET
    status: WStatus | UnsetType | None = UNSET


# ----- PodDisruptionBudgets and events ---------------------------------------------------------


class Pdb(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    status: PdbStatus = msgspec.field(default_factory=PdbStatus)


class Event(Wire):
    metadata: Meta = msgspec.field(default_factory=Meta)
    type: str | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
    involved_object: InvolvedObject | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None


# ----- what the checks read besides (kept for a twin of the cluster: `projection.project_object`) --


class Loose(Pruned):
    """Any object, its parts as the server wrote them (pruned to these parts by `project_object`)."""

    metadata: Any = UNSET
    spec: Any = UNSET
    status: Any = UNSET
    webhooks: Any = UNSET
    data: Any = UNSET
