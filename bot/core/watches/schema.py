"""The wire schema of a watch: only the fields of each watched kind that the status model reads.
Nodes, pods and events are `bot.core.kube.wire`'s (the jobs read them too); workloads are here.

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

from bot.core.kube.wire import Pruned, Strategy, WEvent, WMeta, WNode, WorkloadCounts, WPod

# ----- workloads: UNSET-pruned raw JSON, for the rollout verdict ------------------------------


class WWorkloadMeta(WMeta, omit_defaults=True):
    """A workload's metadata, as `Pruned`: its defaults are concrete, so `to_builtins` leaves out
    what is empty."""


class WWorkloadSpec(Pruned):
    replicas: Any = UNSET
    update_strategy: Strategy | UnsetType | None = UNSET


class WCondition(Pruned):
    type: Any = UNSET
    status: Any = UNSET
    reason: Any = UNSET


class WWorkloadStatus(WorkloadCounts):
    conditions: list[WCondition] | UnsetType | None = UNSET


class _Workload(Pruned):
    metadata: WWorkloadMeta = msgspec.field(default_factory=WWorkloadMeta)
    spec: WWorkloadSpec | UnsetType | None = UNSET
    status: WWorkloadStatus | UnsetType | None = UNSET


class WDeployment(_Workload):
    pass


class WDaemonSet(_Workload):
    pass


class WStatefulSet(_Workload):
    pass


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
