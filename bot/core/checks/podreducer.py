"""The pods' reducer of a check: what the checks and rules need of each page of pods, made in the
kube adapter's helper process (`PodReducer`, the pods' `map_pages` transform), and folded back in the
bot's process (`_PodFold`) into per-workload pod names, nodes' room and the `PodState`s a known-issue
rule may match. `gather.read_facts` drives both; split from it so that each of the two rooms reads
on its own (see `gather`'s docstring for why the pods are reduced in a helper).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any, cast

import msgspec

from bot.core.checks import schema
from bot.core.checks.cluster_health import (
    quantity,
)
from bot.core.checks.logprobe import LOGS_PER_WORKLOAD, MAX_LOG_READS
from bot.core.kube.objects import APP, INIT, SIDECAR, ready_count, sidecars
from bot.core.kube.wire import Controller, Toleration
from bot.core.rules import (
    ANNOTATED,
    CONTAINER_NOT_READY,
    DELETING,
    EVENTS,
    IN_KIND,
    IN_NAMESPACE,
    LABELLED,
    LOGGED,
    NAMED_CONTAINER,
    NODE_NOT_READY,
    TERMINATED,
    TOLERATES_ALL,
    WAITING,
    ContainerView,
    EventRecord,
    PodState,
    Rule,
    RuleHit,
    Screen,
    match_rules,
)
from bot.core.rules.patterns import MatchBudget
from bot.errors import ClusterError

log = logging.getLogger(__name__)


#: The log budget's value once the API refused a log read (403): nothing more is read.
LOGS_FORBIDDEN = -1


#: Unhealthy pods kept per workload for the report (the rest are counted by the finding).
MAX_UNHEALTHY_PER_WORKLOAD = 5


class _Everything:
    """A set that holds every name."""

    def __contains__(self, _item: object) -> bool:
        return True


def _tag(image: str) -> str:
    """The tag of an image reference ("1.17.2" of docker.io/istio/proxyv2:1.17.2), digest dropped."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def workload_of(meta: schema.PodMeta) -> tuple[str, bool]:
    """("Deployment ns/name", has a controller) for a pod: a ReplicaSet's hash suffix is dropped
    using the pod's own `pod-template-hash` label, so no ReplicaSet list is needed."""
    ns = meta.namespace or ""
    for ref in meta.owner_references or ():
        if not ref.controller:
            continue
        kind, name = ref.kind or "", ref.name or ""
        if kind == "ReplicaSet":
            h = meta.labels.pod_template_hash if meta.labels is not None else None
            if h and name.endswith("-" + h):
                return f"Deployment {ns}/{name[: -len(h) - 1]}", True
        return f"{kind} {ns}/{name}", True
    return f"Pod {ns}/{meta.name or ''}", False


def _append(into: dict[str, list[str]], key: str, value: str) -> None:
    """`into.setdefault(key, []).append(value)` without a new empty list per call."""
    have = into.get(key)
    if have is None:
        into[key] = [value]
    else:
        have.append(value)


def _pod_reason(pod: schema.Pod) -> str:
    """What kubectl's STATUS column would show for a pod that is not Running and Ready."""
    if pod.metadata.deletion_timestamp:
        return "Terminating"
    statuses = schema.container_statuses(pod.status)
    for cs in statuses:
        state = cs.state
        if state is not None and state.waiting is not None and state.waiting.reason:
            return state.waiting.reason
        if state is not None and state.terminated is not None and state.terminated.reason:
            return state.terminated.reason
    ready, total = ready_count((c.kind, c.ready) for c in _containers(pod))
    return f"{ready}/{total} ready" if statuses else (pod.status.reason or "")


def _reasons(cs: schema.ContainerStatus) -> tuple[str, str]:
    """(waiting, terminated) reasons of a container; terminated is the current state's, else the
    last state's."""
    state, last = cs.state, cs.last_state
    waiting = state.waiting.reason or "" if state is not None and state.waiting is not None else ""
    if state is not None and state.terminated is not None:
        return waiting, state.terminated.reason or ""
    if last is not None and last.terminated is not None:
        return waiting, last.terminated.reason or ""
    return waiting, ""


def _tolerates_all(tolerations: Sequence[Toleration] | None) -> bool:
    # A loop, not any(): this runs for every pod, and a generator per pod costs more than the test.
    for t in tolerations or ():  # noqa: SIM110
        if t.operator == "Exists" and not t.key and not t.effect:
            return True
    return False


def _named(values: msgspec.Struct | None, keys: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The labels (or annotations) of `keys` that a pod has, as a dict."""
    out: dict[str, str] = {}
    if values is not None:
        for key, attr in keys:
            value = getattr(values, attr)
            if value is not None:
                out[key] = value
    return out


def _statuses(pod: schema.Pod) -> list[tuple[str, schema.ContainerStatus]]:
    """(kind, status) of each of a pod's containers, its init containers first (as the watch keeps
    them), so that a rule and kubectl's READY count (`ready_count`) read the same pod in `check`
    as in the watch."""
    inits = schema.init_container_statuses(pod.status)
    out: list[tuple[str, schema.ContainerStatus]] = []
    if inits:
        side = sidecars((c.name or "", c.restart_policy) for c in schema.init_containers(pod.spec))
        out += [(SIDECAR if (cs.name or "") in side else INIT, cs) for cs in inits]
    out += [(APP, cs) for cs in schema.container_statuses(pod.status)]
    return out


def _containers(pod: schema.Pod) -> list[ContainerView]:
    out = []
    for kind, cs in _statuses(pod):
        waiting, terminated = _reasons(cs)
        out.append(
            ContainerView(
                name=cs.name or "",
                image=cs.image or "",
                ready=bool(cs.ready),
                waiting=waiting,
                terminated=terminated,
                kind=kind,
            )
        )
    return out


def pod_state(
    pod: schema.Pod, workload: str, shape: schema.PodSchema, node_ready: Mapping[str, bool]
) -> PodState:
    """A pod as the rules see it; its labels and annotations are those the rules name."""
    meta, spec = pod.metadata, pod.spec
    containers = _containers(pod)
    return PodState(
        namespace=meta.namespace or "",
        name=meta.name or "",
        workload=workload,
        node=spec.node_name or "",
        phase=pod.status.phase or "",
        deleting=bool(meta.deletion_timestamp),
        node_ready=node_ready.get(spec.node_name or "", True),
        tolerates_all=_tolerates_all(schema.tolerations(spec)),
        labels=_named(meta.labels, shape.labels),
        annotations=_named(meta.annotations, shape.annotations),
        containers=tuple(containers),
    )


def _container_signals(pod: schema.Pod, screen: Screen) -> int:
    """The containers' part of `screen.signals(pod_state(pod, …))` (the log tail aside)."""
    names, out = screen.containers, 0
    for _, cs in _statuses(pod):
        if (cs.name or "") in names:
            out |= NAMED_CONTAINER
        if not cs.ready:
            out |= CONTAINER_NOT_READY
        state, last = cs.state, cs.last_state
        if (state is not None and (state.waiting is not None or state.terminated is not None)) or (
            last is not None and last.terminated is not None
        ):
            waiting, terminated = _reasons(cs)
            if waiting:
                out |= WAITING
            if terminated:
                out |= TERMINATED
    return out & screen.used


_CONTAINER_SIGNALS = NAMED_CONTAINER | CONTAINER_NOT_READY | WAITING | TERMINATED


def _name_finder(names: frozenset[str] | _Everything) -> re.Pattern[bytes] | None:
    """A search for any of `names` as a JSON string in a page's bytes (None for every name): a
    container's name is a DNS label, which JSON never escapes, so a status named one of them holds
    the name quoted, byte for byte; a hit is a candidate, the decoded names decide."""
    if isinstance(names, _Everything):
        return None
    if not names:
        return re.compile(rb"(?!)")  # matches nothing
    return re.compile(b"|".join(re.escape(json.dumps(name).encode()) for name in sorted(names)))


def _getter(keys: Sequence[tuple[str, str]]) -> Callable[[Any], tuple[Any, ...]] | None:
    """The values of the attributes of `keys` (`PodSchema.labels`/`annotations`) as a tuple, in
    one C call; None for no keys."""
    attrs = [attr for _, attr in keys]
    if not attrs:
        return None
    if len(attrs) == 1:
        get = attrgetter(attrs[0])
        return lambda values: (get(values),)
    return attrgetter(*attrs)


class _Candidate(msgspec.Struct, array_like=True, gc=False):
    """A pod that a rule may match, or whose log a rule may read, as the pods' helper sends it."""

    #: the signals it shows, but for NODE_NOT_READY and LOGGED (the caller's to add: see `_PodFold`)
    signals: int
    #: one of the first `LOGS_PER_WORKLOAD` pods of its workload with a container a log rule reads
    logs: bool
    #: as `pod_state` builds it, every node taken for Ready
    state: PodState


class _Slot(msgspec.Struct, array_like=True, gc=False):
    """A node's room as the caller decodes it (`_ReducedPage.rooms`): the requests of every pod on
    the node, of the pods a drain would evict, the largest such pod's, and the node's position.
    Decoded as lists, the 70,000 rooms of 150,000 pods' pages were most of what the bot's garbage
    collector tracked during a check, and its collections cost more than the pages' decoding."""

    used_cpu: int
    used_mem: int
    used_pods: int
    evict_cpu: int
    evict_mem: int
    evict_pods: int
    big_cpu: int
    big_mem: int
    position: int


class _ReducedPage(msgspec.Struct, array_like=True, gc=False):
    """One page of pods as the checks and rules need it; the fields are `PodSummary`'s, per page."""

    unhealthy: dict[str, list[tuple[str, str, str]]]
    not_evictable: dict[str, list[str]]
    empty_dir: dict[str, list[str]]
    host_path: dict[str, list[str]]
    bare: list[str]
    #: workload → the istio-proxy versions its pods on this page run
    proxies: dict[str, list[str]]
    #: (namespace, name) of the pods on this page that events are about
    seen: list[tuple[str, str]]
    candidates: list[_Candidate]
    #: The requests of the pods of this page's nodes as far as the process that reduced it has
    #: seen (each node's `_ROOM` values and its position, in the order that process first saw
    #: them): the caller keeps the last of each, instead of adding up 150,000 per-page figures in
    #: its interpreter. The helper sends lists of the nine integers, which MessagePack encodes in
    #: C (packing them into int64 bytes in its interpreter cost it 60 ms); the caller decodes them
    #: as `_Slot`s, which the garbage collector does not track.
    rooms: list[_Slot]
    #: the nodes first seen on this page, in order (the next indexes of `rooms`)
    new_nodes: list[str]
    #: the process that reduced the page (the helper, or the caller's own once it took over)
    origin: int


#: The fields of a node's room in `_ReducedPage.rooms`: requests of every pod on it, of the pods
#: a drain would evict, and the largest such pod's.
_USED_CPU, _USED_MEM, _USED_PODS, _EVICT_CPU, _EVICT_MEM, _EVICT_PODS, _BIG_CPU, _BIG_MEM = range(8)


_ROOM = 8


#: What no struct compares equal to: `PodReducer`'s "last pod" before the first.
_NOTHING = object()


_REDUCED_ENCODER = msgspec.msgpack.Encoder()


_REDUCED_DECODER = msgspec.msgpack.Decoder(_ReducedPage)


def _scratch_and_local(volumes: Sequence[Any] | None) -> tuple[bool, bool]:
    """Whether the volumes hold an emptyDir, and a hostPath."""
    scratch = local = False
    for v in volumes or ():
        scratch = scratch or v.empty_dir is not None
        local = local or v.host_path is not None
    return scratch, local


def _add_versions(proxies: dict[str, list[str]], workload: str, tags: Sequence[str]) -> None:
    versions = proxies.get(workload)
    if versions is None:
        proxies[workload] = versions = []
    for tag in tags:
        if tag not in versions:
            versions.append(tag)


#: A pod's owner as `PodReducer._owner` tells it: its workload, whether a controller owns it,
#: whether that is a DaemonSet, and the rules' signals all of the workload's pods show.
_Owner = tuple[str, bool, bool, int]


def _empty_page() -> _ReducedPage:
    return _ReducedPage(
        unhealthy={},
        not_evictable={},
        empty_dir={},
        host_path={},
        bare=[],
        proxies={},
        seen=[],
        candidates=[],
        rooms=[],
        new_nodes=[],
        origin=os.getpid(),
    )


#: No node is known to the pods' helper: every pod's node is taken for Ready there.
_ALL_READY: Mapping[str, bool] = {}


class PodReducer:
    """The pods' `map_pages` transform, run in the kube adapter's helper process: a page of pods in,
    what the checks and rules need of it out (`_ReducedPage`, as MessagePack).

    Most pods come back as a name in a list or nothing at all; a pod becomes a `PodState` only if
    some rule may match it (`Screen`) or a log rule may read its log. The helper sees the pages in
    order, so the per-workload memory (each controller's workload, which pods' logs are asked for)
    lives here.
    Node readiness is not known yet when the helper starts (the nodes are listed meanwhile): a pod
    is sent if a rule could match it were its node NotReady, and the caller decides.
    """

    def __init__(
        self,
        *,
        screen: Screen,
        shape: schema.PodSchema,
        rules: bool,
        with_events: frozenset[tuple[str, str]],
        log_containers: frozenset[str] | _Everything,
        log_rules: Sequence[Rule] = (),
    ) -> None:
        self._screen, self._shape, self._rules = screen, shape, rules
        self._with_events, self._log_containers = with_events, log_containers
        self._log_rules = tuple(log_rules)
        #: Log reads the pods offered so far would cost the caller (`_PodFold`, which reads them in
        #: the order offered until its `MAX_LOG_READS` are spent): once they are spent, no pod is
        #: offered for its log. Without `log_rules` to count them, or with a log rule that asks
        #: for a NotReady node (which only the caller knows), every pod that may be read is offered.
        self._log_reads_left = (
            MAX_LOG_READS
            if self._log_rules and not any(r.match.node_not_ready for r in self._log_rules)
            else -1
        )
        #: `workload_of` per controller, (namespace, kind, name, pod-template-hash) → its answer:
        #: the pods of a ReplicaSet share it.
        self._known: dict[tuple[str | None, str | None, str | None, str | None], tuple[str, bool]] = {}
        #: finds a log container's name in a pod's raw container statuses (None: any container)
        self._log_names = _name_finder(log_containers)
        self._tags: dict[str, str] = {}
        self._logs_asked: dict[str, int] = {}
        # Quantities as text → integers (millicores, bytes): a cluster has few distinct ones.
        self._cpu: dict[str, int] = {}
        self._mem: dict[str, int] = {}
        #: node → its `_ROOM` values (this process's pods) and position; `_rooms` in that order
        self._node_index: dict[str, list[int]] = {}
        self._rooms: list[list[int]] = []
        #: workload → its pods' IN_NAMESPACE and IN_KIND signals (the same for all of them)
        self._placed: dict[str, int] = {}
        used = screen.used
        #: one C call for the label (annotation) attributes the rules name, or None if none does
        self._labelled = _getter(shape.labels) if used & LABELLED else None
        self._annotated = _getter(shape.annotations) if used & ANNOTATED else None

    def __call__(self, items: list[schema.Pod]) -> bytes:
        out = _empty_page()
        #: node → its room, for the nodes of this page's pods
        touched: dict[str, list[int]] = {}
        # Two loops over the page rather than a call per pod (this runs 150,000 times): the
        # checks' part of each pod, then, with the workloads found there, the rules' part.
        owners = self._checks_part(items, out, touched)
        if self._rules:
            self._rules_part(items, owners, out)
        # Lists of the nine integers: MessagePack writes them as it writes `_Slot`s.
        out.rooms = cast("list[_Slot]", list(touched.values()))
        return _REDUCED_ENCODER.encode(out)

    def _checks_part(
        self, items: list[schema.Pod], out: _ReducedPage, touched: dict[str, list[int]]
    ) -> list[_Owner | None]:
        """What the checks need of the page's pods, into `out` (and the rooms of their nodes into
        `touched`); each pod's owner (`_owner`), None for a pod that is done (Succeeded)."""
        ready_true = schema.READY_TRUE.search
        index, rooms = self._node_index, self._rooms
        empty_dir = out.empty_dir
        owners: list[_Owner | None] = []
        # What the last pods of this page came to, reused for a pod whose structs compare equal
        # to theirs (the pods of a workload come one after another, alike as far as they are
        # decoded): the last pod's containers, their requests and sidecar versions, and the
        # workload those versions were last added for;
        last_containers: object = _NOTHING
        last_cpu = last_mem = 0
        last_tags: list[str] = []
        last_proxied: str | None = None
        # the last controlled pod's owner and what follows from it (`_owner`); the last volumes.
        last_refs: object = _NOTHING
        last_hash: str | None = None
        last_ns = ""
        last_owner: _Owner = ("", False, False, 0)
        last_volumes: object = _NOTHING
        last_scratch = last_local = False
        for pod in items:
            meta, spec, status = pod.metadata, pod.spec, pod.status
            phase = status.phase or ""
            if phase == "Succeeded":
                owners.append(None)
                continue
            ns, name = meta.namespace or "", meta.name or ""
            # `workload_of` remembered, `schema.pod_ready` and `_append`, inline: a call per pod
            # costs more than them.
            # The pods of a ReplicaSet come one after another: where a pod's owner is the last
            # controlled pod's (its structs compare equal), so is what follows from it.
            refs, labels = meta.owner_references, meta.labels
            h = None if labels is None else labels.pod_template_hash
            if refs == last_refs and h == last_hash and ns == last_ns:
                owner = last_owner
            else:
                owner = self._owner(meta, refs, h, ns)
                if owner[1]:  # controlled
                    last_refs, last_hash, last_ns, last_owner = refs, h, ns, owner
            owners.append(owner)
            workload, controlled, daemon, _signals = owner
            annotations = meta.annotations
            mirror = annotations is not None and annotations.config_mirror is not None
            moved = not mirror and not daemon  # a drain evicts it
            ready = ready_true(status.conditions) is not None or schema.ready_decoded(status)
            if phase != "Running" or not ready or meta.deletion_timestamp:
                rows = out.unhealthy.setdefault(workload, [])
                if len(rows) < MAX_UNHEALTHY_PER_WORKLOAD:
                    rows.append((name, phase or "Unknown", _pod_reason(pod)))
            if annotations is not None and annotations.safe_to_evict == "false":
                _append(out.not_evictable, workload, name)
            if moved:
                volumes = spec.volumes
                if volumes == last_volumes:
                    scratch, local = last_scratch, last_local
                else:
                    scratch, local = _scratch_and_local(volumes)
                    last_volumes, last_scratch, last_local = volumes, scratch, local
                if scratch:
                    names = empty_dir.get(workload)
                    if names is None:
                        empty_dir[workload] = [name]
                    else:
                        names.append(name)
                if local:
                    _append(out.host_path, workload, name)
                if not controlled:
                    out.bare.append(f"{ns}/{name}")
            # One pass over the containers: the sidecar's version and the requests the pod holds,
            # unless they are the last pod's (names, images, requests: one comparison).
            containers = spec.containers
            if containers == last_containers:
                cpu, mem = last_cpu, last_mem
            else:
                cpu, mem, last_tags = self._requests(containers)
                last_containers, last_cpu, last_mem, last_proxied = containers, cpu, mem, None
            if last_tags and workload is not last_proxied:
                _add_versions(out.proxies, workload, last_tags)
                last_proxied = workload
            node = spec.node_name
            if node and phase != "Failed":
                # Literal indexes (`_USED_CPU`…, in order): a global's lookup per pod costs more.
                room = index.get(node)
                if room is None:
                    # The `_ROOM` values, then the node's position in the order first seen.
                    room = index[node] = [0, 0, 0, 0, 0, 0, 0, 0, len(rooms)]
                    rooms.append(room)
                    out.new_nodes.append(node)
                touched[node] = room
                room[0] += cpu
                room[1] += mem
                room[2] += 1
                if moved and not meta.deletion_timestamp:
                    room[3] += cpu
                    room[4] += mem
                    room[5] += 1
                    if cpu > room[6]:
                        room[6] = cpu
                    if mem > room[7]:
                        room[7] = mem
        return owners

    def _rules_part(self, items: list[schema.Pod], owners: list[_Owner | None], out: _ReducedPage) -> None:
        """The page's pods a rule may match, or whose log a log rule may read, into `out`.

        Most pods can match no rule: their signals say so before a PodState is built. The
        pod-level part of `_pod_signals`, inline (a call per pod costs as much as its tests); with
        no node known here, every node is Ready."""
        screen, shape = self._screen, self._shape
        logs_asked = self._logs_asked
        with_events, reads_logs = self._with_events, bool(self._log_containers)
        maybe = screen.used & NODE_NOT_READY
        used, wants = screen.used, screen.table
        deleting, tolerates = used & DELETING, used & TOLERATES_ALL
        labelled, annotated = self._labelled, self._annotated
        n_labelled, n_annotated = len(shape.labels), len(shape.annotations)
        last_tolerations: object = _NOTHING
        last_tolerant = False
        for pod, owner in zip(items, owners, strict=True):
            if owner is None:
                continue
            workload, _controlled, _daemon, signals = owner
            meta = pod.metadata
            if meta.deletion_timestamp:
                signals |= deleting
            if tolerates:
                spec = pod.spec
                tolerations = spec.tolerations
                if tolerations != last_tolerations:  # the bytes: one comparison in C
                    last_tolerations = tolerations
                    last_tolerant = _tolerates_all(schema.tolerations(spec))
                if last_tolerant:
                    signals |= TOLERATES_ALL
            annotations = meta.annotations
            if (
                annotated is not None
                and annotations is not None
                and annotated(annotations).count(None) != n_annotated
            ):
                signals |= ANNOTATED
            if with_events:
                key = (meta.namespace or "", meta.name or "")
                if key in with_events:
                    out.seen.append(key)
                    signals |= EVENTS
            logs = (
                reads_logs
                and self._log_reads_left != 0
                and logs_asked.get(workload, 0) < LOGS_PER_WORKLOAD
                and self._asks_logs(workload, pod.status)
            )
            # The labels, then the containers' signals, only where they could still make a rule
            # match (`wants` only grows with the signals: a pod it refuses with every signal still
            # to come is refused without them).
            if labelled is not None and (logs or wants[signals | maybe | _CONTAINER_SIGNALS | LABELLED]):
                labels = meta.labels
                if labels is not None and labelled(labels).count(None) != n_labelled:
                    signals |= LABELLED
            if logs or wants[signals | maybe | _CONTAINER_SIGNALS]:
                self._offer(out.candidates, pod, workload, signals, logs=logs)

    # What `__call__` asks only when a pod differs from the last one, or may interest a rule: a
    # call per pod would cost more than its tests, a call per workload or candidate does not.

    def _owner(
        self, meta: schema.PodMeta, refs: tuple[Controller, ...] | None, h: str | None, ns: str
    ) -> _Owner:
        """The pod's workload, whether a controller owns it, whether that is a DaemonSet, and the
        rules' signals that are the same for all of the workload's pods (`workload_of`
        remembered per controller: the pods of a ReplicaSet share it)."""
        if refs is not None and len(refs) == 1 and refs[0].controller:
            ref = refs[0]
            owner = (meta.namespace, ref.kind, ref.name, h)
            answer = self._known.get(owner)
            if answer is None:
                answer = self._known[owner] = workload_of(meta)
        else:
            answer = workload_of(meta)  # no controller: the answer names the pod
        workload, controlled = answer
        screen = self._screen
        placed_signals = self._placed.get(workload, -1)
        if placed_signals < 0:
            placed_signals = self._placed[workload] = (
                (IN_NAMESPACE if ns in screen.namespaces else 0)
                | (IN_KIND if workload.startswith(screen.kind_prefixes) else 0)
            ) & screen.used
        return workload, controlled, workload.startswith("DaemonSet "), placed_signals

    def _requests(self, containers: Sequence[schema.PodContainer] | None) -> tuple[int, int, list[str]]:
        """The CPU (millicores) and memory (bytes) the containers request, and the istio-proxy
        versions they run."""
        tags, cpu_of, mem_of = self._tags, self._cpu, self._mem
        cpu = mem = 0
        versions: list[str] = []
        for c in containers or ():
            image = c.image
            if image and c.name == "istio-proxy":
                tag = tags.get(image)
                if tag is None:
                    tag = tags[image] = _tag(image)
                versions.append(tag)
            res = c.resources
            if res is not None:
                req = res.requests
                if req is not None:
                    q = req.cpu
                    if q:
                        n = cpu_of.get(q)
                        if n is None:
                            n = cpu_of[q] = quantity(q, milli=True)
                        cpu += n
                    q = req.memory
                    if q:
                        n = mem_of.get(q)
                        if n is None:
                            n = mem_of[q] = quantity(q)
                        mem += n
        return cpu, mem, versions

    def _asks_logs(self, workload: str, status: schema.PodStatus) -> bool:
        """Whether a log rule may read a container of the pod (one of its workload's first
        `LOGS_PER_WORKLOAD`); counted for the workload if so."""
        log_names = self._log_names
        # The page's bytes first: most pods have no container a log rule reads, and their
        # statuses are not decoded at all.
        if not (
            log_names.search(status.container_statuses)
            if log_names is not None
            else status.container_statuses
        ):
            return False
        for cs in schema.container_statuses(status):
            if (cs.name or "") in self._log_containers:
                self._logs_asked[workload] = self._logs_asked.get(workload, 0) + 1
                return True
        return False

    def _offer(
        self, candidates: list[_Candidate], pod: schema.Pod, workload: str, signals: int, *, logs: bool
    ) -> None:
        """The pod as a candidate, if its containers' signals still let a rule match it (or a log
        rule may read it): the few pods the pod-level signals did not rule out come here."""
        signals |= _container_signals(pod, self._screen)
        if not logs and not self._screen.table[signals | (self._screen.used & NODE_NOT_READY)]:
            return
        state = pod_state(pod, workload, self._shape, _ALL_READY)
        if logs and self._log_reads_left > 0:
            # What `_with_logs` will read of it: a read per container some log rule wants.
            wanted = {name for rule in self._log_rules for name in rule.log_wanted(state)}
            self._log_reads_left = max(self._log_reads_left - len(wanted), 0)
        candidates.append(_Candidate(signals, logs, state))


class _PodFold:
    """The caller's side of `PodReducer`: its pages folded, in order, into the pods' part of the
    facts and the rules' hits. A candidate on a NotReady node gets its signal here; the log tails
    are read here (requests, with a budget), for the pods the helper offered."""

    def __init__(
        self,
        *,
        rules: Sequence[Rule],
        budget: MatchBudget,
        screen: Screen,
        node_ready: Mapping[str, bool],
        events: Mapping[tuple[str, str], list[EventRecord]],
        log_rules: Sequence[Rule],
        get_raw: Callable[..., bytes] | None,
    ) -> None:
        self._rules, self._screen, self._node_ready, self._events = rules, screen, node_ready, events
        self._log_rules, self._get_raw = log_rules, get_raw
        self._budget = budget
        self.unhealthy: dict[str, list[tuple[str, str, str]]] = {}
        self.not_evictable: dict[str, list[str]] = {}
        self.empty_dir: dict[str, list[str]] = {}
        self.host_path: dict[str, list[str]] = {}
        self.bare: list[str] = []
        self.proxies: dict[str, set[str]] = {}
        #: process → its nodes in position order, and the last room it sent of each by position
        self._rooms: dict[int, tuple[list[str], dict[int, _Slot]]] = {}
        self.log_budget = MAX_LOG_READS
        self.logs_forbidden = False
        self._seen: set[tuple[str, str]] = set()
        self._logs_read: dict[str, int] = {}
        self._batch: list[PodState] = []
        self._hits: dict[tuple[str, str], RuleHit] = {}

    def add(self, data: bytes) -> None:
        page = _REDUCED_DECODER.decode(data)
        for workload, rows in page.unhealthy.items():
            have = self.unhealthy.setdefault(workload, [])
            have.extend(rows[: MAX_UNHEALTHY_PER_WORKLOAD - len(have)])
        for into, part in (
            (self.not_evictable, page.not_evictable),
            (self.empty_dir, page.empty_dir),
            (self.host_path, page.host_path),
        ):
            for workload, names in part.items():
                have_names = into.get(workload)
                if have_names is None:
                    into[workload] = names
                else:
                    have_names.extend(names)
        self.bare.extend(page.bare)
        names, slots = self._rooms.setdefault(page.origin, ([], {}))
        names.extend(page.new_nodes)
        for slot in page.rooms:
            slots[slot.position] = slot
        for workload, tags in page.proxies.items():
            self.proxies.setdefault(workload, set()).update(tags)
        self._seen.update(page.seen)
        screen, used = self._screen, self._screen.used
        for candidate in page.candidates:
            signals, state = candidate.signals, candidate.state
            if not self._node_ready.get(state.node, True):
                state = replace(state, node_ready=False)
                signals |= NODE_NOT_READY & used
            if candidate.logs and self.log_budget > 0 and self._get_raw is not None:
                read = self._logs_read.get(state.workload, 0)
                if read < LOGS_PER_WORKLOAD:
                    budget = [self.log_budget]
                    state = _with_logs(self._get_raw, state, self._log_rules, budget)
                    self.logs_forbidden = budget[0] == LOGS_FORBIDDEN
                    self.log_budget = max(budget[0], 0)
                    self._logs_read[state.workload] = read + 1
                    if any(c.log_tail for c in state.containers):
                        signals |= LOGGED
            if not screen.wants(signals):
                continue
            self._batch.append(state)
            if len(self._batch) >= 500:
                self._match()

    def _match(self) -> None:
        batch, self._batch = self._batch, []
        events = _events_of(batch, self._events)
        _merge(self._hits, match_rules(self._rules, batch, events, budget=self._budget))

    @property
    def rooms(self) -> dict[str, list[int]]:
        """node → the requests of its pods (`_USED_CPU`…), every process's added up."""
        out: dict[str, list[int]] = {}
        for names, slots in self._rooms.values():
            for position, slot in slots.items():
                node = names[position]
                room = list(msgspec.structs.astuple(slot)[:_ROOM])
                have = out.get(node)
                if have is None:
                    out[node] = room
                    continue
                for i in range(_BIG_CPU):
                    have[i] += room[i]
                for i in (_BIG_CPU, _BIG_MEM):
                    have[i] = max(have[i], room[i])
        return out

    def finish(self) -> list[RuleHit]:
        """The rules' hits, once every page is in."""
        if self._batch:
            self._match()
        orphans = [e for key, evs in self._events.items() if key not in self._seen for e in evs]
        if orphans:
            # Events about objects that are not pods (any more): a node, a PDB, a pod already gone.
            _merge(self._hits, match_rules(self._rules, [], orphans, budget=self._budget))
        return sorted(self._hits.values(), key=lambda h: h.key)


def _events_of(
    batch: Sequence[PodState], by_pod: Mapping[tuple[str, str], list[EventRecord]]
) -> list[EventRecord]:
    out: list[EventRecord] = []
    for p in batch:
        out.extend(by_pod.get((p.namespace, p.name), ()))
    return out


def _merge(into: dict[tuple[str, str], RuleHit], hits: Sequence[RuleHit]) -> None:
    for hit in hits:
        have = into.get(hit.key)
        if have is None:
            into[hit.key] = hit
        elif hit.pods:
            into[hit.key] = RuleHit(
                rule=have.rule,
                workload=have.workload,
                namespace=have.namespace,
                pods=tuple(sorted({*have.pods, *hit.pods})),
                evidence=have.evidence,
                container=have.container,
                nodes=tuple(sorted(dict((*hit.nodes, *have.nodes)).items())),
            )


def _with_logs(
    get_raw: Callable[..., bytes], state: PodState, rules: Sequence[Rule], budget: list[int]
) -> PodState:
    wanted: dict[str, int] = {}
    for rule in rules:
        assert rule.match.log is not None
        for container_name in rule.log_wanted(state):
            wanted[container_name] = max(wanted.get(container_name, 0), rule.match.log.lines)
    if not wanted:
        return state
    containers: list[ContainerView] = []
    for c in state.containers:
        lines = wanted.get(c.name)
        if lines and budget[0] > 0:
            budget[0] -= 1
            try:
                raw = get_raw(
                    f"/api/v1/namespaces/{state.namespace}/pods/{state.name}/log",
                    {"container": c.name, "tailLines": lines, "limitBytes": 256 * 1024},
                )
                c = replace(c, log_tail=raw.decode("utf-8", "replace"))
            except ClusterError as exc:
                if exc.status == 403:
                    # pods/log is an opt-in role (deploy/rbac.yaml): no further reads, and the
                    # report says why the log-based rules saw no log.
                    budget[0] = LOGS_FORBIDDEN
                    log.info("container logs are not readable: %s", exc.user_message)
                    break
                log.info("no log for %s/%s %s: %s", state.namespace, state.name, c.name, exc)
        containers.append(c)
    containers.extend(state.containers[len(containers) :])
    return PodState(
        namespace=state.namespace,
        name=state.name,
        workload=state.workload,
        node=state.node,
        phase=state.phase,
        deleting=state.deleting,
        node_ready=state.node_ready,
        tolerates_all=state.tolerates_all,
        labels=state.labels,
        annotations=state.annotations,
        containers=tuple(containers),
    )
