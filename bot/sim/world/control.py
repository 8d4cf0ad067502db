"""The control API: the outside world's part, played on request (Python and `/sim/…` over HTTP).

Tests and rehearsals use it to make things happen that no Kubernetes client can: move simulated
time, upgrade the control plane, replace a node group the way the cloud pipeline does (a managed
node group the cloud drains, or a self-managed one whose old nodes someone else drains), wait
for an operation to finish or to reach a phase, run the scenario's scripted upgrade, inject a
fault now (a crash loop, an image that cannot be pulled, a container that never becomes ready,
log lines, an event, a node going NotReady, pods that hang in Terminating), compact history so
old resourceVersions answer 410, drop every open watch, and make the transport misbehave
(5xx/429 on a fraction of requests, slow responses).

Every method takes and returns plain JSON-able data, so the HTTP endpoint is a thin mapping.
"""

from __future__ import annotations

import itertools
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import parse_duration, rfc3339
from bot.sim.apiserver.errors import ApiError
from bot.sim.apiserver.metrics import Metrics
from bot.sim.apiserver.transport import TransportFaults
from bot.sim.controllers.behaviour import RULE_FAULTS, Rule, RuleBook
from bot.sim.controllers.engine import Engine
from bot.sim.controllers.events import Recorder
from bot.sim.controllers.kubelet import Kubelets
from bot.sim.controllers.nodes import NodeLifecycle
from bot.sim.world import gitops
from bot.sim.world.cloud import FINISHED, PHASES, Cloud, NodeGroupSpec
from bot.sim.world.scenario import Scenario

Obj = dict[str, Any]


class Control:
    def __init__(
        self,
        *,
        scenario: Scenario,
        api: Api,
        engine: Engine,
        cloud: Cloud,
        lifecycle: NodeLifecycle,
        kubelets: Kubelets,
        rules: RuleBook,
        events: Recorder,
        metrics: Metrics,
        transport: TransportFaults,
    ) -> None:
        self.scenario = scenario
        self.api = api
        self.store = api.store
        self.catalog = api.catalog
        self.clock = engine.clock
        self.engine = engine
        self.cloud = cloud
        self.lifecycle = lifecycle
        self.kubelets = kubelets
        self.rules = rules
        self.events = events
        self.metrics = metrics
        #: The HTTP server's transport faults, shared with it: set here, applied there.
        self.transport = transport
        self._fault_ids = itertools.count(1)
        self.faults: dict[str, Obj] = {}

    # ---- time -----------------------------------------------------------------------------------

    def now(self) -> str:
        return rfc3339(self.clock.now())

    def advance(self, seconds: float | str) -> str:
        """Move simulated time forward, firing everything due on the way. Returns the new time."""
        self.engine.advance(parse_duration(seconds))
        return self.now()

    def set_speed(self, speed: float) -> float:
        self.clock.set_speed(float(speed))
        with self.store.lock:
            self.engine._wake.notify_all()
        return self.clock.speed

    # ---- the cloud ------------------------------------------------------------------------------

    def upgrade_control_plane(self, version: str, duration: float | str | None = None) -> Obj:
        with self.store.lock:
            op = self.cloud.upgrade_control_plane(
                version, duration=None if duration is None else parse_duration(duration)
            )
            return op.as_dict()

    def replace_node_group(
        self,
        name: str,
        version: str,
        *,
        force: bool = False,
        max_unavailable: int | None = None,
        drain_timeout: float | str | None = None,
        drain: str = "cloud",
    ) -> Obj:
        """A node group update: `drain="cloud"` (managed: the cloud cordons and drains the old
        nodes) or `"external"` (self-managed: it terminates each old node once someone else has
        cordoned and drained it). Raises ValueError for an unknown mode or a refused option."""
        with self.store.lock:
            op = self.cloud.replace_node_group(
                name,
                version,
                force=force,
                max_unavailable=max_unavailable,
                drain_timeout=None if drain_timeout is None else parse_duration(drain_timeout),
                drain=drain,
            )
            return op.as_dict()

    def run_upgrade(self) -> Obj:
        """The scenario's scripted upgrade (its `upgrade:` section)."""
        with self.store.lock:
            return self.scenario.run_upgrade(self.cloud, self.engine, self.inject_fault).as_dict()

    def evictions(self) -> list[Obj]:
        """Every eviction the API accepted so far (namespace, name, uid, simulated time)."""
        with self.store.lock:
            return [dict(e) for e in self.api.evictions]

    def operations(self) -> list[Obj]:
        with self.store.lock:
            return [op.as_dict() for op in self.cloud.operations]

    def operation(self, op_id: str) -> Obj:
        with self.store.lock:
            try:
                return self.cloud.operation(op_id).as_dict()
            except KeyError:
                raise ApiError(404, "NotFound", f"no operation {op_id}") from None

    def wait_operation(self, op_id: str, timeout: float = 30.0, *, until: str = FINISHED) -> Obj:
        """Wait (real seconds) until an operation has reached the phase `until` (by default:
        until it is no longer InProgress) or has finished; returns it either way."""
        if until not in PHASES:
            raise ApiError(400, "BadRequest", f"unknown phase {until!r}; known: {', '.join(PHASES)}")
        self.operation(op_id)  # 404 for an unknown operation, before any waiting

        def reached() -> bool:
            op = self.cloud.operation(op_id)
            return op.state != "InProgress" or until in op.reached

        self.engine.wait_for(reached, timeout)
        return self.operation(op_id)

    def add_node(self, group: str, *, ready: bool = True, version: str | None = None) -> str:
        """One more node in a group (optionally at another kubelet version); returns its name."""
        with self.store.lock:
            if group not in self.cloud.groups:
                raise ApiError(404, "NotFound", f"no node group {group!r}")
            name = self.cloud.add_node(group, ready=ready, version=version)
            self.engine.settle()
            return name

    def add_node_group(
        self, name: str, *, count: int = 0, version: str | None = None, labels: dict[str, str] | None = None
    ) -> list[str]:
        """A new managed node group (as `eksctl create nodegroup`) with `count` Ready nodes."""
        with self.store.lock:
            if name in self.cloud.groups:
                raise ApiError(409, "AlreadyExists", f"node group {name!r} already exists")
            self.cloud.groups[name] = NodeGroupSpec(
                name=name, count=count, version=version or self.cloud.version, labels=dict(labels or {})
            )
            nodes = [self.cloud.add_node(name) for _ in range(count)]
            self.engine.settle()
            return nodes

    def remove_node(self, name: str) -> None:
        """The instance is terminated: its Node object is deleted (pods on it are garbage-collected)."""
        with self.store.lock:
            self.cloud.terminate(name)
            self.engine.settle()

    # ---- faults ---------------------------------------------------------------------------------

    def inject_fault(self, spec: Obj) -> str:
        """Inject a fault now; returns its id (for `clear_fault`). See README for the fault types."""
        if not isinstance(spec, dict) or "type" not in spec:
            raise ApiError(400, "BadRequest", "a fault needs a `type`")
        kind = str(spec["type"])
        fid = f"fault-{next(self._fault_ids)}"
        with self.store.lock:
            now = self.clock.now()
            if kind in RULE_FAULTS:
                body = {k: v for k, v in spec.items() if k not in ("type", "id")}
                for key, value in RULE_FAULTS[kind].items():
                    body.setdefault(key, value)
                if kind == "stuck_terminating":
                    body["stuck_terminating"] = True
                try:
                    rule = Rule.parse(body, since=now, name=fid)
                except ValueError as exc:
                    raise ApiError(400, "BadRequest", str(exc)) from None
                self.rules.add(rule)
                self.kubelets.refresh(
                    lambda pod: rule.match.pod_matches(
                        pod, self.lifecycle.facts((pod.get("spec") or {}).get("nodeName", ""))
                    )
                )
            elif kind == "node_not_ready":
                nodes = self._nodes_for(spec)
                for n in nodes:
                    self.lifecycle.kill(n)
                spec = {**spec, "nodes": nodes}
            elif kind == "event":
                self._event(spec)
            elif kind == "transport":
                self.set_transport(**{k: v for k, v in spec.items() if k != "type"})
            elif kind == "app_status":
                spec = {**spec, "before": self._app_status(spec, now=rfc3339(now))}
            elif kind == "drop_watches":
                self.drop_watches()
            else:
                raise ApiError(400, "BadRequest", f"unknown fault type {kind!r}")
            self.faults[fid] = {"id": fid, "at": rfc3339(now), **spec}
            self.engine.settle()
        return fid

    def clear_fault(self, fid: str) -> bool:
        with self.store.lock:
            fault = self.faults.pop(fid, None)
            if fault is None:
                return False
            kind = fault["type"]
            if kind in RULE_FAULTS:
                self.rules.remove(fid)
                self.kubelets.refresh(lambda pod: True)
            elif kind == "node_not_ready":
                for n in fault.get("nodes") or []:
                    self.lifecycle.revive(n)
            elif kind == "transport":
                self.set_transport()
            elif kind == "app_status":
                self._app_status(fault, now=rfc3339(self.clock.now()), restore=fault.get("before"))
            self.engine.settle()
            return True

    def list_faults(self) -> list[Obj]:
        with self.store.lock:
            return list(self.faults.values())

    def _nodes_for(self, spec: Obj) -> list[str]:
        if spec.get("node"):
            return [str(spec["node"])]
        group = spec.get("node_group")
        if not group:
            raise ApiError(400, "BadRequest", "node_not_ready needs `node` or `node_group`")
        names = sorted(n["metadata"]["name"] for n in self.cloud.nodes_of(str(group)))
        return names[: int(spec.get("count", 1))]

    def _app_status(self, spec: Obj, *, now: str, restore: Obj | None = None) -> Obj:
        """Set an Argo CD Application's or a Flux object's status as its controller would
        (`bot.sim.world.gitops`), or put back `restore`; returns the status it had before."""
        target = spec.get("object") or {}
        kind_name = str(target.get("kind", ""))
        served = next((s for s in self.catalog.served if s.kind.kind == kind_name and s.preferred), None)
        if served is None or not served.kind.extension:
            raise ApiError(
                400, "BadRequest", f"app_status: kind {kind_name!r} is not served (cluster.custom_resources)"
            )
        ns, name = str(target.get("namespace", "")), str(target.get("name", ""))
        obj = self.store.get(served.kind.key, ns, name)
        if obj is None:
            raise ApiError(404, "NotFound", f"{kind_name} {ns}/{name} not found")
        obj = {"kind": kind_name, **obj}
        before: Obj = dict(obj.get("status") or {})
        try:
            status = restore if restore is not None else gitops.status_for(obj, spec, now=now)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"app_status: {exc}") from None
        obj["status"] = status
        # Argo CD's CRD has no status subresource: its status is written with the object.
        self.api.update(served.kind, ns, name, obj, subresource="status" if served.kind.has_status else "")
        return before

    def _event(self, spec: Obj) -> None:
        target = spec.get("object") or {}
        kind_name = str(target.get("kind", "Pod"))
        served = next((s for s in self.catalog.served if s.kind.kind == kind_name and s.preferred), None)
        if served is None:
            raise ApiError(400, "BadRequest", f"unknown kind {kind_name!r}")
        obj = self.store.get(
            served.kind.key,
            str(target.get("namespace", "")) if served.kind.namespaced else "",
            str(target.get("name", "")),
        )
        if obj is None:
            raise ApiError(
                404,
                "NotFound",
                f"{kind_name} {target.get('namespace', '')}/{target.get('name', '')} not found",
            )
        for _ in range(int(spec.get("count", 1))):
            self.events.emit(
                obj,
                kind_name,
                str(spec.get("event_type", "Warning")),
                str(spec.get("reason", "")),
                str(spec.get("message", "")),
                component=str(spec.get("component", "kubelet")),
                host=str(spec.get("host", "")),
            )

    # ---- API history and transport ------------------------------------------------------------

    def compact(self) -> int:
        """Drop all history: older resourceVersions answer 410 (watches, continue tokens)."""
        return self.store.compact()

    def watch_backlog(self) -> int:
        """Changes an open watch has not yet taken to send (0: each is on its way to every watch)."""
        return self.store.watch_backlog()

    def drop_watches(self) -> int:
        return self.store.close_watchers("dropped by the simulator")

    def set_transport(
        self,
        *,
        error_rate: float = 0.0,
        error_status: int = 500,
        retry_after: int = 1,
        latency: float = 0.0,
        path_prefix: str = "",
        watch_drop_after: float = 0.0,
    ) -> Obj:
        t = self.transport
        t.error_rate, t.error_status, t.retry_after = float(error_rate), int(error_status), int(retry_after)
        t.latency, t.path_prefix, t.watch_drop_after = (
            float(latency),
            str(path_prefix),
            float(watch_drop_after),
        )
        return {
            "error_rate": t.error_rate,
            "error_status": t.error_status,
            "latency": t.latency,
            "path_prefix": t.path_prefix,
            "watch_drop_after": t.watch_drop_after,
        }

    # ---- objects --------------------------------------------------------------------------------

    def apply(self, manifests: Obj | list[Obj]) -> list[str]:
        """Create (or replace) objects in-process, as `kubectl apply` would; returns `kind/name`s."""
        with self.store.lock:
            out = self.api.apply_manifests(manifests if isinstance(manifests, list) else [manifests])
            self.engine.settle()
            return out

    def status(self) -> Obj:
        with self.store.lock:
            groups = {
                name: {
                    "version": g.version,
                    "nodes": sorted(n["metadata"]["name"] for n in self.cloud.nodes_of(name)),
                }
                for name, g in self.cloud.groups.items()
            }
            return {
                "scenario": self.scenario.name,
                "version": self.cloud.git_version(),
                "time": self.now(),
                "speed": self.clock.speed,
                "resourceVersion": str(self.store.rv),
                "compactedResourceVersion": str(self.store.floor),
                "nodeGroups": groups,
                "objects": {
                    k: self.store.count(k) for k in sorted(self.store.buckets) if self.store.count(k)
                },
                "operations": [op.as_dict() for op in self.cloud.operations],
                "faults": list(self.faults.values()),
                "errors": list(self.engine.errors[-20:]),
            }

    def request_count(self, group: str, version: str, resource: str) -> int:
        return self.metrics.count(group=group, version=version, resource=resource)

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> Any:
        """Wait (real seconds) until `predicate()` is truthy, re-checked after every change."""
        return self.engine.wait_for(predicate, timeout)
