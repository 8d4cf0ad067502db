"""The live status model of a watch: Kubernetes events folded into state, state into a Summary.

Pure: no I/O, no clock (every call is given `now`), no threads; one driver thread owns a
`WatchState`: `sync` for a full (re)list, `apply` per event (O(1)), `summary(now)` is what gets
published and persisted. Speed and memory, pod classes, episodes, known issues and rollouts:
`docs/watch-model.md`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from bot.core.kube.objects import (
    CLASSES,
    CRASHLOOP,
    CRASHLOOP_FAILS_AFTER,
    EPISODE_REOPEN,
    ERROR,
    IMAGEPULL,
    IMAGEPULL_FAILS_AFTER,
    INIT,
    KUBE_SYSTEM,
    NOT_READY,
    PENDING,
    TERMINATING,
    classify,
    node_group,
    parse_time,
    ready_since,
    workload_key,
    workload_of,
)
from bot.core.kube.versions import minor_version, on_version, parse_version, version_order
from bot.core.kube.wire import WEvent, WNode, WPod
from bot.core.rollout import DONE
from bot.core.rollout import verdict as rollout_verdict
from bot.core.rules import ContainerView, EventRecord, PodState, Rule, match_rules
from bot.core.rules.known import Facts, RuleNeeds, pod_facts, rules_workload, view_of, watch_key
from bot.core.watches.schema import KINDS, WORKLOAD_KINDS

# ----- the spec ----------------------------------------------------------------------------------


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


# ----- the Summary -------------------------------------------------------------------------------


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

    @property
    def unhealthy_pods(self) -> int:
        return sum(g.pods for g in self.unhealthy)

    def to_json(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_json(cls, text: str) -> Summary:
        return msgspec.json.decode(text, type=cls)


TOP_WORKLOADS = 5
COMPLETED_KEPT = 200
WARNING_REASONS_KEPT = 10


# ----- the mutable state -------------------------------------------------------------------------


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


class _Episode:
    __slots__ = ("carried", "ended", "number", "open", "pods", "since")

    def __init__(self) -> None:
        self.number = 0
        self.since: datetime | None = None
        self.ended: datetime | None = None
        self.open = False
        self.pods = 0
        self.carried = False  # open in the previous Summary, not yet confirmed by a fresh list


class _RuleEpisode(_Episode):
    __slots__ = ("evidence",)

    def __init__(self) -> None:
        super().__init__()
        self.evidence = ""


class _RuleEvent:
    """A Warning event some rule may match, kept while it is recent (`RULE_EVENT_CURRENT`)."""

    __slots__ = ("pod_uid", "record", "seen")

    def __init__(self, record: EventRecord, pod_uid: str, seen: datetime) -> None:
        self.record = record
        self.pod_uid = pod_uid
        self.seen = seen


#: A matching Warning event keeps its rule's episode open this long after it was last seen.
RULE_EVENT_CURRENT = timedelta(minutes=5)
#: At most this many matching events are kept (an event storm is the same few problems).
RULE_EVENTS_KEPT = 5_000


class _Workload:
    __slots__ = ("baseline", "generation", "kind", "message", "name", "namespace", "pending", "state")

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        self.generation = 0
        self.baseline = -1  # the generation known to be rolled out
        self.pending = 0  # a spec rollout of this generation is in progress (0: none)
        self.state = DONE
        self.message = ""


_EPISODE_CLASSES = {CRASHLOOP: "crashloop", IMAGEPULL: "imagepull"}
_EVENT_EPISODES = frozenset(_EPISODE_CLASSES.values())
#: Episodes judged when the state is summarised (they depend on time, not only on events).
_TIMED_EPISODES = {ERROR: "error", INIT: "init"}
#: A workload's Error episode opens only once a pod has been in Error this long and the workload
#: is not crash-looping: the kubelet restarts a failed container within 10 s (its first back-off),
#: so the Error of a crash loop's first crash is not news of its own.
ERROR_SETTLE = timedelta(seconds=15)


class WatchState:
    """Mutable; one driver thread owns it."""

    def __init__(
        self, spec: WatchSpec, *, previous: Summary | None = None, rules: Sequence[Rule] = ()
    ) -> None:
        self.spec = spec
        self._needs = RuleNeeds.of(rules)
        # Node-group scope of the pod view (`--nodegroup`): see `_node_scope`.
        self._scoped: set[str] = set()  # pods in the view now (keys)
        self._scoped_nodes: set[str] = set()  # names of the scoped groups' nodes
        self._displaced: set[str] = set()  # workloads that had a pod on those nodes while watched
        self._nodes_listed = False
        self._held: list[tuple[str, str, Any]] = []  # pod events that came before the node list
        self._rule_events: dict[str, _RuleEvent] = {}
        self._rule_episodes: dict[tuple[str, str], _RuleEpisode] = {}
        self._tails: dict[tuple[str, str], str] = {}  # (rules' workload, container) → log tail
        self._log_wanted: list[LogRequest] = []
        target = spec.target
        self._target_version = parse_version(target.kubelet_version) if target else None
        self._scope_groups = frozenset(spec.nodegroups)
        #: Old group → the group that replaces it (`Target.replaces`).
        self._replaced_by = dict(target.replaces) if target else {}
        self._scope_namespaces = frozenset(spec.namespaces)
        self._target_groups = frozenset(target.nodegroups) if target else frozenset()
        self._control_plane = ""
        self._nodes: dict[str, _Node] = {}
        #: `_nodes`' keys by (group, name), as a summary lists them; None once a node came, went or
        #: changed group (a publish of a 5,000-node watch sorted them every time otherwise).
        self._node_order: list[str] | None = None
        self._groups: dict[str, _Group] = {}
        self._pods: dict[str, _Pod] = {}
        self._pod_count = 0
        self._episodes: dict[tuple[str, str], _Episode] = {}
        self._workloads: dict[str, _Workload] = {}
        self._rolling: dict[str, _Workload] = {}  # verdict not done
        self._completed: deque[Completed] = deque(maxlen=COMPLETED_KEPT)
        self._seed_pending: dict[str, int] = {}
        self._events: dict[str, tuple[str, int]] = {}  # event uid → (reason, count)
        self._warnings: dict[str, int] = {}
        self._target_since: datetime | None = None
        self._last_unhealthy: datetime | None = None
        # Pods already unhealthy when the watch first lists them are not *new* (settle counts new ones).
        self._pods_listed = False
        self._intern = sys.intern
        if previous is not None:
            self._seed(previous)

    # ----- restart --------------------------------------------------------------------------

    def _seed(self, previous: Summary) -> None:
        """Carry episode numbers, open episodes and pending rollouts over a restart."""
        for ep in previous.episodes:
            state = self._episodes.setdefault((ep.workload, ep.kind), _Episode())
            state.number = ep.number
            state.since = ep.since
            state.ended = ep.ended
            state.carried = ep.open
        for roll in previous.rollouts:
            if roll.spec_change:
                self._seed_pending[roll.key] = roll.generation
        self._completed.extend(previous.completed)
        self._control_plane = previous.control_plane
        for rep in previous.rule_episodes:
            rstate = self._rule_episodes.setdefault((rep.rule, rep.workload), _RuleEpisode())
            rstate.number = rep.number
            rstate.since = rep.since
            rstate.ended = rep.ended
            rstate.carried = rep.open
            rstate.evidence = rep.evidence

    # ----- input ----------------------------------------------------------------------------

    def set_control_plane(self, git_version: str) -> None:
        self._control_plane = git_version

    def sync(self, kind: str, items: Sequence[Any], now: datetime) -> None:
        """A full (re)list of a kind: what is not in it is gone; what changed is applied."""
        struct = self._struct(kind)
        objs = [self._typed(item, struct) for item in items]
        if kind == "pod":
            if self._scope_groups and not self._nodes_listed:
                self._held = [("SYNC", "", objs)]  # a list replaces whatever came before it
                return
            seen: set[str] = set()
            count = 0
            if self._scope_groups:
                self._scoped = set()
            for pod in objs:
                if not self._pod_in_scope(pod):
                    continue
                key = _pod_key(pod)
                self._apply_pod("MODIFIED", pod, now)
                if not self._scope_groups or key in self._scoped:
                    count += 1
                    if key in self._pods:  # only the remembered (unhealthy) pods are dropped
                        seen.add(key)
            for key in [k for k in self._pods if k not in seen]:
                self._drop_pod(key, now)
            self._pod_count = count
            if not self._pods_listed:
                self._pods_listed = True
                self._last_unhealthy = None
            for (_workload, episode_kind), state in self._episodes.items():
                if episode_kind not in _EVENT_EPISODES:
                    continue  # judged at the next summary
                if state.carried:  # open before the restart, and no pod of it is in that state now
                    state.carried = False
                    state.open = False
                    state.ended = now
        elif kind == "node":
            seen = set()
            for node in objs:
                seen.add(node.metadata.uid or node.metadata.name)
                self._apply_node("MODIFIED", node, now)
            for key in [k for k in self._nodes if k not in seen]:
                self._drop_node(key)
            self._check_target(now)
            if not self._nodes_listed:
                self._nodes_listed = True
                held, self._held = self._held, []
                for what, event_type, obj in held:
                    if what == "SYNC":
                        self.sync("pod", obj, now)
                    else:
                        self.apply("pod", event_type, obj, now)
        elif kind in WORKLOAD_KINDS:
            wkind = WORKLOAD_KINDS[kind]
            seen = set()
            for obj in objs:
                meta = obj.metadata
                if self._scope_namespaces and meta.namespace not in self._scope_namespaces:
                    continue
                seen.add(workload_key(meta.namespace, wkind, meta.name))
                self._apply_workload(wkind, "MODIFIED", obj)
            for key in [k for k, w in self._workloads.items() if w.kind == wkind and k not in seen]:
                self._drop_workload(key)
        elif kind == "event":
            self._events.clear()
            self._warnings.clear()
            self._rule_events.clear()
            for obj in objs:
                self._apply_event("ADDED", obj, now)

    def apply(self, kind: str, event_type: str, obj: Any, now: datetime) -> None:
        """One watch event: ADDED, MODIFIED or DELETED (anything else, such as BOOKMARK, is ignored)."""
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        if kind == "pod":
            pod = obj if isinstance(obj, WPod | SeenPod) else self._typed(obj, WPod)
            if self._scope_groups and not self._nodes_listed:
                self._held.append(("APPLY", event_type, pod))  # which nodes are in scope is not known yet
            elif self._pod_in_scope(pod):
                self._apply_pod(event_type, pod, now)
        elif kind == "node":
            self._apply_node(event_type, obj if isinstance(obj, WNode) else self._typed(obj, WNode), now)
            self._check_target(now)
        elif kind in WORKLOAD_KINDS:
            typed = self._typed(obj, self._struct(kind))
            if not self._scope_namespaces or typed.metadata.namespace in self._scope_namespaces:
                self._apply_workload(WORKLOAD_KINDS[kind], event_type, typed)
        elif kind == "event":
            self._apply_event(event_type, obj if isinstance(obj, WEvent) else self._typed(obj, WEvent), now)
        else:
            raise ValueError(f"not a watched kind: {kind}")

    @staticmethod
    def _struct(kind: str) -> type:
        try:
            return KINDS[kind][1]
        except KeyError:
            raise ValueError(f"not a watched kind: {kind}") from None

    @staticmethod
    def _typed(obj: Any, struct: type) -> Any:
        # The driver passes the adapter's structs (a healthy pod reduced to a `SeenPod`); raw
        # dicts (tests, tools) are converted once.
        return obj if isinstance(obj, struct | SeenPod) else msgspec.convert(obj, struct)

    # ----- pods -----------------------------------------------------------------------------

    def _pod_in_scope(self, pod: WPod | SeenPod) -> bool:
        if not self._scope_namespaces:
            return True
        namespace = pod.namespace if isinstance(pod, SeenPod) else pod.metadata.namespace
        return namespace in self._scope_namespaces

    def _node_scope(self, pod: WPod | SeenPod, key: str) -> bool:
        """With `--nodegroup`: is the pod in the view? Pods on the scoped groups' nodes are; so are
        the pods DISPLACED by the groups' replacement — an unhealthy pod (Pending, unschedulable,
        ContainerCreating or failing anywhere) of a workload that had a pod on those nodes while
        watched — until they are healthy again elsewhere. Judged at each of the pod's events."""
        if isinstance(pod, SeenPod):  # healthy: in the view only on the groups' nodes
            if pod.node and pod.node in self._scoped_nodes:
                self._displaced.add(pod.workload)
                return True
            return False
        wkind, wname = workload_of(pod)
        wkey = workload_key(pod.metadata.namespace, wkind, wname)
        if pod.spec.node_name and pod.spec.node_name in self._scoped_nodes:
            self._displaced.add(wkey)
            return True
        if wkey not in self._displaced:
            return False
        record = self._pods.get(key)
        return classify(pod, record.cls if record is not None else None) is not None

    def _apply_pod(self, event_type: str, pod: WPod | SeenPod, now: datetime) -> None:
        key = _pod_key(pod)
        if self._scope_groups:
            # Counted while in the view: entering it is an ADDED, leaving it a DELETED.
            was = key in self._scoped
            if event_type == "DELETED" or not self._node_scope(pod, key):
                if not was:
                    return
                self._scoped.discard(key)
                event_type = "DELETED"
            else:
                self._scoped.add(key)
                event_type = "MODIFIED" if was else "ADDED"
        record = self._pods.get(key)
        if event_type == "DELETED":
            self._pod_count -= 1
            if record is not None:
                self._drop_pod(key, now)
            return
        if event_type == "ADDED":
            self._pod_count += 1
        if isinstance(pod, SeenPod):  # healthy whatever its class was (`reduce_pod`)
            if record is not None:
                self._drop_pod(key, now)
            return
        meta = pod.metadata
        found = classify(pod, record.cls if record is not None else None)
        needs = self._needs
        if found is None:
            if record is not None:
                self._drop_pod(key, now)
            return
        cls, detail = found
        intern = self._intern
        wkind, wname = workload_of(pod)
        namespace = intern(meta.namespace)
        view = pod_facts(pod, needs) if needs is not None else None
        if (
            record is not None
            and record.cls == cls
            and record.workload == workload_key(namespace, wkind, wname)
        ):
            record.detail = intern(detail)
            record.node = intern(pod.spec.node_name or "")
            record.view = view
            return
        if cls in (PENDING, INIT):
            since = parse_time(meta.creation_timestamp) or now
        elif cls == NOT_READY:
            # First seen not Ready: since its Ready condition says (a list after a restart keeps
            # the time); after another class in this watch (Pending, Init): from now, as it starts.
            since = now if record is not None else min(ready_since(pod) or now, now)
        elif cls == TERMINATING:
            since = parse_time(meta.deletion_timestamp) or now
        else:
            since = now
            self._unhealthy_at(now)
        if record is not None:
            self._drop_pod(key, now)
        wkey = intern(workload_key(namespace, wkind, wname))
        self._pods[key] = _Pod(
            wkey, namespace, intern(pod.spec.node_name or ""), cls, intern(detail), since, view
        )
        episode_kind = _EPISODE_CLASSES.get(cls)
        if episode_kind is not None:
            state = self._episodes.get((wkey, episode_kind))
            if state is None:
                state = self._episodes[(wkey, episode_kind)] = _Episode()
            state.pods += 1
            if not state.open:
                state.open = True
                if state.carried:  # the episode open before a restart goes on
                    state.carried = False
                elif state.number == 0 or state.ended is None or now - state.ended >= EPISODE_REOPEN:
                    state.number += 1
                    state.since = now
                # else: back within EPISODE_REOPEN of its end: the same episode, from its start
                state.ended = None

    def _drop_pod(self, key: str, now: datetime) -> None:
        record = self._pods.pop(key)
        limit = self._stuck_after(record.cls)
        if limit is not None and now - record.since > limit:
            # It was unhealthy (stuck) from since + limit until now.
            self._unhealthy_at(record.since + limit)
        episode_kind = _EPISODE_CLASSES.get(record.cls)
        if episode_kind is not None:
            state = self._episodes[(record.workload, episode_kind)]
            state.pods -= 1
            if state.pods <= 0:
                state.pods = 0
                state.open = False
                state.ended = now

    def _stuck_after(self, cls: str) -> timedelta | None:
        if cls == INIT:
            return self.spec.init_stuck_after
        if cls == NOT_READY:
            return self.spec.not_ready_after
        if cls == PENDING:
            return self.spec.pending_stuck_after
        if cls == TERMINATING:
            return self.spec.terminating_stuck_after
        return None

    def _unhealthy_at(self, moment: datetime) -> None:
        if self._last_unhealthy is None or moment > self._last_unhealthy:
            self._last_unhealthy = moment

    # ----- nodes ----------------------------------------------------------------------------

    def _apply_node(self, event_type: str, node: WNode, now: datetime) -> None:
        meta = node.metadata
        key = meta.uid or meta.name
        if event_type == "DELETED":
            if key in self._nodes:
                self._drop_node(key)
            return
        group = node_group(meta.labels, self.spec.node_group_labels)
        group = self._replaced_by.get(group, group)
        if self._scope_groups and group not in self._scope_groups:
            if key in self._nodes:  # relabelled out of scope
                self._drop_node(key)
            return
        kubelet = node.status.node_info.kubelet_version if node.status.node_info else ""
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or ())
        fresh = _Node(
            name=meta.name,
            uid=meta.uid,
            group=group,
            kubelet=kubelet,
            ready=ready,
            cordoned=bool(node.spec.unschedulable),
            on_target=on_version(kubelet, self._target_version),
        )
        old = self._nodes.get(key)
        if old is not None:
            fresh.was_ready = old.was_ready or ready
            self._groups[old.group].add(old, -1)
        if old is None or old.group != group or old.name != meta.name:
            self._node_order = None
        self._nodes[key] = fresh
        self._groups.setdefault(group, _Group()).add(fresh, +1)
        if self._scope_groups:
            self._scoped_nodes.add(meta.name)

    def _drop_node(self, key: str) -> None:
        node = self._nodes.pop(key)
        self._node_order = None
        self._scoped_nodes.discard(node.name)
        group = self._groups[node.group]
        group.add(node, -1)
        if group.total == 0:
            del self._groups[node.group]

    def _holds(self) -> bool:
        target = self.spec.target
        if target is None:
            return False
        names = self._target_groups or frozenset(self._groups)
        if not names:
            return False
        for name in names:
            group = self._groups.get(name)
            if group is None or group.total == 0 or group.on_target == 0:
                return False
            if group.on_target_ready != group.on_target:
                return False
            if target.no_old_nodes and group.old:
                return False
        return True

    def _check_target(self, now: datetime) -> None:
        if self._holds():
            if self._target_since is None:
                self._target_since = now
        else:
            self._target_since = None

    # ----- workloads ------------------------------------------------------------------------

    def _apply_workload(self, kind: str, event_type: str, obj: Any) -> None:
        meta = obj.metadata
        key = workload_key(meta.namespace, kind, meta.name)
        if event_type == "DELETED":
            if key in self._workloads:
                self._drop_workload(key)
            return
        raw = msgspec.to_builtins(obj)
        state, message = rollout_verdict(kind, raw)
        record = self._workloads.get(key)
        if record is None:
            record = self._workloads[key] = _Workload(kind, meta.namespace, meta.name)
            seeded = self._seed_pending.pop(key, None)
            if seeded is not None:
                record.baseline = seeded - 1
                record.pending = seeded
            else:
                # First sight: a rollout already under way counts; a mere availability dip does not.
                record.baseline = meta.generation if state == DONE or not _spec_change(kind, raw) else -1
        record.generation = meta.generation
        record.state, record.message = state, message
        if state == DONE:
            if record.pending and meta.generation >= record.pending:
                done = Completed(key=key, generation=meta.generation)
                if done not in self._completed:
                    self._completed.append(done)
            record.pending = 0
            record.baseline = max(record.baseline, meta.generation)
            self._rolling.pop(key, None)
            return
        if meta.generation > record.baseline and _spec_change(kind, raw):
            record.pending = meta.generation
        self._rolling[key] = record

    def _drop_workload(self, key: str) -> None:
        del self._workloads[key]
        self._rolling.pop(key, None)

    # ----- events ---------------------------------------------------------------------------

    def _apply_event(self, event_type: str, event: WEvent, now: datetime) -> None:
        if event.type != "Warning":
            return
        involved = event.involved_object
        namespace = (involved.namespace if involved else None) or event.metadata.namespace
        if self._scope_namespaces and namespace not in self._scope_namespaces:
            return
        when = parse_time(event.last_timestamp) or parse_time(event.event_time)
        if when is None:
            when = parse_time(event.metadata.creation_timestamp)
        if when is not None and when < self.spec.started_at.replace(microsecond=0):
            # Older than the watch: the snapshot's business, not the live view's. (Event times
            # have whole seconds: one from the watch's first second is not older than it.)
            return
        key = event.metadata.uid or f"{namespace}/{event.metadata.name}"
        reason = self._intern(event.reason or "?")
        old = self._events.pop(key, None)
        if old is not None:
            self._warnings[old[0]] -= old[1]
        if event_type == "DELETED":
            # Events expire after an hour; what happened during the watch still happened.
            if old is not None:
                self._warnings[old[0]] += old[1]
            return
        count = max(int(event.count or 1), 1)
        self._events[key] = (reason, count)
        self._warnings[reason] = self._warnings.get(reason, 0) + count
        needs = self._needs
        message = event.message or ""
        if (
            needs is not None
            and (key in self._rule_events or len(self._rule_events) < RULE_EVENTS_KEPT)
            and needs.event_wanted(reason, message)
        ):
            self._rule_events[key] = _RuleEvent(
                EventRecord(
                    namespace=namespace or "",
                    kind=(involved.kind if involved else None) or "",
                    name=(involved.name if involved else None) or "",
                    reason=reason,
                    message=message,
                    type="Warning",
                ),
                (involved.uid if involved else None) or "",
                min(when, now) if when is not None else now,
            )

    # ----- known-issue rules ----------------------------------------------------------------

    def logs_wanted(self) -> list[LogRequest]:
        """The container log tails the last summary's rules asked for and nobody read yet."""
        return list(self._log_wanted)

    def add_log_tail(self, workload: str, container: str, text: str) -> None:
        """A tail the driver read (or "" when it could not): kept for the workload while it stays a
        candidate, so its log is read once per candidacy, not at every summary."""
        self._tails[(workload, container)] = text
        self._log_wanted = [r for r in self._log_wanted if (r.workload, r.container) != (workload, container)]

    def _candidates(self, now: datetime) -> list[PodState]:
        """The pods the rules look at: those the card counts as unhealthy (the transient classes
        once stuck past their limit), a pod not Ready only once not Ready for longer than
        `not_ready_stuck_after` — never a pod merely starting or being replaced."""
        node_ready = {n.name: n.ready for n in self._nodes.values()}
        out: list[PodState] = []
        lag_limit = self.spec.not_ready_stuck_after
        for pod in self._pods.values():
            facts = pod.view
            if facts is None:
                continue
            limit = lag_limit if pod.cls == NOT_READY else self._stuck_after(pod.cls)
            if limit is not None and now - pod.since <= limit:
                continue
            out.append(
                view_of(
                    facts,
                    pod.namespace,
                    rules_workload(pod.workload),
                    node_ready=node_ready.get(facts[1], True),
                )
            )
        return out

    def _with_tails(self, pods: list[PodState]) -> list[PodState]:
        if not self._tails:
            return pods
        attached: set[tuple[str, str]] = set()
        out = []
        for pod in pods:
            changed = False
            containers = []
            for c in pod.containers:
                key = (pod.workload, c.name)
                tail = self._tails.get(key)
                if tail and key not in attached:
                    attached.add(key)  # one pod of the workload carries it: the hit is per workload
                    c = ContainerView(
                        name=c.name,
                        image=c.image,
                        ready=c.ready,
                        waiting=c.waiting,
                        terminated=c.terminated,
                        log_tail=tail,
                        kind=c.kind,
                    )
                    changed = True
                containers.append(c)
            out.append(dataclasses.replace(pod, containers=tuple(containers)) if changed else pod)
        return out

    def _evaluate_rules(self, now: datetime) -> None:
        """Match the rules against the candidates and the recent matching events; open and close
        the rules' episodes (one thread post per rule, workload and episode)."""
        needs = self._needs
        if needs is None or not self._pods_listed:
            return  # before the first pod list, an absent hit means nothing
        pods = self._candidates(now)
        workloads = {p.workload for p in pods}
        # A workload that is no longer a candidate has its tails forgotten: read again next time.
        for key in [k for k in self._tails if k[0] not in workloads]:
            del self._tails[key]
        wanted: dict[tuple[str, str], LogRequest] = {}
        for pod in pods:
            for rule in needs.log_rules:
                assert rule.match.log is not None
                for container in rule.log_wanted(pod):
                    key = (pod.workload, container)
                    if key in self._tails:
                        continue
                    lines = rule.match.log.lines
                    have = wanted.get(key)
                    if have is None or have.lines < lines:
                        wanted[key] = LogRequest(
                            workload=pod.workload,
                            namespace=pod.namespace,
                            pod=pod.name,
                            container=container,
                            lines=max(lines, have.lines if have else 0),
                        )
        self._log_wanted = list(wanted.values())
        pods = self._with_tails(pods)
        candidates = {(p.namespace, p.name) for p in pods}
        events: list[EventRecord] = []
        for uid in [k for k, e in self._rule_events.items() if now - e.seen > RULE_EVENT_CURRENT]:
            del self._rule_events[uid]
        scoped = bool(self._scope_groups)
        for ev in self._rule_events.values():
            record = ev.record
            if scoped and (
                (record.kind == "Pod" and ev.pod_uid not in self._scoped)
                or (record.kind == "Node" and record.name not in self._scoped_nodes)
            ):
                continue  # about a pod or node outside the node groups' view
            known = self._pods.get(ev.pod_uid) if ev.pod_uid else None
            if known is not None and (record.namespace, record.name) not in candidates:
                # About a pod the watch remembers but the rules do not look at yet (a pod
                # ContainerCreating behind a Multi-Attach): the finding is its workload's.
                _ns, kind, name = known.workload.split("/", 2)
                record = dataclasses.replace(record, kind=kind, name=name)
            events.append(record)
        hits = match_rules(needs.rules, pods, events) if pods or events else []
        current: dict[tuple[str, str], tuple[int, str]] = {}
        for hit in hits:
            current[(hit.rule.id, watch_key(hit.workload))] = (len(hit.pods), hit.evidence)
        for key, (count, evidence) in current.items():
            state = self._rule_episodes.get(key)
            if state is None:
                state = self._rule_episodes[key] = _RuleEpisode()
            state.pods = count
            if not state.open:
                state.open = True
                if state.carried:
                    state.carried = False
                elif state.number == 0 or state.ended is None or now - state.ended >= EPISODE_REOPEN:
                    state.number += 1
                    state.since = now
                    state.evidence = evidence
                state.ended = None
        for key, state in self._rule_episodes.items():
            if key in current:
                continue
            if state.open or state.carried:
                state.open = state.carried = False
                state.pods = 0
                state.ended = now

    def _carried(self, workload: str, kind: str) -> bool:
        """Open before a restart: a pod listed again in Error goes on with it, without a new settle."""
        state = self._episodes.get((workload, kind))
        return state is not None and state.carried

    def _judge_timed_episodes(self, counts: Mapping[tuple[str, str], int], now: datetime) -> None:
        """Open and close the Error and Init-stuck episodes from the pods counted now (`counts`:
        (workload, kind) → pods); numbered, reopened and carried over a restart as the others."""
        if not self._pods_listed:
            return  # before the first pod list, an absent pod means nothing
        crashing = {w for (w, k), s in self._episodes.items() if k == "crashloop" and s.open}
        # A crash-looping workload's Error is its crash loop's: that episode says it.
        live = {key: n for key, n in counts.items() if not (key[1] == "error" and key[0] in crashing)}
        for key, count in live.items():
            state = self._episodes.get(key)
            if state is None:
                state = self._episodes[key] = _Episode()
            state.pods = count
            if not state.open:
                state.open = True
                if state.carried:
                    state.carried = False
                elif state.number == 0 or state.ended is None or now - state.ended >= EPISODE_REOPEN:
                    state.number += 1
                    state.since = now
                state.ended = None
        for key, state in self._episodes.items():
            if key[1] in _EVENT_EPISODES or key in live:
                continue
            if state.open or state.carried:
                state.open = state.carried = False
                state.pods = 0
                state.ended = now

    # ----- output ---------------------------------------------------------------------------

    def footprint(self) -> Footprint:
        """What the state holds for its pods and for its nodes, in bytes (`sys.getsizeof` of every
        container, record and string it owns; a string shared by both is counted with the pods).
        O(unhealthy pods + nodes): cheap enough for a benchmark to ask after the list."""
        seen: set[int] = set()
        # Both roots alive at once: `seen` holds ids, and a first root freed before the second is
        # made may lend it its id (then the nodes counted 0 bytes).
        pod_root = (self._pods, self._scoped, self._displaced, self._held)
        node_root = (self._nodes, self._node_order, self._groups, self._scoped_nodes)
        pod_bytes = _deep_size(pod_root, seen)
        node_bytes = _deep_size(node_root, seen)
        return Footprint(
            pods=max(self._pod_count, len(self._pods)),
            unhealthy=len(self._pods),
            nodes=len(self._nodes),
            pod_bytes=pod_bytes,
            node_bytes=node_bytes,
        )

    def _nodes_in_order(self) -> list[str]:
        if self._node_order is None:
            nodes = self._nodes
            self._node_order = sorted(nodes, key=lambda k: (nodes[k].group, nodes[k].name))
        return self._node_order

    def summary(self, now: datetime) -> Summary:
        """What is published; it also brings the known-issue rules' episodes up to `now`."""
        self._evaluate_rules(now)
        target = self.spec.target
        nodes = tuple(
            NodeView(
                name=n.name,
                uid=n.uid,
                group=n.group,
                kubelet=n.kubelet,
                ready=n.ready,
                cordoned=n.cordoned,
                on_target=n.on_target,
                was_ready=n.was_ready,
            )
            for n in map(self._nodes.__getitem__, self._nodes_in_order())
        )
        groups = tuple(
            GroupView(
                name=name,
                total=g.total,
                ready=g.ready,
                on_target=g.on_target,
                on_target_ready=g.on_target_ready,
                old=g.old,
                old_cordoned=g.old_cordoned,
                versions=tuple(sorted(g.versions.items(), key=lambda vc: version_order(vc[0]))),
            )
            for name, g in sorted(self._groups.items())
        )
        last_unhealthy = self._last_unhealthy
        by_class: dict[str, dict[str, list[Any]]] = {}
        timed: dict[tuple[str, str], int] = {}
        for pod in self._pods.values():
            limit = self._stuck_after(pod.cls)
            if limit is not None:
                if now - pod.since <= limit:
                    continue
                stuck_at = pod.since + limit
                if last_unhealthy is None or stuck_at > last_unhealthy:
                    last_unhealthy = stuck_at
            timed_kind = _TIMED_EPISODES.get(pod.cls)
            if timed_kind is not None and (
                pod.cls != ERROR or now - pod.since >= ERROR_SETTLE or self._carried(pod.workload, timed_kind)
            ):
                timed[(pod.workload, timed_kind)] = timed.get((pod.workload, timed_kind), 0) + 1
            per_workload = by_class.setdefault(pod.cls, {})
            entry = per_workload.get(pod.workload)
            if entry is None:
                per_workload[pod.workload] = [pod.namespace, 1, {pod.detail: 1}]
            else:
                entry[1] += 1
                entry[2][pod.detail] = entry[2].get(pod.detail, 0) + 1
        unhealthy = tuple(_reason_group(cls, by_class[cls]) for cls in CLASSES if cls in by_class)
        self._judge_timed_episodes(timed, now)
        episodes = tuple(
            Episode(
                workload=w, kind=k, number=s.number, since=s.since, open=s.open, pods=s.pods, ended=s.ended
            )
            for (w, k), s in sorted(self._episodes.items())
            if s.since is not None and s.number > 0
        )
        rollouts = tuple(
            RolloutView(
                key=key,
                kind=w.kind,
                namespace=w.namespace,
                name=w.name,
                generation=w.generation,
                state=w.state,
                message=w.message,
                spec_change=bool(w.pending),
            )
            for key, w in sorted(self._rolling.items())
        )
        warnings = tuple(
            WarningCount(reason=r, count=c)
            for r, c in sorted(self._warnings.items(), key=lambda rc: (-rc[1], rc[0]))[:WARNING_REASONS_KEPT]
            if c > 0
        )
        holds = target is not None and self._target_since is not None
        rule_episodes = tuple(
            RuleEpisode(
                rule=rule,
                workload=workload,
                number=s.number,
                since=s.since,
                open=s.open or s.carried,
                pods=s.pods,
                evidence=s.evidence,
                ended=s.ended,
            )
            for (rule, workload), s in sorted(self._rule_episodes.items())
            if s.since is not None and s.number > 0
        )
        return Summary(
            cluster=self.spec.cluster,
            at=now,
            control_plane=self._control_plane,
            nodes=nodes,
            groups=groups,
            pods=max(self._pod_count, len(self._pods)),
            unhealthy=unhealthy,
            episodes=episodes,
            rollouts=rollouts,
            completed=tuple(self._completed),
            warnings=warnings,
            rule_episodes=rule_episodes,
            target_holds=holds,
            target_since=self._target_since if holds else None,
            last_unhealthy_at=last_unhealthy,
        )


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


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _spec_change(kind: str, raw: Mapping[str, Any]) -> bool:
    """Is a new spec rolling out (rather than pods of the current spec being unavailable)?"""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if _int(meta.get("generation")) > _int(status.get("observedGeneration")):
        return True
    if kind == "Deployment":
        updated = _int(status.get("updatedReplicas"))
        return updated < _int(spec.get("replicas", 1)) or _int(status.get("replicas")) > updated
    if kind == "DaemonSet":
        return _int(status.get("updatedNumberScheduled")) < _int(status.get("desiredNumberScheduled"))
    if kind == "StatefulSet":
        current, update = status.get("currentRevision"), status.get("updateRevision")
        return bool(update) and update != current
    return False
