"""The msgspec leaves every wire schema is built of, and the pod, node and event structs that the
watches and the jobs both read.

Why msgspec, and the conventions, are in `bot/core/snapshots/schema.py`: names in snake case on the
Python side, camel case on the wire; pointers, slices and maps the server may leave out are
`X | None = None`; structs hold no cycles, so they are not tracked by the garbage collector. A
feature's schema (`bot.core.{checks,snapshots,watches}.schema`) declares only what it alone reads
and builds the rest from here.

The `W…` structs are objects as a watch reads them (the status model, `bot.core.kube.objects`) and
as the jobs read the pods they evict or restart: ObjectMeta with `resourceVersion`, which the
adapter tracks.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class Wire(msgspec.Struct, rename="camel", gc=False):
    """Python names in snake case, the wire's in camel case (`node_name` is `nodeName`)."""


class Pruned(Wire, omit_defaults=True):
    """Raw JSON pruned to the declared fields: `to_builtins` leaves out what the server left out."""


# ----- shared leaves -----------------------------------------------------------------------------


class Present(Wire):
    """Any object whose presence is all that is read: its fields are skipped, not built."""


class NodeSpec(Wire):
    unschedulable: bool | None = None


class NodeCondition(Wire):
    type: str | None = None
    status: str | None = None


class NodeInfo(Wire):
    kubelet_version: str = ""


class NodeStatus(Wire):
    node_info: NodeInfo | None = None
    conditions: tuple[NodeCondition, ...] | None = None


class Container(Wire):
    """A container of a pod's spec: its name and image (a schema adds what else it reads)."""

    name: str | None = None
    image: str | None = None


class Volume(Wire):
    """Only whether a volume is one of the kinds a drain loses (emptyDir, hostPath)."""

    # Present, not a dict: an emptyDir's fields are skipped rather than built, 150,000 times.
    empty_dir: Present | None = None
    host_path: Present | None = None


class Controller(Wire):
    """An owner reference as the checks and the snapshot read it: who controls the object (the
    watch's `OwnerRef` adds its uid)."""

    kind: str | None = None
    name: str | None = None
    controller: bool | None = None


class Waiting(Wire):
    reason: str | None = None


class Terminated(Wire):
    reason: str | None = None
    exit_code: int | None = None


class ContainerState(Wire):
    waiting: Waiting | None = None
    terminated: Terminated | None = None


class Toleration(Wire):
    key: str | None = None
    operator: str | None = None
    effect: str | None = None


class InvolvedObject(Wire):
    namespace: str | None = None
    kind: str | None = None
    name: str | None = None


class PdbStatus(Wire):
    disruptions_allowed: int | None = None
    current_healthy: int | None = None
    desired_healthy: int | None = None
    expected_pods: int | None = None


class RollingUpdate(Pruned):
    partition: Any = UNSET


class Strategy(Pruned):
    type: Any = UNSET
    rolling_update: RollingUpdate | UnsetType | None = UNSET


class WorkloadCounts(Pruned):
    """A workload's status as the rollout verdict reads it (`bot/core/rollout.py`): its counts and
    revisions. A schema adds the `conditions` it reads."""

    observed_generation: Any = UNSET
    replicas: Any = UNSET
    updated_replicas: Any = UNSET
    ready_replicas: Any = UNSET
    available_replicas: Any = UNSET
    desired_number_scheduled: Any = UNSET
    updated_number_scheduled: Any = UNSET
    number_available: Any = UNSET
    number_ready: Any = UNSET
    update_revision: Any = UNSET
    current_revision: Any = UNSET


# ----- metadata ----------------------------------------------------------------------------------


class OwnerRef(Wire):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None


class WMeta(Wire):
    """ObjectMeta, reduced to what the watch reads (and `resourceVersion`, which the adapter tracks)."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: tuple[OwnerRef, ...] | None = None


# ----- nodes -------------------------------------------------------------------------------------


class WNode(Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# ----- pods --------------------------------------------------------------------------------------


class WContainerStatus(Wire):
    # `name`, `image` and `last_state` are read only for the known-issue rules (unhealthy pods).
    name: str = ""
    image: str = ""
    ready: bool | None = None
    restart_count: int | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class WPodCondition(Wire):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    last_transition_time: str | None = None  # the Ready condition's: since when a pod is not ready


class WInitContainer(Wire):
    # Only what tells a sidecar (restartPolicy: Always) from an init container that runs to its end.
    name: str = ""
    restart_policy: str | None = None


class WPodSpec(Wire):
    node_name: str | None = None
    init_containers: tuple[WInitContainer, ...] | None = None
    tolerations: tuple[Toleration, ...] | None = None  # for the rules: "tolerates every taint"


class WPodStatus(Wire):
    phase: str | None = None
    reason: str | None = None
    conditions: tuple[WPodCondition, ...] | None = None
    init_container_statuses: tuple[WContainerStatus, ...] | None = None
    container_statuses: tuple[WContainerStatus, ...] | None = None


class WPod(Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    spec: WPodSpec = msgspec.field(default_factory=WPodSpec)
    status: WPodStatus = msgspec.field(default_factory=WPodStatus)


# ----- Warning events ----------------------------------------------------------------------------


class WInvolvedObject(Wire):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class WEvent(Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None
    involved_object: WInvolvedObject | None = None
    last_timestamp: str | None = None
    event_time: str | None = None
