"""What a watch is asked to watch (`WatchSpec`: its scope, target and stop rules) and how the stream
hands a healthy pod to the state (`reduce_pod`: a `SeenPod`, never the whole pod)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from bot.core.kube.objects import (
    CRASHLOOP,
    CRASHLOOP_FAILS_AFTER,
    IMAGEPULL_FAILS_AFTER,
    classify,
    workload_key,
    workload_of,
)
from bot.core.kube.versions import parse_version
from bot.core.kube.wire import WPod

#: A Running pod whose containers are not all Ready is starting (probes, a sidecar fetching
#: secrets) for a while; past this it is unhealthy ("Not ready" on the card) — a pod that never
#: serves must not let a watch say "all clear".
NOT_READY_GRACE = timedelta(minutes=2)


@dataclass(frozen=True, kw_only=True)
class Target:
    nodegroups: tuple[str, ...] = ()  # empty: every group in the watch's scope
    kubelet_version: str = ""  # "1.25.16" or "v1.25.16"; "" = no version target
    no_old_nodes: bool = True  # no node left below the target version
    settle: timedelta = timedelta(minutes=5)  # target must hold with no NEW unhealthy pod this long
    #: (old group, new group): a node group recreated under a new name (`others` → `others-1-25`,
    #: a plan's `replaces:`); the old group's nodes count as old nodes of the new one.
    replaces: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kubelet_version and parse_version(self.kubelet_version) is None:
            raise ValueError(f"kubelet version {self.kubelet_version!r} is not like 1.29 or v1.29.4")
        if self.settle < timedelta(0):
            raise ValueError("settle must not be negative")


@dataclass(frozen=True, kw_only=True)
class StopRules:
    crashloop_after: timedelta = CRASHLOOP_FAILS_AFTER  # a workload in CrashLoopBackOff longer → stop
    imagepull_after: timedelta = IMAGEPULL_FAILS_AFTER  # ImagePullBackOff/ErrImagePull longer → stop
    timeout: timedelta | None = None


@dataclass(frozen=True, kw_only=True)
class WatchSpec:
    cluster: str
    nodegroups: tuple[str, ...] = ()  # scope filter; empty = all
    namespaces: tuple[str, ...] = ()  # scope filter for pods/workloads/events; empty = all
    node_group_labels: tuple[str, ...]  # settings' node-group label keys, in priority order
    target: Target | None = None
    stop: StopRules = StopRules()
    started_at: datetime
    ends_at: datetime | None = None  # --for / timeout; None = until unwatch or target
    init_stuck_after: timedelta = timedelta(minutes=5)
    pending_stuck_after: timedelta = timedelta(minutes=5)
    terminating_stuck_after: timedelta = timedelta(minutes=5)
    #: A Running pod with a container a known-issue rule watches not Ready this long is matched.
    not_ready_stuck_after: timedelta = timedelta(minutes=5)
    #: A Running pod not Ready this long counts as unhealthy (class "Not ready").
    not_ready_after: timedelta = NOT_READY_GRACE

    @property
    def deadline(self) -> datetime | None:
        """The earlier of `ends_at` and `started_at + stop.timeout`."""
        ends = [t for t in (self.ends_at,) if t is not None]
        if self.stop.timeout is not None:
            ends.append(self.started_at + self.stop.timeout)
        return min(ends) if ends else None


class SeenPod(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A healthy pod as the stream hands it to the state: its key, namespace, node and workload
    key (interned), and nothing else. `reduce_pod` makes one in the stream thread, so a list of
    150,000 pods is held as these (about 50 bytes each besides the uid) rather than as decoded
    `WPod`s (several KB each), and the full pod is never kept for a healthy one."""

    key: str  # the pod's uid (or "namespace/name")
    namespace: str
    node: str  # "" when not scheduled
    workload: str  # `workload_key`


def reduce_pod(pod: WPod) -> WPod | SeenPod:
    """The pod as the state needs it: a pod healthy whatever class it had before (see `classify`'s
    `previous`) becomes a `SeenPod`; any other pod is kept whole (classes, rules' facts need it)."""
    if classify(pod) is not None or classify(pod, CRASHLOOP) is not None:
        return pod
    meta = pod.metadata
    intern = sys.intern
    namespace = intern(meta.namespace)
    wkind, wname = workload_of(pod)
    return SeenPod(
        meta.uid or f"{namespace}/{meta.name}",
        namespace,
        intern(pod.spec.node_name or ""),
        intern(workload_key(namespace, wkind, wname)),
    )


def _pod_key(pod: WPod | SeenPod) -> str:
    if isinstance(pod, SeenPod):
        return pod.key
    meta = pod.metadata
    return meta.uid or f"{meta.namespace}/{meta.name}"


#: The stream's per-item reduction by kind (the kube adapter's `list_watch(reduce=...)`).
REDUCERS: dict[str, Any] = {"pod": reduce_pod}
