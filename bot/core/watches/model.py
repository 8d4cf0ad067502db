"""The live status model of a watch: Kubernetes events folded into state, state into a Summary.

Pure: no I/O, no clock (every call is given `now`), no threads; one driver thread owns a
`WatchState`: `sync` for a full (re)list, `apply` per event (O(1)), `summary(now)` is what gets
published and persisted. Speed and memory, pod classes, episodes, known issues and rollouts:
`docs/watch-model.md`.

The state keeps the pods, nodes and episodes itself (records in `parts`) and hands two parts to
collaborators it owns: the known-issue rules (`issues.KnownIssues`) and the workloads' rollouts
(`rollouts.Rollouts`). What a watch is asked is `spec.WatchSpec`; what it publishes is
`summary.Summary`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.core.kube.objects import (
    CLASSES,
    CRASHLOOP,
    ERROR,
    IMAGEPULL,
    INIT,
    KUBE_SYSTEM,
    NOT_READY,
    PENDING,
    TERMINATING,
    classify,
    initialized_at,
    node_group,
    parse_time,
    ready_since,
    workload_key,
    workload_of,
)
from bot.core.kube.versions import on_version, parse_version, version_order
from bot.core.kube.wire import WEvent, WNode, WPod
from bot.core.rules import PodState, Rule
from bot.core.rules.known import RuleNeeds, pod_facts, rules_workload, view_of
from bot.core.watches.issues import KnownIssues
from bot.core.watches.parts import Footprint, _deep_size, _Episode, _Flap, _Group, _Node, _Pod
from bot.core.watches.rollouts import Rollouts
from bot.core.watches.schema import KINDS, WORKLOAD_KINDS
from bot.core.watches.spec import SeenPod, WatchSpec, _pod_key
from bot.core.watches.summary import (
    FLAP_PODS_KEPT,
    FLAP_SPELLS,
    FLAP_WINDOW,
    TOP_WORKLOADS,
    WARNING_REASONS_KEPT,
    Episode,
    Flapping,
    FlapSpells,
    GroupView,
    LogRequest,
    NodeView,
    Summary,
    WarningCount,
    _reason_group,
)
from bot.decoders import convert

# ----- the mutable state -------------------------------------------------------------------------


_EPISODE_CLASSES = {CRASHLOOP: "crashloop", IMAGEPULL: "imagepull"}
_EVENT_EPISODES = frozenset(_EPISODE_CLASSES.values())
#: Episodes judged when the state is summarised (they depend on time, not only on events).
_TIMED_EPISODES = {ERROR: "error", INIT: "init"}
#: A workload's Error episode opens only once a pod has been in Error this long and the workload
#: is not crash-looping: the kubelet restarts a failed container within 10 s (its first back-off),
#: so the Error of a crash loop's first crash is not news of its own.
ERROR_SETTLE = timedelta(seconds=15)
#: A pod's Ready condition that turned False this long after the pod was Initialized was True
#: before (a pod starting up has been not Ready since about when it started).
FLAP_AFTER_START = timedelta(seconds=30)


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
        self._issues = KnownIssues(
            self._needs, version=_minor(spec.target.kubelet_version) if spec.target else ""
        )
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
        #: Pods that went from Ready to not Ready while watched (few: a pod starting is not one).
        self._flaps: dict[str, _Flap] = {}
        self._pod_count = 0
        self._episodes: dict[tuple[str, str], _Episode] = {}
        self._rollouts = Rollouts()
        self._events: dict[str, tuple[str, int]] = {}  # event uid → (reason, count)
        self._warnings: dict[str, int] = {}
        self._target_since: datetime | None = None
        self._last_unhealthy: datetime | None = None
        #: Streams failing now: kind → (since, why); and when the last blind stretch ended.
        self._blind: dict[str, tuple[datetime, str]] = {}
        self._seen_again: datetime | None = None
        # Pods already unhealthy when the watch first lists them are not *new* (settle counts new ones).
        self._pods_listed = False
        self._intern = sys.intern
        if previous is not None:
            self._seed(previous)

    # ----- restart --------------------------------------------------------------------------

    def _seed(self, previous: Summary) -> None:
        """Carry episode numbers, open episodes, pending rollouts and pods' readiness spells over a
        restart."""
        for ep in previous.episodes:
            state = self._episodes.setdefault((ep.workload, ep.kind), _Episode())
            state.number = ep.number
            state.since = ep.since
            state.ended = ep.ended
            state.carried = ep.open
        self._rollouts.seed(previous)
        self._control_plane = previous.control_plane
        self._issues.seed(previous.rule_episodes)
        for kept in previous.flap_spells:
            flap = self._flaps[kept.pod] = _Flap(self._intern(kept.workload))
            flap.went, flap.seen = kept.went, list(kept.seen)

    # ----- input ----------------------------------------------------------------------------

    def set_control_plane(self, git_version: str) -> None:
        self._control_plane = git_version

    def stream_failed(self, kind: str, why: str, now: datetime) -> None:
        """The list or watch of `kind` failed (the driver retries it): the watch is blind to it
        from `now` until it delivers again (`stream_back`)."""
        since = self._blind[kind][0] if kind in self._blind else now
        self._blind[kind] = (since, why)

    def stream_back(self, kind: str, now: datetime) -> None:
        """The stream of `kind` delivers again after failing."""
        if self._blind.pop(kind, None) is not None:
            self._seen_again = now

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
                self._rollouts.apply(wkind, "MODIFIED", obj)
            self._rollouts.sync(wkind, seen)
        elif kind == "event":
            self._events.clear()
            self._warnings.clear()
            self._issues.events.clear()
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
                self._rollouts.apply(WORKLOAD_KINDS[kind], event_type, typed)
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
        return obj if isinstance(obj, struct | SeenPod) else convert(obj, struct)

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
            self._flaps.pop(key, None)
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
            if record is None:
                self._note_flap(key, pod, namespace, now)
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
            state.begin(now)

    def _note_flap(self, key: str, pod: WPod, namespace: str, now: datetime) -> None:
        """A pod seen not Ready anew: a spell of a flap if it was Ready before (its Ready
        condition turned False well after it was Initialized), counted once per transition."""
        went = ready_since(pod)
        started = initialized_at(pod)
        if went is None or started is None or went - started < FLAP_AFTER_START:
            return
        flap = self._flaps.get(key)
        if flap is None:
            wkind, wname = workload_of(pod)
            flap = self._flaps[key] = _Flap(self._intern(workload_key(namespace, wkind, wname)))
        if flap.went == went:
            return  # the same spell, listed again
        flap.went = went
        flap.seen.append(now)
        del flap.seen[: -FLAP_SPELLS * 4]

    def _flapping(self, now: datetime) -> tuple[tuple[Flapping, ...], int]:
        """The workloads whose pods flap now (see `Summary.flapping`); forgets spells older than
        FLAP_WINDOW. (`_flap_spells` is what of them a restart carries on.)"""
        cutoff = now - FLAP_WINDOW
        per_workload: dict[str, list[int]] = {}
        pods = 0
        for key in list(self._flaps):
            flap = self._flaps[key]
            flap.seen = [t for t in flap.seen if t > cutoff]
            if not flap.seen:
                if key not in self._pods:
                    del self._flaps[key]
                continue
            if len(flap.seen) >= FLAP_SPELLS:
                pods += 1
                entry = per_workload.setdefault(flap.workload, [0, 0])
                entry[0] += 1
                entry[1] += len(flap.seen)
        ranked = sorted(
            per_workload.items(),
            key=lambda item: (not item[0].startswith(KUBE_SYSTEM + "/"), -item[1][1], item[0]),
        )
        shown = []
        for wkey, (n, spells) in ranked[:TOP_WORKLOADS]:
            namespace, kind, name = wkey.split("/", 2)
            shown.append(Flapping(key=wkey, namespace=namespace, kind=kind, name=name, pods=n, spells=spells))
        return tuple(shown), pods

    def _flap_spells(self) -> tuple[FlapSpells, ...]:
        """The pods' spells still within the window (`_flapping` has pruned them), the most recent
        first, at most FLAP_PODS_KEPT: persisted, so that a restart does not forget a flapping pod."""
        kept = sorted(
            ((key, flap) for key, flap in self._flaps.items() if flap.seen),
            key=lambda kf: (kf[1].seen[-1], kf[0]),
            reverse=True,
        )[:FLAP_PODS_KEPT]
        return tuple(
            FlapSpells(pod=key, workload=flap.workload, went=flap.went, seen=tuple(flap.seen))
            for key, flap in kept
        )

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
        self._issues.event(
            key,
            namespace=namespace,
            involved=involved,
            reason=reason,
            message=event.message or "",
            seen=min(when, now) if when is not None else now,
        )

    # ----- known-issue rules ----------------------------------------------------------------

    def logs_wanted(self) -> list[LogRequest]:
        """The container log tails the last summary's rules asked for and nobody read yet."""
        return self._issues.logs_wanted()

    def add_log_tail(self, workload: str, container: str, text: str) -> None:
        """A tail the driver read (or "" when it could not): see `KnownIssues.add_log_tail`."""
        self._issues.add_log_tail(workload, container, text)

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

    def _evaluate_rules(self, now: datetime) -> None:
        """Match the rules against the candidates and the recent matching events (`KnownIssues`)."""
        if self._needs is None or not self._pods_listed:
            return  # before the first pod list, an absent hit means nothing
        self._issues.evaluate(
            self._candidates(now),
            now,
            remembered=self._pods,
            scoped=self._scoped if self._scope_groups else None,
            scoped_nodes=self._scoped_nodes,
        )

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
            state.begin(now)
        for key, state in self._episodes.items():
            if key[1] not in _EVENT_EPISODES and key not in live:
                state.end(now)

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
        warnings = tuple(
            WarningCount(reason=r, count=c)
            for r, c in sorted(self._warnings.items(), key=lambda rc: (-rc[1], rc[0]))[:WARNING_REASONS_KEPT]
            if c > 0
        )
        holds = target is not None and self._target_since is not None
        flapping, flapping_pods = self._flapping(now)
        return Summary(
            cluster=self.spec.cluster,
            at=now,
            control_plane=self._control_plane,
            nodes=nodes,
            groups=groups,
            pods=max(self._pod_count, len(self._pods)),
            unhealthy=unhealthy,
            episodes=episodes,
            rollouts=self._rollouts.summary(),
            completed=tuple(self._rollouts.completed),
            warnings=warnings,
            rule_episodes=self._issues.summary(),
            target_holds=holds,
            target_since=self._target_since if holds else None,
            last_unhealthy_at=last_unhealthy,
            blind_since=min((since for since, _ in self._blind.values()), default=None),
            blind="; ".join(f"{kind}: {why}" for kind, (_, why) in sorted(self._blind.items()))[:300],
            seen_again_at=self._seen_again,
            flapping=flapping,
            flapping_pods=flapping_pods,
            flap_spells=self._flap_spells(),
        )


def _minor(version: str) -> str:
    """ "1.25.16" → "1.25" (a remedy's `{version}`: what `--kubernetes-version` takes)."""
    parts = version.lstrip("v").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else version
