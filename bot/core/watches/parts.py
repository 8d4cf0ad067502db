"""The mutable records a `WatchState` keeps, one per unhealthy pod, node, node group, episode and
(slotted: a full-size watch holds thousands of them), and what they cost (`Footprint`)."""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from bot.core.kube.objects import EPISODE_REOPEN
from bot.core.kube.versions import minor_version
from bot.core.rules.known import Facts


class _Pod:
    """An unhealthy pod: only what the card, the counters, the stop rules and the known-issue
    rules need (`view`: the pod's `Facts`, reduced to what the loaded rules read; None without
    rules)."""

    __slots__ = ("cls", "detail", "namespace", "node", "since", "view", "workload")

    def __init__(
        self,
        workload: str,
        namespace: str,
        node: str,
        cls: str,
        detail: str,
        since: datetime,
        view: Facts | None = None,
    ):
        self.workload = workload
        self.namespace = namespace
        self.node = node
        self.cls = cls
        self.detail = detail
        self.since = since
        self.view = view


class _Node:
    __slots__ = ("cordoned", "group", "kubelet", "minor", "name", "on_target", "ready", "uid", "was_ready")

    def __init__(
        self, *, name: str, uid: str, group: str, kubelet: str, ready: bool, cordoned: bool, on_target: bool
    ) -> None:
        self.name, self.uid, self.group, self.kubelet = name, uid, group, kubelet
        self.ready, self.cordoned, self.on_target = ready, cordoned, on_target
        self.was_ready = ready
        self.minor = sys.intern(minor_version(kubelet))


class _Group:
    __slots__ = ("old", "old_cordoned", "on_target", "on_target_ready", "ready", "total", "versions")

    def __init__(self) -> None:
        self.total = self.ready = self.on_target = self.on_target_ready = self.old = self.old_cordoned = 0
        self.versions: dict[str, int] = {}  # kubelet minor → nodes (a handful per group)

    def add(self, node: _Node, sign: int) -> None:
        self.total += sign
        count = self.versions.get(node.minor, 0) + sign
        if count > 0:
            self.versions[node.minor] = count
        else:
            self.versions.pop(node.minor, None)
        self.ready += sign * node.ready
        if node.on_target:
            self.on_target += sign
            self.on_target_ready += sign * node.ready
        else:
            self.old += sign
            self.old_cordoned += sign * node.cordoned


class _Flap:
    """A pod's recent spells from Ready to not Ready: when the watch saw each begin, and the Ready
    condition's transition time it carried (the same spell seen again by a relist is not counted
    twice)."""

    __slots__ = ("seen", "went", "workload")

    def __init__(self, workload: str) -> None:
        self.workload = workload
        self.seen: list[datetime] = []
        self.went: datetime | None = None


class _Episode:
    __slots__ = ("carried", "ended", "number", "open", "pods", "since")

    def __init__(self) -> None:
        self.number = 0
        self.since: datetime | None = None
        self.ended: datetime | None = None
        self.open = False
        self.pods = 0
        self.carried = False  # open in the previous Summary, not yet confirmed by a fresh list

    def begin(self, now: datetime) -> bool:
        """Seen (again): the episode is open. True when that starts a new one: not the one open
        before a restart going on, nor a return within EPISODE_REOPEN of its end (the same episode,
        from its start)."""
        if self.open:
            return False
        self.open = True
        new = False
        if self.carried:
            self.carried = False
        elif self.number == 0 or self.ended is None or now - self.ended >= EPISODE_REOPEN:
            self.number += 1
            self.since = now
            new = True
        self.ended = None
        return new

    def end(self, now: datetime) -> None:
        """Not seen any more: closed (one carried over a restart too), its pods gone."""
        if self.open or self.carried:
            self.open = self.carried = False
            self.pods = 0
            self.ended = now


@dataclass(frozen=True, kw_only=True)
class Footprint:
    """`WatchState.footprint`: the pods and nodes watched and the bytes the state holds for each."""

    pods: int
    unhealthy: int  # pods with a record (the others cost a counter)
    nodes: int
    pod_bytes: int
    node_bytes: int

    @property
    def per_pod(self) -> float:
        return self.pod_bytes / self.pods if self.pods else 0.0

    @property
    def per_node(self) -> float:
        return self.node_bytes / self.nodes if self.nodes else 0.0


def _deep_size(root: object, seen: set[int]) -> int:
    """`sys.getsizeof` of `root` and everything it holds (containers, slotted records, structs),
    each object once."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, str | bytes | int | float | bool | datetime | timedelta) or obj is None:
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset | deque):
            stack.extend(obj)
        elif isinstance(obj, msgspec.Struct):
            stack.extend(getattr(obj, f) for f in obj.__struct_fields__)
        elif dataclasses.is_dataclass(obj):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        else:
            for klass in type(obj).__mro__:
                stack.extend(
                    getattr(obj, name) for name in getattr(klass, "__slots__", ()) if hasattr(obj, name)
                )
    return total
