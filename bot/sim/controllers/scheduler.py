"""The simulated kube-scheduler: binds pending pods to Ready, schedulable nodes that fit them.

Filters, in the order the real default plugins report them: the node is cordoned
(`spec.unschedulable`, unless the pod tolerates it), an untolerated NoSchedule/NoExecute taint,
the nodeSelector and required node affinity (including the `metadata.name` field affinity
DaemonSets use), then capacity: pod count, CPU and memory requests against allocatable. Among the
nodes left it picks the least loaded (fewest pods, then name). A pod that fits nowhere gets the
real `FailedScheduling` event ("0/5 nodes are available: 2 node(s) were unschedulable, …") and a
PodScheduled=False condition, and is retried whenever a node or pod changes.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from typing import Any

from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.objects import (
    node_ready,
    parse_quantity,
    required_node_terms,
    set_condition,
    tolerates,
)
from bot.sim.apiserver.store import DELETED, Record
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder

Obj = dict[str, Any]
FARGATE_SCHEDULER = "fargate-scheduler"
ZONE_LABEL = "topology.kubernetes.io/zone"


def _node_selector_terms_match(affinity: Obj, node: Obj) -> bool:
    terms = required_node_terms(affinity)
    if not terms:
        return True
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    for term in terms:
        ok = True
        for expr in term.get("matchExpressions") or []:
            ok = ok and _expr(expr, labels.get(expr.get("key", "")), expr.get("key", "") in labels)
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name":
                ok = ok and _expr(expr, name, True)
        if ok:
            return True
    return False


def _pinned_nodes(affinity: Obj) -> set[str] | None:
    """The node names a required node affinity allows, when every term pins `metadata.name` In a
    list (as DaemonSet pods are pinned); None when the affinity does not pin names."""
    terms = required_node_terms(affinity)
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        pins = [
            expr
            for expr in term.get("matchFields") or []
            if expr.get("key") == "metadata.name" and expr.get("operator") == "In"
        ]
        if not pins:
            return None
        names.update(str(v) for v in pins[0].get("values") or [])
    return names


def _expr(expr: Obj, value: str | None, present: bool) -> bool:
    op, values = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and value is not None:
        try:
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def requests_of(pod: Obj) -> tuple[float, float]:
    cpu = mem = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += parse_quantity(req.get("cpu"))
        mem += parse_quantity(req.get("memory"))
    return cpu, mem


def _nano(cores: float) -> int:
    """CPU in nano-cores, so that the per-node sums are exact whatever the order of changes."""
    return round(cores * 1e9)


class _NodeInfo:
    """What the filters read of one node version (decoded once per resourceVersion)."""

    __slots__ = ("cpu", "labels", "max_pods", "memory", "name", "node", "rv", "taints", "unschedulable")

    def __init__(self, rv: int, node: Obj) -> None:
        self.rv = rv
        self.node = node
        self.name: str = node["metadata"]["name"]
        self.labels: dict[str, str] = node["metadata"].get("labels") or {}
        nspec = node.get("spec") or {}
        self.unschedulable = bool(nspec.get("unschedulable"))
        taints = [t for t in nspec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
        if not node_ready(node) and not any(
            t.get("key", "").startswith("node.kubernetes.io/not-ready")
            or t.get("key", "").startswith("node.kubernetes.io/unreachable")
            for t in taints
        ):
            taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        self.taints: list[Obj] = taints
        alloc = (node.get("status") or {}).get("allocatable") or {}
        self.max_pods = parse_quantity(alloc.get("pods", 110))
        self.cpu = _nano(parse_quantity(alloc.get("cpu", 0)))
        self.memory = round(parse_quantity(alloc.get("memory", 0)))


class _Ask:
    """What the filters read of the pod being placed."""

    __slots__ = ("affinity", "cpu", "memory", "selector", "tolerates_cordon", "tolerations", "zones")

    def __init__(self, pod: Obj, zones: set[str]) -> None:
        spec = pod.get("spec") or {}
        self.tolerations: list[Obj] = spec.get("tolerations") or []
        self.selector: dict[str, str] = spec.get("nodeSelector") or {}
        self.affinity: Obj = spec.get("affinity") or {}
        cpu, mem = requests_of(pod)
        self.cpu, self.memory = _nano(cpu), round(mem)
        self.zones = zones
        self.tolerates_cordon = tolerates(
            self.tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        )


class Scheduler:
    name = "scheduler"

    def __init__(self, engine: Engine, events: Recorder) -> None:
        self.engine = engine
        self.api = engine.api
        self.events = events
        self.pending: set[tuple[str, str]] = set()
        # Decoding every node and its pods per decision would cost seconds at 5,000 nodes: cache by version.
        self._nodes: dict[str, _NodeInfo] = {}
        self._requests: dict[str, tuple[bool, float, float]] = {}
        #: node name → [pods that count against it, CPU in nano-cores, memory in bytes]: kept up
        #: to date from every pod change once built (a decision then costs O(nodes), not O(pods)).
        self._used: dict[str, list[int]] | None = None
        #: The nodes (in the store) by how many pods count against them, each list in name order,
        #: built and kept with `_used`: the least loaded node that fits is found without a scan.
        self._levels: dict[int, list[str]] = {}
        self._level_of: dict[str, int] = {}
        #: nodeSelector (as sorted items) → the names of the nodes whose labels it matches: the
        #: least-loaded search skips the others without decoding them (a twin's pods each select
        #: one of its node groups, and at 5,000 nodes the search would otherwise walk thousands of
        #: other groups' nodes per pod). Dropped whenever a node comes, goes or changes its labels.
        self._selected: dict[tuple[tuple[str, str], ...], set[str]] = {}
        #: Called for pods a Fargate profile should place (returns True if it took the pod).
        self.fargate_hook: Any = None
        engine.add(self, coalesce=True)

    def on_change(self, record: Record) -> None:
        kind = record.entry.kind.key
        if kind == "pods":
            if self._used is not None:
                if record.prev is not None:
                    self._account(record.prev, -1)
                if record.type != DELETED:
                    self._account(record.entry, 1)
            if record.type == DELETED:
                self.pending.discard(record.entry.key)
                self._requests.pop(record.entry.uid, None)
                # Capacity freed: pods waiting for room may fit now.
                if record.entry.fields.get("spec.nodeName"):
                    self._retry_all()
                return
            if not record.entry.fields.get("spec.nodeName"):
                self.engine.enqueue(self.name, record.entry.key)
        elif kind == "nodes":
            name = record.entry.name
            if record.type == DELETED or record.prev is None or record.prev.labels != record.entry.labels:
                self._selected.clear()
            if record.type == DELETED:
                self._nodes.pop(name, None)
                if name in self._level_of:
                    self._unlevel(name)
            elif self._used is not None and name not in self._level_of:
                self._level(name, (self._used.get(name) or [0])[0])
            if not record.heartbeat_only:  # a heartbeat makes no room and no new fit
                self._retry_all()

    def _retry_all(self) -> None:
        for key in sorted(self.pending):
            self.engine.enqueue(self.name, key)

    def sync(self, key: tuple[str, str]) -> None:
        pod = self.api.store.get("pods", *key)
        if pod is None or (pod.get("spec") or {}).get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            self.pending.discard(key)
            return
        spec = pod.get("spec") or {}
        if spec.get("schedulerName", "default-scheduler") == FARGATE_SCHEDULER:
            if self.fargate_hook is not None and self.fargate_hook(pod):
                self.pending.discard(key)
            return
        if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
            return
        node, message = self.pick(pod)
        if node is None:
            self.pending.add(key)
            status = pod.setdefault("status", {})
            before = [dict(c) for c in status.get("conditions") or []]
            set_condition(
                status,
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "reason": "Unschedulable",
                    "message": message,
                },
                self.engine.clock.now(),
            )
            if status.get("conditions") != before:
                self.api.write("pods", pod, status=True)
                self.events.emit(
                    pod, "Pod", "Warning", "FailedScheduling", message, component="default-scheduler"
                )
            return
        self.pending.discard(key)
        self.bind(pod, node)

    def bind_by_name(self, namespace: str, name: str, node: str) -> None:
        """POST pods/NAME/binding from a client (a custom scheduler): 404 for a missing pod, 409 for
        one already assigned."""
        with self.api.store.lock:
            pod = self.api.store.get("pods", namespace, name)
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
            if (pod.get("spec") or {}).get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                )
            self.bind(pod, node)

    def bind(self, pod: Obj, node: str) -> None:
        """Set spec.nodeName and PodScheduled=True, as the binding subresource does."""
        entry = self.api.store.entry("pods", pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        if entry is None:
            return
        obj = entry.obj()
        obj["spec"]["nodeName"] = node
        status = obj.setdefault("status", {})
        set_condition(
            status, {"type": "PodScheduled", "status": "True", "lastProbeTime": None}, self.engine.clock.now()
        )
        for c in status.get("conditions") or []:
            if c.get("type") == "PodScheduled":
                c.pop("reason", None)
                c.pop("message", None)
        self.api.store.update(entry.kind, obj, entry)
        m = obj["metadata"]
        self.events.emit(
            obj,
            "Pod",
            "Normal",
            "Scheduled",
            f"Successfully assigned {m.get('namespace', '')}/{m['name']} to {node}",
            component="default-scheduler",
        )

    def _claim_zones(self, pod: Obj) -> set[str]:
        ns = pod["metadata"].get("namespace", "")
        zones = set()
        for v in (pod.get("spec") or {}).get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                pvc = self.api.store.entry("persistentvolumeclaims", ns, claim)
                if pvc is not None and pvc.labels.get(ZONE_LABEL):
                    zones.add(pvc.labels[ZONE_LABEL])
        return zones

    def remember_requests(self, uid: str, cpu: float, memory: float) -> None:
        """Seed the requests cache (generated scenarios know them without decoding pods)."""
        self._requests[uid] = (True, cpu, memory)
        self._used = None  # pods loaded without change records: the usage is rebuilt when next needed
        self._levels, self._level_of = {}, {}

    def _selected_by(self, selector: dict[str, str]) -> set[str]:
        """The names of the nodes whose labels match `selector` (cached until a node's labels change)."""
        key = tuple(sorted(selector.items()))
        names = self._selected.get(key)
        if names is None:
            names = {
                e.name for e in self.api.store.entries("nodes") if all(e.labels.get(k) == v for k, v in key)
            }
            self._selected[key] = names
        return names

    def _node_infos(self) -> list[_NodeInfo]:
        out = []
        for e in self.api.store.entries("nodes"):
            cached = self._nodes.get(e.name)
            if cached is None or cached.rv != e.rv:
                cached = _NodeInfo(e.rv, e.obj())
                self._nodes[e.name] = cached
            out.append(cached)
        return out

    def _usage(self, entry: Any) -> tuple[bool, float, float]:
        """(counts against the node, cpu, memory) of a bound pod, cached by UID (requests are immutable)."""
        phase = entry.fields.get("status.phase", "")
        cached = self._requests.get(entry.uid)
        if cached is None:
            cpu, mem = requests_of(entry.obj())
            cached = (True, cpu, mem)
            self._requests[entry.uid] = cached
        return (phase not in ("Succeeded", "Failed"), cached[1], cached[2])

    def _account(self, entry: Any, sign: int) -> None:
        node = entry.fields.get("spec.nodeName", "")
        if not node or self._used is None:
            return
        counts, cpu, mem = self._usage(entry)
        if not counts:
            return
        used = self._used.setdefault(node, [0, 0, 0])
        used[0] += sign
        used[1] += sign * _nano(cpu)
        used[2] += sign * round(mem)
        if node in self._level_of:
            self._unlevel(node)
            self._level(node, used[0])
        if not used[0]:
            del self._used[node]

    def _level(self, node: str, count: int) -> None:
        bisect.insort(self._levels.setdefault(count, []), node)
        self._level_of[node] = count

    def _unlevel(self, node: str) -> None:
        count = self._level_of.pop(node)
        names = self._levels[count]
        del names[bisect.bisect_left(names, node)]
        if not names:
            del self._levels[count]

    def _used_on(self, node: str) -> list[int]:
        return self._usage_by_node().get(node) or [0, 0, 0]

    def _usage_by_node(self) -> dict[str, list[int]]:
        if self._used is None:
            # Built once from the store (the scenario's pods were loaded without change records),
            # then kept by on_change.
            self._levels, self._level_of = {}, {}
            self._used = {}
            for entry in self.api.store.entries("pods"):
                self._account(entry, 1)
            for e in self.api.store.entries("nodes"):
                self._level(e.name, (self._used.get(e.name) or [0])[0])
        return self._used

    def _info(self, name: str) -> _NodeInfo | None:
        e = self.api.store.entry("nodes", "", name)
        if e is None:
            return None
        cached = self._nodes.get(name)
        if cached is None or cached.rv != e.rv:
            cached = _NodeInfo(e.rv, e.obj())
            self._nodes[name] = cached
        return cached

    @staticmethod
    def _reason(info: _NodeInfo, ctx: _Ask, used: list[int]) -> str | None:
        """Why `info` cannot take the pod (the real filters' wording, in their order), or None."""
        labels = info.labels
        if info.unschedulable and not ctx.tolerates_cordon:
            return "node(s) were unschedulable"
        bad = next((t for t in info.taints if not tolerates(ctx.tolerations, t)), None)
        if bad is not None:
            value = f": {bad['value']}" if bad.get("value") else ""
            return f"node(s) had untolerated taint {{{bad['key']}{value}}}"
        if any(labels.get(k) != v for k, v in ctx.selector.items()) or not _node_selector_terms_match(
            ctx.affinity, info.node
        ):
            return "node(s) didn't match Pod's node affinity/selector"
        if ctx.zones and any(labels.get(ZONE_LABEL) != z for z in ctx.zones):
            # A zonal volume (EBS) can only be attached to a node in its zone.
            return "node(s) had volume node affinity conflict"
        count, used_cpu, used_mem = used
        if count + 1 > info.max_pods:
            return "Too many pods"
        if ctx.cpu and used_cpu + ctx.cpu > info.cpu:
            return "Insufficient cpu"
        if ctx.memory and used_mem + ctx.memory > info.memory:
            return "Insufficient memory"
        return None

    def fit_check(self, pod: Obj) -> Callable[[str, list[int]], str | None]:
        """The scheduler's filters for `pod` as a function of a node's name and the usage already
        counted against it ([pods, CPU in nano-cores, memory in bytes]): None where the pod fits,
        otherwise the reason (a scenario placing its pods itself, as if scheduled, asks this)."""
        ctx = _Ask(pod, self._claim_zones(pod))

        def reason(name: str, used: list[int]) -> str | None:
            info = self._info(name)
            return "node not found" if info is None else self._reason(info, ctx, used)

        return reason

    @staticmethod
    def usage_of(pod: Obj) -> list[int]:
        """What `pod` counts against its node: [1, CPU in nano-cores, memory in bytes]."""
        cpu, mem = requests_of(pod)
        return [1, _nano(cpu), round(mem)]

    def pick(self, pod: Obj) -> tuple[str | None, str]:
        pinned = _pinned_nodes((pod.get("spec") or {}).get("affinity") or {})
        if pinned is not None:
            # A pod pinned by name (a DaemonSet's) can only fit on those nodes: look at them alone,
            # and at every node only to word the FailedScheduling message when none fits.
            node, _ = self._pick(pod, pinned)
            if node is not None:
                return node, ""
        return self._pick(pod, None)

    def _pick(self, pod: Obj, only: set[str] | None) -> tuple[str | None, str]:
        ctx = _Ask(pod, self._claim_zones(pod))
        if only is None:
            # The least loaded node that fits, looked for in (pods, name) order: the same node the
            # full scan below would choose, which then only runs to word FailedScheduling.
            usage = self._usage_by_node()
            selected = self._selected_by(ctx.selector) if ctx.selector else None
            for count in sorted(self._levels):
                for name in self._levels[count]:
                    if selected is not None and name not in selected:
                        continue
                    info = self._info(name)
                    if info is not None and self._reason(info, ctx, usage.get(name) or [0, 0, 0]) is None:
                        return name, ""
        reasons: Counter[str] = Counter()
        fits: list[tuple[int, str]] = []
        nodes = self._node_infos()
        if only is not None:
            nodes = [n for n in nodes if n.name in only]
        for info in nodes:
            used = self._used_on(info.name)
            reason = self._reason(info, ctx, used)
            if reason is None:
                fits.append((used[0], info.name))
            else:
                reasons[reason] += 1
        if fits:
            fits.sort()
            return fits[0][1], ""
        detail = ", ".join(sorted(f"{n} {r}" for r, n in reasons.items()))
        total = len(nodes)
        message = f"0/{total} nodes are available: {detail}." if detail else f"0/{total} nodes are available."
        message += (
            f" preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
        )
        return None, message
