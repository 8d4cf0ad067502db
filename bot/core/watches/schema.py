"""The wire schema of a watch: only the fields of each watched kind that the status model reads.

The kube adapter decodes list pages and watch events straight into these structs
(`item_type=...`), as it does for snapshots (see `bot/core/snapshots/schema.py` for why msgspec):
a pod event is about 5 KB of JSON of which the watch keeps a handful of values, and a node-group
replacement on a large cluster streams a hundred thousand of them. Everything undeclared is skipped
in C without being built.

Conventions (as in the snapshot schema): names in snake case on the Python side, camel case on the
wire; pointers, slices and maps that the server may leave out are `X | None = None`; structs hold
no cycles, so they are not tracked by the garbage collector. Workloads are read by the rollout
verdict (`bot/core/rollout.py`, on raw JSON), so their spec and status default to `UNSET`:
`msgspec.to_builtins` then gives back exactly the server's JSON pruned to the declared fields, with
"missing" and "null" still distinct, as the verdict expects.

`KINDS` names each watched kind's list path and struct; the driver adds `fieldSelector=type=Warning`
for events.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class _Wire(msgspec.Struct, rename="camel", gc=False):
    """Python names in snake case, the wire's in camel case (`node_name` is `nodeName`)."""


class _Pruned(_Wire, omit_defaults=True):
    """Raw JSON pruned to the declared fields: `to_builtins` leaves out what the server left out."""


# ----- metadata --------------------------------------------------------------------------------


class OwnerRef(_Wire):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None


class WMeta(_Wire):
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


class WWorkloadMeta(_Pruned):
    """A workload's metadata: concrete defaults, so `to_builtins` leaves out what is empty."""

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


# ----- nodes -----------------------------------------------------------------------------------


class WNodeSpec(_Wire):
    unschedulable: bool | None = None


class WNodeCondition(_Wire):
    type: str | None = None
    status: str | None = None


class WNodeInfo(_Wire):
    kubelet_version: str = ""


class WNodeStatus(_Wire):
    node_info: WNodeInfo | None = None
    conditions: tuple[WNodeCondition, ...] | None = None


class WNode(_Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    spec: WNodeSpec = msgspec.field(default_factory=WNodeSpec)
    status: WNodeStatus = msgspec.field(default_factory=WNodeStatus)


# ----- pods ------------------------------------------------------------------------------------


class WWaiting(_Wire):
    reason: str | None = None


class WTerminated(_Wire):
    reason: str | None = None
    exit_code: int | None = None


class WContainerState(_Wire):
    waiting: WWaiting | None = None
    terminated: WTerminated | None = None


class WContainerStatus(_Wire):
    # `name`, `image` and `last_state` are read only for the known-issue rules (unhealthy pods).
    name: str = ""
    image: str = ""
    ready: bool | None = None
    restart_count: int | None = None
    state: WContainerState | None = None
    last_state: WContainerState | None = None


class WPodCondition(_Wire):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    last_transition_time: str | None = None  # the Ready condition's: since when a pod is not ready


class WToleration(_Wire):
    key: str | None = None
    operator: str | None = None
    effect: str | None = None


class WPodSpec(_Wire):
    node_name: str | None = None
    tolerations: tuple[WToleration, ...] | None = None  # for the rules: "tolerates every taint"


class WPodStatus(_Wire):
    phase: str | None = None
    reason: str | None = None
    conditions: tuple[WPodCondition, ...] | None = None
    init_container_statuses: tuple[WContainerStatus, ...] | None = None
    container_statuses: tuple[WContainerStatus, ...] | None = None


class WPod(_Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    spec: WPodSpec = msgspec.field(default_factory=WPodSpec)
    status: WPodStatus = msgspec.field(default_factory=WPodStatus)


# ----- workloads: UNSET-pruned raw JSON, for the rollout verdict ------------------------------


class WRollingUpdate(_Pruned):
    partition: Any = UNSET


class WStrategy(_Pruned):
    type: Any = UNSET
    rolling_update: WRollingUpdate | UnsetType | None = UNSET


class WWorkloadSpec(_Pruned):
    replicas: Any = UNSET
    update_strategy: WStrategy | UnsetType | None = UNSET


class WCondition(_Pruned):
    type: Any = UNSET
    status: Any = UNSET
    reason: Any = UNSET


class WWorkloadStatus(_Pruned):
    observed_generation: Any = UNSET
    conditions: list[WCondition] | UnsetType | None = UNSET
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


class _Workload(_Pruned):
    metadata: WWorkloadMeta = msgspec.field(default_factory=WWorkloadMeta)
    spec: WWorkloadSpec | UnsetType | None = UNSET
    status: WWorkloadStatus | UnsetType | None = UNSET


class WDeployment(_Workload):
    pass


class WDaemonSet(_Workload):
    pass


class WStatefulSet(_Workload):
    pass


# ----- Warning events --------------------------------------------------------------------------


class WInvolvedObject(_Wire):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class WEvent(_Wire):
    metadata: WMeta = msgspec.field(default_factory=WMeta)
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None
    involved_object: WInvolvedObject | None = None
    last_timestamp: str | None = None
    event_time: str | None = None


#: kind name → (API list path, struct). Events: the driver adds `fieldSelector=type=Warning`.
KINDS: dict[str, tuple[str, type]] = {
    "node": ("/api/v1/nodes", WNode),
    "pod": ("/api/v1/pods", WPod),
    "deployment": ("/apis/apps/v1/deployments", WDeployment),
    "daemonset": ("/apis/apps/v1/daemonsets", WDaemonSet),
    "statefulset": ("/apis/apps/v1/statefulsets", WStatefulSet),
    "event": ("/api/v1/events", WEvent),
}

#: kind name → the Kubernetes kind the rollout verdict and milestone keys use.
WORKLOAD_KINDS: dict[str, str] = {
    "deployment": "Deployment",
    "daemonset": "DaemonSet",
    "statefulset": "StatefulSet",
}
