"""What a watch publishes and persists: the `Summary` of its state at one moment (nodes, groups,
unhealthy pods by reason, episodes, rollouts, warnings, the known-issue rules' episodes), a plain
value the card, the milestones and the verdict read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from bot.core.kube.objects import KUBE_SYSTEM
from bot.decoders import decode


class NodeView(msgspec.Struct, frozen=True, kw_only=True, array_like=True, gc=False):
    """One node, encoded as a JSON array: 5,000 of them are most of a large cluster's Summary."""

    name: str
    uid: str
    group: str
    kubelet: str
    ready: bool
    cordoned: bool
    on_target: bool  # kubelet at or above the target version (True when there is none)
    was_ready: bool  # has been Ready at least once while watched


@dataclass(frozen=True, kw_only=True)
class GroupView:
    name: str
    total: int
    ready: int
    on_target: int
    on_target_ready: int
    old: int
    old_cordoned: int
    #: The kubelet versions present, by minor ("v1.24", 3), oldest first.
    versions: tuple[tuple[str, int], ...] = ()

    @property
    def not_ready(self) -> int:
        return self.total - self.ready

    @property
    def old_remaining(self) -> int:
        """Old nodes not cordoned yet."""
        return self.old - self.old_cordoned


@dataclass(frozen=True, kw_only=True)
class WorkloadCount:
    key: str
    namespace: str
    kind: str
    name: str
    pods: int
    detail: str  # the most common kubectl STATUS word among its pods in this class


@dataclass(frozen=True, kw_only=True)
class ReasonGroup:
    reason: str  # one of CLASSES
    pods: int
    kube_system: int
    workloads: int
    top: tuple[WorkloadCount, ...]  # kube-system first, then most pods; at most TOP_WORKLOADS


@dataclass(frozen=True, kw_only=True)
class Episode:
    workload: str  # workload key "<ns>/<Kind>/<name>"
    kind: str  # "crashloop" | "imagepull"
    number: int
    since: datetime
    open: bool
    pods: int
    ended: datetime | None = None  # when it last closed (None while open)


@dataclass(frozen=True, kw_only=True)
class RuleEpisode:
    """A known-issue rule matching a workload (or another object): one thread post per episode."""

    rule: str  # the rule's id
    workload: str  # "<ns>/<Kind>/<name>" (a Node: "/Node/<name>")
    number: int
    since: datetime
    open: bool
    pods: int
    evidence: str = ""  # the first matched signal of the episode, for the post (never a key)
    ended: datetime | None = None
    #: The rule's remedy filled from the episode's first match (its pods, nodes, container, target).
    remedy: str = ""


@dataclass(frozen=True, kw_only=True)
class LogRequest:
    """A container log tail a rule needs: the driver reads it (bounded) and gives it back."""

    workload: str  # the rules' "Kind ns/name"
    namespace: str
    pod: str
    container: str
    lines: int


@dataclass(frozen=True, kw_only=True)
class RolloutView:
    key: str
    kind: str
    namespace: str
    name: str
    generation: int
    state: str  # bot.core.rollout's "waiting" | "failed"
    message: str
    spec_change: bool  # a new generation rolling out (its completion is a milestone)


@dataclass(frozen=True, kw_only=True)
class Completed:
    key: str
    generation: int


@dataclass(frozen=True, kw_only=True)
class WarningCount:
    reason: str
    count: int


#: A pod whose readiness flaps: this many spells from Ready to not Ready within FLAP_WINDOW,
#: however short each (a spell shorter than the not-ready grace is never counted unhealthy).
FLAP_SPELLS = 3
FLAP_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True, kw_only=True)
class Flapping:
    """A workload whose pods' readiness flaps: each pod went from Ready to not Ready at least
    `FLAP_SPELLS` times within `FLAP_WINDOW`, however briefly (too briefly, often, to
    be counted unhealthy past its grace)."""

    key: str  # `workload_key`
    namespace: str
    kind: str
    name: str
    pods: int
    spells: int  # the pods' spells not Ready within the window, together


@dataclass(frozen=True, kw_only=True)
class FlapSpells:
    """One pod's spells not Ready within `FLAP_WINDOW`, as persisted: a restarted watch carries them
    on (`WatchState._seed`) instead of counting a flapping pod's spells from nought."""

    pod: str  # the watch's pod key
    workload: str  # `workload_key`
    went: datetime | None  # the Ready condition's transition time of the latest spell
    seen: tuple[datetime, ...]


#: At most this many pods' spells are persisted (the most recent first): a flapping pod is rare,
#: and a Summary stays compact.
FLAP_PODS_KEPT = 500


@dataclass(frozen=True, kw_only=True)
class Summary:
    """What is published and persisted: compact (nodes, counts, top workloads, episodes), never every pod."""

    cluster: str
    at: datetime
    control_plane: str = ""
    nodes: tuple[NodeView, ...] = ()
    groups: tuple[GroupView, ...] = ()
    pods: int = 0
    unhealthy: tuple[ReasonGroup, ...] = ()  # non-empty groups, in CLASSES order
    episodes: tuple[Episode, ...] = ()  # every workload that had one while watched (open or not)
    rollouts: tuple[RolloutView, ...] = ()  # every workload whose verdict is not "done"
    completed: tuple[Completed, ...] = ()  # the latest spec rollouts that completed (bounded)
    warnings: tuple[WarningCount, ...] = ()  # Warning events since the watch started, by reason
    rule_episodes: tuple[RuleEpisode, ...] = ()  # known-issue rules that matched while watched
    target_holds: bool = False
    target_since: datetime | None = None  # the target has held continuously since
    last_unhealthy_at: datetime | None = None  # the latest moment a pod became unhealthy
    #: Since when a list or watch of the cluster has been failing (None: every stream delivers),
    #: and why ("pods: HTTP 503 …"): what the watch shows then is not the cluster now.
    blind_since: datetime | None = None
    blind: str = ""
    #: When the streams last came back after failing: settle time counts from then, not across.
    seen_again_at: datetime | None = None
    #: Workloads whose pods' readiness flaps (kube-system first, then the most spells), the first
    #: `TOP_WORKLOADS`; `flapping_pods` counts every such pod.
    flapping: tuple[Flapping, ...] = ()
    flapping_pods: int = 0
    #: Every pod's spells within the window (at most `FLAP_PODS_KEPT`), for a restart.
    flap_spells: tuple[FlapSpells, ...] = ()

    @property
    def unhealthy_pods(self) -> int:
        return sum(g.pods for g in self.unhealthy)

    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_json(cls, text: str) -> Summary:
        return decode(text, cls)


TOP_WORKLOADS = 5
COMPLETED_KEPT = 200
WARNING_REASONS_KEPT = 10


def _reason_group(cls: str, per_workload: Mapping[str, list[Any]]) -> ReasonGroup:
    def rank(item: tuple[str, list[Any]]) -> tuple[bool, int, str]:
        key, (namespace, pods, _details) = item
        return (namespace != KUBE_SYSTEM, -pods, key)

    ranked = sorted(per_workload.items(), key=rank)
    top = []
    for key, (namespace, pods, details) in ranked[:TOP_WORKLOADS]:
        _ns, kind, name = key.split("/", 2)
        detail = max(details.items(), key=lambda dc: (dc[1], dc[0]))[0]
        top.append(
            WorkloadCount(key=key, namespace=namespace, kind=kind, name=name, pods=pods, detail=detail)
        )
    return ReasonGroup(
        reason=cls,
        pods=sum(v[1] for v in per_workload.values()),
        kube_system=sum(v[1] for v in per_workload.values() if v[0] == KUBE_SYSTEM),
        workloads=len(per_workload),
        top=tuple(top),
    )
