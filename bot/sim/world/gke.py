"""The Google side of a GKE scenario: GKE's v1 REST surface (`projects.locations.clusters`, their
node pools, the location's operations and server config), served on loopback under `/gke` for the
bot's real `google-cloud-container` client on its REST transport.

A scenario's `gcp:` section names the cluster (project, location), the versions the server config
offers (`valid_master_versions`; the node versions are the same), the default, each node pool's
upgrade settings (`surge: {max_surge, max_unavailable}` or `blue_green: {soak}` as GKE keeps them
on the pool), the maintenance policy (`maintenance: {recurring, exclusions: [{name, start, end,
scope}]}`) and the faults: `fail_updates` (`cluster`, `nodepool:NAME`: an update that ends with
an error).

Served (wire shapes as the SDK's REST transport parses them; errors as Google's JSON errors):
- `clusters/C`: GET; `clusters/C:updateMaster`: POST (the master only);
- `clusters/C/nodePools`: GET; `nodePools/NP`: GET, PUT (`nodeVersion`, `upgradeSettings`: surge
  or BLUE_GREEN); `nodePools/NP:rollback`: POST (a blue-green upgrade's blue pool back, before it
  is deleted);
- `locations/L/operations`: GET; `operations/OP`: GET;
- `locations/L/serverConfig`: GET.
An update runs through the cloud's own operations, so it takes simulated time. A blue-green
update creates the green nodes, cordons and drains the blue ones (disruption budgets respected),
soaks for the pool's soak, then deletes the blue nodes; a rollback before that uncordons the blue
nodes and removes the green ones. An update while another of the same cluster runs is refused
400 `FAILED_PRECONDITION`, as GKE does.
`GET /gke/sim/calls` answers how often each method was called; `POST /gke/sim/hold {"operation":
"UpdateMaster"}` makes that method act but hold its answer back until `POST /gke/sim/release`
(a test kills the caller in between).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.sim.apiserver.api import STRATEGIC
from bot.sim.apiserver.objects import node_ready
from bot.sim.apiserver.resources import minor_of
from bot.sim.apiserver.server import Raw, SimHTTPServer
from bot.sim.controllers.engine import Engine
from bot.sim.world.cloud import NODES, Cloud, Operation
from bot.sim.world.facade import FacadeError, ProviderWorld, answer

Obj = dict[str, Any]

PREFIX = "/gke"
_KNOWN = {
    "cluster_name",
    "project",
    "location",
    "valid_master_versions",
    "default_version",
    "pools",
    "maintenance",
    "fail_updates",
}
#: NodePoolUpdateStrategy's numbers, as the client sends them.
STRATEGIES = {"BLUE_GREEN": 2, "SURGE": 3}
#: How often a blue-green step looks again (drain retries, readiness).
POLL = 5.0


class GkeError(FacadeError):
    """Google's JSON error: its code is the status name (`NOT_FOUND`, `FAILED_PRECONDITION`)."""


@dataclass
class GkeOp:
    """One of GKE's operations: its type, its target (the cluster, or a node pool) and the cloud's
    operation behind it (None for a rollback, which the facade runs itself)."""

    name: str
    type: str
    pool: str
    op: Operation
    started: float
    phase: str = ""
    #: A blue-green update's blue nodes (the ones it replaces) and green ones.
    blue: list[str] = field(default_factory=list)
    green: list[str] = field(default_factory=list)
    old_version: str = ""


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(text: Any) -> float:
    """`600s`, `10m`, `1h`, or a number of seconds."""
    value = str(text).strip()
    units = {"s": 1, "m": 60, "h": 3600}
    if value and value[-1] in units:
        return float(value[:-1]) * units[value[-1]]
    return float(value or 0)


def _key(version: str) -> tuple[int, ...]:
    head, _, build = version.lstrip("v").partition("-gke.")
    return (*(int(p) for p in head.split(".")), int(build or 0))


class GkeWorld(ProviderWorld):
    """The GKE cluster, its node pools (the `Cloud`'s node groups) and its operations."""

    def __init__(self, cloud: Cloud, engine: Engine, spec: Obj, *, default_name: str) -> None:
        super().__init__("gcp", _KNOWN, cloud, engine, spec, default_name=default_name)
        self.project = str(spec.get("project", "shop-project"))
        self.location = str(spec.get("location", "europe-west1"))
        self.valid = [str(v) for v in spec.get("valid_master_versions") or []]
        self.default = str(spec.get("default_version") or (self.valid[-1] if self.valid else ""))
        self.pools: dict[str, Obj] = {str(k): dict(v or {}) for k, v in (spec.get("pools") or {}).items()}
        self.maintenance: Obj = dict(spec.get("maintenance") or {})
        self.fail_updates = {str(f) for f in spec.get("fail_updates") or []}
        self.ops: dict[str, GkeOp] = {}

    # ---- the world, read -------------------------------------------------------------------------

    @property
    def location_path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def self_link(self) -> str:
        return f"https://container.googleapis.com/v1/{self.location_path}/clusters/{self.name}"

    def version(self) -> str:
        return self.cloud.version.lstrip("v")

    def _running(self, pool: str | None = None) -> GkeOp | None:
        return next(
            (o for o in self.ops.values() if o.op.state == "InProgress" and (pool is None or o.pool == pool)),
            None,
        )

    def pool(self, name: str) -> Obj:
        group = self.cloud.groups.get(name)
        if group is None:
            raise GkeError(
                404, "NOT_FOUND", f"Not found: {self.location_path}/clusters/{self.name}/nodePools/{name}."
            )
        settings = self.pools.get(name) or {}
        running = self._running(name)
        upgrade: Obj = {"maxSurge": 1, "maxUnavailable": 0, "strategy": "SURGE"}
        if "blue_green" in settings:
            soak = _seconds((settings["blue_green"] or {}).get("soak", "3600s"))
            upgrade = {
                "strategy": "BLUE_GREEN",
                "blueGreenSettings": {
                    "standardRolloutPolicy": {"batchPercentage": 1.0},
                    "nodePoolSoakDuration": f"{soak:g}s",
                },
            }
        elif "surge" in settings:
            surge = settings["surge"] or {}
            upgrade = {
                "maxSurge": int(surge.get("max_surge", 1)),
                "maxUnavailable": int(surge.get("max_unavailable", 0)),
                "strategy": "SURGE",
            }
        out: Obj = {
            "name": name,
            "config": {
                "machineType": group.instance_type,
                "imageType": "COS_CONTAINERD",
                "labels": dict(group.labels),
            },
            "initialNodeCount": group.count,
            "version": group.version.lstrip("v"),
            "status": "RECONCILING" if running is not None else "RUNNING",
            "locations": [self.cloud.zone_name(z) for z in self.cloud.zones_of(group)],
            "selfLink": f"{self.self_link}/nodePools/{name}",
            "upgradeSettings": upgrade,
        }
        if running is not None and running.phase:
            out["updateInfo"] = {
                "blueGreenInfo": {"phase": running.phase, "greenPoolVersion": running.op.version}
            }
        return out

    def cluster(self) -> Obj:
        version = self.version()
        out: Obj = {
            "name": self.name,
            "location": self.location,
            "selfLink": self.self_link,
            "status": "RECONCILING" if self._running("") is not None else "RUNNING",
            "currentMasterVersion": version,
            "initialClusterVersion": version,
            "currentNodeVersion": min(
                (g.version.lstrip("v") for g in self.cloud.groups.values()), key=_key, default=version
            ),
            "nodePools": [self.pool(n) for n in sorted(self.cloud.groups)],
            "endpoint": "10.0.0.2",
        }
        policy = self.maintenance_policy()
        if policy:
            out["maintenancePolicy"] = policy
        return out

    def maintenance_policy(self) -> Obj:
        m = self.maintenance
        if not m:
            return {}
        window: Obj = {}
        if m.get("recurring"):
            r = m["recurring"]
            window["recurringWindow"] = {
                "window": {"startTime": str(r.get("start")), "endTime": str(r.get("end"))},
                "recurrence": str(r.get("recurrence", "FREQ=WEEKLY;BYDAY=SA,SU")),
            }
        exclusions = {
            str(e["name"]): {
                "startTime": str(e["start"]),
                "endTime": str(e["end"]),
                "maintenanceExclusionOptions": {"scope": str(e.get("scope", "NO_UPGRADES"))},
            }
            for e in m.get("exclusions") or []
        }
        if exclusions:
            window["maintenanceExclusions"] = exclusions
        return {"window": window, "resourceVersion": "1"}

    def server_config(self) -> Obj:
        return {
            "defaultClusterVersion": self.default,
            "validMasterVersions": sorted(self.valid, key=_key, reverse=True),
            "validNodeVersions": sorted(
                {*self.valid, *(g.version.lstrip("v") for g in self.cloud.groups.values())},
                key=_key,
                reverse=True,
            ),
            "defaultImageType": "COS_CONTAINERD",
            "validImageTypes": ["COS_CONTAINERD", "UBUNTU_CONTAINERD"],
        }

    def operation(self, name: str) -> Obj:
        o = self.ops.get(name)
        if o is None:
            raise GkeError(404, "NOT_FOUND", f"Not found: operation {name}.")
        target = self.self_link + (f"/nodePools/{o.pool}" if o.pool else "")
        out: Obj = {
            "name": o.name,
            "zone": self.location,
            "location": self.location,
            "operationType": o.type,
            "status": "RUNNING" if o.op.state == "InProgress" else "DONE",
            "selfLink": f"https://container.googleapis.com/v1/{self.location_path}/operations/{o.name}",
            "targetLink": target,
            "startTime": _iso(o.started),
        }
        if o.phase and o.op.state == "InProgress":
            out["detail"] = o.phase
        if o.op.finished is not None:
            out["endTime"] = _iso(o.op.finished)
        if o.op.state == "Failed":
            out["statusMessage"] = o.op.error
            # google.rpc.Code 13 (INTERNAL) for an upgrade that failed; 1 (CANCELLED) for one rolled back.
            out["error"] = {"code": 1 if "rolled back" in o.op.error else 13, "message": o.op.error}
        return out

    # ---- updates ---------------------------------------------------------------------------------

    def _new_op(self, kind: str, pool: str, op: Operation) -> GkeOp:
        o = GkeOp(
            name=f"operation-{int(self.engine.clock.now() * 1000)}-{next(self._ids):04d}",
            type=kind,
            pool=pool,
            op=op,
            started=self.engine.clock.now(),
        )
        self.ops[o.name] = o
        return o

    def _busy(self) -> None:
        running = self._running()
        if running is not None:
            raise GkeError(
                400,
                "FAILED_PRECONDITION",
                f"Cluster is running incompatible operation {running.name}.",
            )

    def update_master(self, version: str) -> GkeOp:
        current = self.version()
        if version in ("-", "latest"):
            version = self.default
        if version not in self.valid:
            raise GkeError(400, "INVALID_ARGUMENT", f'Master version "{version}" is unsupported.')
        if minor_of(version) - minor_of(current) > 1 or _key(version) <= _key(current):
            raise GkeError(
                400,
                "FAILED_PRECONDITION",
                f'Master cannot be upgraded to "{version}": specified version must be newer than '
                f"{current} and at most one minor version ahead.",
            )
        self._busy()
        if "cluster" in self.fail_updates:
            op = self.cloud.fail_control_plane_upgrade(
                version, "the master upgrade failed (planted by the scenario)", "gke-op"
            )
        else:
            op = self.cloud.upgrade_control_plane(version)
        return self._new_op("UPGRADE_MASTER", "", op)

    def update_pool(self, name: str, body: Obj) -> GkeOp:
        current = self.pool(name)
        settings = body.get("upgradeSettings") or {}
        if settings:
            # The REST transport writes enums as numbers (`$alt=json;enum-encoding=int`).
            if settings.get("strategy") in ("BLUE_GREEN", STRATEGIES["BLUE_GREEN"]):
                bg = settings.get("blueGreenSettings") or {}
                self.pools[name] = {"blue_green": {"soak": bg.get("nodePoolSoakDuration", "3600s")}}
            else:
                self.pools[name] = {
                    "surge": {
                        "max_surge": int(
                            settings.get("maxSurge", current["upgradeSettings"].get("maxSurge", 1))
                        ),
                        "max_unavailable": int(
                            settings.get(
                                "maxUnavailable", current["upgradeSettings"].get("maxUnavailable", 0)
                            )
                        ),
                    }
                }
        version = str(body.get("nodeVersion") or "")
        if version in ("-", ""):
            version = self.version()
        if _key(version) > _key(self.version()):
            raise GkeError(
                400,
                "INVALID_ARGUMENT",
                f'Node version "{version}" must not be newer than the master version {self.version()}.',
            )
        self._busy()
        old = current["version"]
        if f"nodepool:{name}" in self.fail_updates:
            op = self.cloud.fail_node_group_update(
                name, version, "the node pool upgrade failed (planted by the scenario)", "gke-op"
            )
            return self._new_op("UPGRADE_NODES", name, op)
        if "blue_green" in (self.pools.get(name) or {}):
            return self._blue_green(name, version, old)
        surge = (self.pools.get(name) or {}).get("surge") or {}
        parallel = max(1, int(surge.get("max_surge", 1)) + int(surge.get("max_unavailable", 0)))
        op = self.cloud.replace_node_group(name, version, max_unavailable=parallel)
        return self._new_op("UPGRADE_NODES", name, op)

    def _blue_green(self, name: str, version: str, old: str) -> GkeOp:
        """GKE's blue-green upgrade (see the module docstring), phase by phase."""
        group = self.cloud.groups[name]
        soak = _seconds(((self.pools.get(name) or {}).get("blue_green") or {}).get("soak", "3600s"))
        op = self.cloud._op("NodeGroupUpdate", name, version, "launching")
        o = self._new_op("UPGRADE_NODES", name, op)
        o.old_version = old
        o.blue = [n["metadata"]["name"] for n in self.cloud.nodes_of(name)]
        o.phase = "CREATING_GREEN_POOL"
        group.version = version
        count = max(group.count, len(o.blue), 1)

        def create() -> None:
            for _ in range(count):
                o.green.append(self.cloud.add_node(name, ready=False, version=version))
            self.engine.after(POLL, ready, key=("gke-op", op.id))

        def ready() -> None:
            if op.state != "InProgress":
                return
            nodes = [self.cloud.api.store.get("nodes", "", n) for n in o.green]
            if not all(n is not None and node_ready(n) for n in nodes):
                self.engine.after(POLL, ready, key=("gke-op", op.id))
                return
            o.phase = "CORDONING_BLUE_POOL"
            self._cordon(o.blue, True)
            o.phase = "DRAINING_BLUE_POOL"
            drain(self.engine.clock.now())

        def drain(since: float) -> None:
            if op.state != "InProgress" or o.phase != "DRAINING_BLUE_POOL":
                return
            left = [n for n in o.blue if self.cloud._evict_all(n, force=False) is not None]
            if left and self.engine.clock.now() - since < self.cloud.drain_timeout:
                self.engine.after(POLL, lambda: drain(since), key=("gke-op", op.id))
                return
            # GKE drains with the budgets respected for up to an hour, then goes on regardless.
            for n in left:
                self.cloud._evict_all(n, force=True)
            o.phase = "NODE_POOL_SOAKING"
            self.engine.after(soak, delete, key=("gke-op", op.id))

        def delete() -> None:
            if op.state != "InProgress" or o.phase != "NODE_POOL_SOAKING":
                return
            o.phase = "DELETING_BLUE_POOL"
            for n in o.blue:
                self.cloud.terminate(n)
            group.count = count
            o.phase = ""
            self.cloud._finish(op)

        self.engine.after(self.cloud.join_seconds, create, key=("gke-op", op.id))
        return o

    def _cordon(self, nodes: list[str], on: bool) -> None:
        body = json.dumps({"spec": {"unschedulable": on}}).encode()
        for n in nodes:
            if self.cloud.api.store.entry("nodes", "", n) is not None:
                self.cloud.api.patch(NODES, "", n, STRATEGIC, body)

    def rollback(self, name: str) -> GkeOp:
        self.pool(name)
        running = self._running(name)
        if running is None or not running.blue or running.phase in ("", "DELETING_BLUE_POOL"):
            raise GkeError(
                400,
                "FAILED_PRECONDITION",
                f"Node pool {name} has no blue-green upgrade to roll back (its blue pool is gone, or it was a surge upgrade).",
            )
        group = self.cloud.groups[name]
        up = running
        op = self.cloud._op("NodeGroupUpdate", name, up.old_version, "launching")
        # The v1 API has no operation type of its own for a rollback: it is an UPGRADE_NODES.
        o = self._new_op("UPGRADE_NODES", name, op)
        up.phase = "ROLLBACK_STARTED"
        self.cloud._finish(up.op, "the upgrade was rolled back (rollback_node_pool_upgrade)")
        group.version = up.old_version
        self._cordon(up.blue, False)
        self._cordon(up.green, True)

        def drain_green() -> None:
            left = [n for n in up.green if self.cloud._evict_all(n, force=False) is not None]
            if left:
                self.engine.after(POLL, drain_green, key=("gke-op", op.id))
                return
            for n in up.green:
                self.cloud.terminate(n)
            self.cloud._finish(op)

        self.engine.after(POLL, drain_green, key=("gke-op", op.id))
        return o


# ---- the wire ----------------------------------------------------------------------------------


def register(server: SimHTTPServer, world: GkeWorld) -> None:
    server.add_route(PREFIX, lambda method, path, query, body: handle(world, method, path, query, body))


def handle(world: GkeWorld, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    rest = path[len(PREFIX) :].strip("/")
    return answer(world, method, rest, body, lambda: _answer(world, method, rest, body))


def _answer(world: GkeWorld, method: str, rest: str, body: bytes) -> tuple[int, Any]:
    try:
        return _json(200, _rest(world, method, rest, json.loads(body) if body else {}))
    except GkeError as exc:
        return _json(exc.status, {"error": {"code": exc.status, "message": exc.message, "status": exc.code}})


def _json(status: int, obj: Obj) -> tuple[int, Any]:
    return status, Raw(json.dumps(obj).encode(), "application/json")


def _rest(world: GkeWorld, method: str, rest: str, data: Obj) -> Obj:
    head = f"v1/{world.location_path}"
    if not rest.startswith(head):
        raise GkeError(404, "NOT_FOUND", f"Not found: {rest}.")
    tail = rest[len(head) :].strip("/")
    path, _, verb = tail.partition(":")
    parts = path.split("/") if path else []
    match (method, verb, *parts):
        case ("GET", "", "serverConfig"):
            world.calls["GetServerConfig"] += 1
            return world.server_config()
        case ("GET", "", "operations"):
            world.calls["ListOperations"] += 1
            return {"operations": [world.operation(n) for n in world.ops]}
        case ("GET", "", "operations", name):
            world.calls["GetOperation"] += 1
            return world.operation(name)
    if parts[:2] != ["clusters", world.name]:
        raise GkeError(404, "NOT_FOUND", f"Not found: {world.location_path}/{path}.")
    match (method, verb, *parts[2:]):
        case ("GET", ""):
            world.calls["GetCluster"] += 1
            return world.cluster()
        case ("POST", "updateMaster"):
            world.calls["UpdateMaster"] += 1
            return world.operation(world.update_master(str(data.get("masterVersion", ""))).name)
        case ("GET", "", "nodePools"):
            world.calls["ListNodePools"] += 1
            return {"nodePools": [world.pool(n) for n in sorted(world.cloud.groups)]}
        case ("GET", "", "nodePools", name):
            world.calls["GetNodePool"] += 1
            return world.pool(name)
        case ("PUT", "", "nodePools", name):
            world.calls["UpdateNodePool"] += 1
            return world.operation(world.update_pool(name, data).name)
        case ("POST", "rollback", "nodePools", name):
            world.calls["RollbackNodePoolUpgrade"] += 1
            return world.operation(world.rollback(name).name)
    raise GkeError(404, "NOT_FOUND", f"no method for {method} /{rest}")
