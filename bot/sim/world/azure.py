"""The Azure side of an AKS scenario: the ARM surface of `Microsoft.ContainerService`, served on
loopback under `/azure` for the bot's real `azure-mgmt-containerservice` client.

A scenario's `azure:` section names the managed cluster (subscription, resource group, location),
the versions its upgrade profile offers, its planned maintenance configurations, each agent pool's
max surge, and the faults: `fail_updates` (`cluster`, `nodepool:NAME`: an upgrade that ends
Failed) and `api_block` (on by default, as on AKS: a minor upgrade of the control plane is refused
while the API server served, since it last started, an API the target version removes — the same
`apiserver_requested_deprecated_apis` signal AKS reads — unless the cluster's
`upgradeSettings.overrideSettings` says `forceUpgrade` until a time still ahead).

Served (api-version as the client sends it; wire shapes as the SDK's models deserialize them):
- managedClusters: GET, PUT (an upgrade of `kubernetesVersion` only: the control plane; agent
  pools keep their `orchestratorVersion`), `upgradeProfiles/default`;
- agentPools: list, GET, PUT (an upgrade of `orchestratorVersion`, with its `upgradeSettings`);
- maintenanceConfigurations: list;
- `locations/LOC/operations/ID`: the async operation of a PUT (its `Azure-AsyncOperation` and
  `Location` headers point there; `Retry-After` is 1 second).
An upgrade runs through the cloud's own operations, so it takes simulated time. A PUT while an
operation of the same resource runs is refused 409 `OperationNotAllowed`, as ARM does.
`GET /azure/sim/calls` answers how often each operation was called; `POST /azure/sim/hold
{"operation": "AgentPools_CreateOrUpdate"}` makes that operation act but hold its answer back
until `POST /azure/sim/release` (a test kills the caller in between).
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.sim.apiserver.resources import minor_of
from bot.sim.apiserver.server import Raw, SimHTTPServer
from bot.sim.controllers.engine import Engine
from bot.sim.world.cloud import Cloud, Operation
from bot.sim.world.facade import FacadeError, ProviderWorld, answer

Obj = dict[str, Any]

PREFIX = "/azure"
RP = "Microsoft.ContainerService"
_KNOWN = {
    "cluster_name",
    "subscription",
    "resource_group",
    "location",
    "upgrades",
    "max_surge",
    "maintenance",
    "fail_updates",
    "api_block",
}
#: ARM's words for the cloud's operation states.
_STATUS = {"InProgress": "InProgress", "Successful": "Succeeded", "Failed": "Failed"}


class ArmError(FacadeError):
    """ARM's JSON error, with the `subcode` some of AKS's carry."""

    def __init__(self, status: int, code: str, message: str, subcode: str = "") -> None:
        super().__init__(status, code, message)
        self.subcode = subcode


@dataclass
class AsyncOp:
    id: str
    resource: str  # "" for the cluster, else the agent pool's name
    op: Operation


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _minor(version: str) -> str:
    parts = version.lstrip("v").split(".")
    return f"{parts[0]}.{minor_of(version)}"


class AzureWorld(ProviderWorld):
    """The AKS managed cluster, its agent pools (the `Cloud`'s node groups) and its operations."""

    def __init__(self, cloud: Cloud, engine: Engine, spec: Obj, *, default_name: str) -> None:
        super().__init__("azure", _KNOWN, cloud, engine, spec, default_name=default_name)
        self.subscription = str(spec.get("subscription", "00000000-0000-0000-0000-000000000000"))
        self.resource_group = str(spec.get("resource_group", "rg-aks"))
        self.location = str(spec.get("location", "westeurope"))
        self.upgrades = [str(v) for v in spec.get("upgrades") or []]
        self.max_surge = {str(k): str(v) for k, v in (spec.get("max_surge") or {}).items()}
        self.maintenance = [dict(m) for m in spec.get("maintenance") or []]
        self.fail_updates = {str(f) for f in spec.get("fail_updates") or []}
        self.api_block = bool(spec.get("api_block", True))
        #: `upgradeSettings.overrideSettings` as the last PUT set it.
        self.override: Obj = {}
        self.ops: dict[str, AsyncOp] = {}
        self.base = ""

    # ---- the world, read -------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
            f"/providers/{RP}/managedClusters/{self.name}"
        )

    def _running(self, resource: str) -> AsyncOp | None:
        return next(
            (a for a in self.ops.values() if a.resource == resource and a.op.state == "InProgress"), None
        )

    def _state(self, resource: str) -> str:
        running = self._running(resource)
        if running is not None:
            return "Upgrading"
        last = [a for a in self.ops.values() if a.resource == resource]
        return "Failed" if last and last[-1].op.state == "Failed" else "Succeeded"

    def version(self) -> str:
        parts = self.cloud.version.lstrip("v").split("-")[0].split(".")
        return ".".join(parts[:3])

    def pool(self, name: str) -> Obj:
        group = self.cloud.groups.get(name)
        if group is None:
            raise ArmError(404, "NotFound", f"Agent pool {name} not found in managed cluster {self.name}.")
        version = ".".join(group.version.lstrip("v").split("-")[0].split(".")[:3])
        return {
            "id": f"{self.cluster_id}/agentPools/{name}",
            "name": name,
            "type": f"{RP}/managedClusters/agentPools",
            "properties": {
                "count": group.count,
                "vmSize": group.instance_type,
                "osType": "Linux",
                "mode": "System" if name == "system" else "User",
                "type": "VirtualMachineScaleSets",
                "orchestratorVersion": version,
                "currentOrchestratorVersion": version,
                "provisioningState": self._state(name),
                "powerState": {"code": "Running"},
                "availabilityZones": self.cloud.zones_of(group),
                "nodeLabels": dict(group.labels),
                "upgradeSettings": {"maxSurge": self.max_surge.get(name, "10%")},
            },
        }

    def cluster(self) -> Obj:
        version = self.version()
        out: Obj = {
            "id": self.cluster_id,
            "name": self.name,
            "type": f"{RP}/ManagedClusters",
            "location": self.location,
            "properties": {
                "provisioningState": self._state(""),
                "powerState": {"code": "Running"},
                "kubernetesVersion": version,
                "currentKubernetesVersion": version,
                "dnsPrefix": self.name,
                "fqdn": f"{self.name}-dns.hcp.{self.location}.azmk8s.io",
                "agentPoolProfiles": [
                    {"name": name, **dict(self.pool(name)["properties"].items())}
                    for name in sorted(self.cloud.groups)
                ],
                "nodeResourceGroup": f"MC_{self.resource_group}_{self.name}_{self.location}",
            },
        }
        if self.override:
            out["properties"]["upgradeSettings"] = {"overrideSettings": dict(self.override)}
        return out

    def upgrade_profile(self) -> Obj:
        version = self.version()
        return {
            "id": f"{self.cluster_id}/upgradeProfiles/default",
            "name": "default",
            "type": f"{RP}/managedClusters/upgradeProfiles",
            "properties": {
                "controlPlaneProfile": {
                    "kubernetesVersion": version,
                    "osType": "Linux",
                    "upgrades": [
                        {"kubernetesVersion": v, "isPreview": False} for v in self.upgrades_from(version)
                    ],
                },
                "agentPoolProfiles": [
                    {
                        "name": name,
                        "kubernetesVersion": self.pool(name)["properties"]["orchestratorVersion"],
                        "osType": "Linux",
                        "upgrades": [
                            {"kubernetesVersion": v, "isPreview": False}
                            for v in self.upgrades_from(self.pool(name)["properties"]["orchestratorVersion"])
                            if minor_of(v) <= minor_of(version)
                        ]
                        + (
                            [{"kubernetesVersion": version, "isPreview": False}]
                            if self.pool(name)["properties"]["orchestratorVersion"] != version
                            and version not in self.upgrades
                            else []
                        ),
                    }
                    for name in sorted(self.cloud.groups)
                ],
            },
        }

    def upgrades_from(self, version: str) -> list[str]:
        """The versions offered above `version`: at most one minor ahead, as AKS offers them."""
        return [v for v in self.upgrades if 0 < minor_of(v) - minor_of(version) <= 1 or (
            minor_of(v) == minor_of(version) and v != version and v > version
        )]  # fmt: skip

    def maintenance_configs(self) -> list[Obj]:
        out = []
        for m in self.maintenance:
            name = str(m.get("name", "default"))
            props: Obj = {}
            if m.get("not_allowed"):
                props["notAllowedTime"] = [
                    {"start": str(n["start"]), "end": str(n["end"])} for n in m["not_allowed"]
                ]
            if m.get("schedule"):
                props["maintenanceWindow"] = {
                    "schedule": m["schedule"],
                    "durationHours": int(m.get("duration_hours", 4)),
                    "startTime": str(m.get("start_time", "00:00")),
                    "utcOffset": str(m.get("utc_offset", "+00:00")),
                }
            out.append(
                {
                    "id": f"{self.cluster_id}/maintenanceConfigurations/{name}",
                    "name": name,
                    "type": f"{RP}/managedClusters/maintenanceConfigurations",
                    "properties": props,
                }
            )
        return out

    def deprecated_usage(self, target: str) -> list[str]:
        """The APIs the API server served since it started that `target` removes (what AKS's
        detection reads, from the same `apiserver_requested_deprecated_apis`)."""
        removed = _minor(target)
        return sorted(
            f"{resource}.{group or 'core'}.{version}"
            for (group, version, resource, _sub, rel) in self.cloud.metrics.deprecated
            if rel == removed
        )

    def _overridden(self) -> bool:
        if not self.override.get("forceUpgrade"):
            return False
        until = _parse_time(str(self.override.get("until") or ""))
        return until is not None and until > self.engine.clock.now()

    # ---- updates ---------------------------------------------------------------------------------

    def _new_op(self, resource: str, op: Operation) -> AsyncOp:
        digest = hashlib.sha256(f"{self.cluster_id}/op-{next(self._ids)}".encode()).hexdigest()
        a = AsyncOp(
            id=f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
            resource=resource,
            op=op,
        )
        self.ops[a.id] = a
        return a

    def put_cluster(self, body: Obj) -> AsyncOp | None:
        props = body.get("properties") or {}
        override = ((props.get("upgradeSettings") or {}).get("overrideSettings")) or {}
        if override:
            self.override = {k: override[k] for k in ("forceUpgrade", "until") if k in override}
        target = str(props.get("kubernetesVersion") or self.version())
        for profile in props.get("agentPoolProfiles") or []:
            name = str(profile.get("name", ""))
            wanted = str(profile.get("orchestratorVersion") or "")
            if (
                name in self.cloud.groups
                and wanted
                and wanted != self.pool(name)["properties"]["orchestratorVersion"]
            ):
                raise ArmError(
                    400, "BadRequest", "the simulator upgrades agent pools through agentPools, one at a time"
                )
        current = self.version()
        if target == current:
            return None
        if self._running("") is not None:
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation is not allowed: another operation is in progress on {self.name}.",
            )
        if target not in self.upgrades_from(current):
            raise ArmError(
                400,
                "ValidationError",
                f"Upgrading from {current} to {target} is not allowed: the upgrade profile offers "
                f"{', '.join(self.upgrades_from(current)) or 'none'}.",
                "UpgradeNotAllowed",
            )
        used = self.deprecated_usage(target) if minor_of(target) > minor_of(current) else []
        if self.api_block and used and not self._overridden():
            # AKS's own words (learn.microsoft.com: "Stop cluster upgrades on API breaking changes").
            details = "".join(
                f"\n\t* usage has been detected on API {u}, and was recently seen at: "
                f"{datetime.fromtimestamp(self.engine.clock.now() - 600, UTC):%Y-%m-%d %H:%M:%S +0000 UTC}, "
                f"which will be removed in {_minor(target)}"
                for u in used
            )
            raise ArmError(
                400,
                "ValidationError",
                "Control Plane upgrade is blocked due to recent usage of a Kubernetes API deprecated in the "
                "specified version. Please refer to https://kubernetes.io/docs/reference/using-api/deprecation-guide "
                "to migrate the usage. To bypass this error, set enable-force-upgrade in "
                "upgradeSettings.overrideSettings. Bypassing this error without migrating usage will result in the "
                f"deprecated Kubernetes API calls failing. Usage details: {len(used)} error(s) occurred:{details}\n\n",
                "UpgradeBlockedOnDeprecatedAPIUsage",
            )
        if "cluster" in self.fail_updates:
            op = self.cloud.fail_control_plane_upgrade(
                target,
                "UpgradeFailed: the control plane upgrade failed (planted by the scenario)",
                "azure-op",
            )
        else:
            op = self.cloud.upgrade_control_plane(target)
        return self._new_op("", op)

    def put_pool(self, name: str, body: Obj) -> AsyncOp | None:
        current = self.pool(name)["properties"]
        props = body.get("properties") or {}
        surge = str((props.get("upgradeSettings") or {}).get("maxSurge") or "")
        target = str(props.get("orchestratorVersion") or current["orchestratorVersion"])
        if target == current["orchestratorVersion"]:
            if surge:
                self.max_surge[name] = surge
            return None
        if self._running(name) is not None:
            raise ArmError(
                409, "OperationNotAllowed", f"Operation is not allowed: agent pool {name} is upgrading."
            )
        if minor_of(target) > minor_of(self.version()) or (
            minor_of(target) == minor_of(self.version()) and target > self.version()
        ):
            raise ArmError(
                400,
                "ValidationError",
                f"Node pool version {target} is greater than the control plane version {self.version()}.",
                "NodePoolVersionGreaterThanControlPlane",
            )
        if surge:
            self.max_surge[name] = surge
        if f"nodepool:{name}" in self.fail_updates:
            op = self.cloud.fail_node_group_update(
                name,
                target,
                "UpgradeFailed: surge nodes failed to join (planted by the scenario)",
                "azure-op",
            )
        else:
            group = self.cloud.groups[name]
            count = max(group.count, 1)
            text = self.max_surge.get(name, "10%")
            per = int(text[:-1]) * count // 100 if text.endswith("%") else int(text or 1)
            op = self.cloud.replace_node_group(name, target, max_unavailable=max(1, per))
        return self._new_op(name, op)

    def operation(self, op_id: str) -> Obj:
        a = self.ops.get(op_id)
        if a is None:
            raise ArmError(404, "NotFound", f"Operation {op_id} not found.")
        out: Obj = {
            "id": f"/subscriptions/{self.subscription}/providers/{RP}/locations/{self.location}/operations/{a.id}",
            "name": a.id,
            "status": _STATUS.get(a.op.state, a.op.state),
            "startTime": _iso(a.op.started),
        }
        if a.op.finished is not None:
            out["endTime"] = _iso(a.op.finished)
        if a.op.state == "Failed":
            code, _, message = a.op.error.partition(": ")
            out["error"] = {"code": code if message else "UpgradeFailed", "message": message or a.op.error}
        return out

    def op_url(self, a: AsyncOp, api_version: str) -> str:
        return (
            f"{self.base}/subscriptions/{self.subscription}/providers/{RP}/locations/{self.location}"
            f"/operations/{a.id}?api-version={api_version}"
        )


# ---- the wire ----------------------------------------------------------------------------------


def register(server: SimHTTPServer, world: AzureWorld) -> None:
    address = server.server_address[0]
    host = address.decode() if isinstance(address, bytes) else str(address)
    world.base = f"http://{host}:{server.port}{PREFIX}"
    server.add_route(PREFIX, lambda method, path, query, body: handle(world, method, path, query, body))


def handle(world: AzureWorld, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    rest = path[len(PREFIX) :].strip("/")
    return answer(world, method, rest, body, lambda: _answer(world, method, rest, query, body))


def _answer(world: AzureWorld, method: str, rest: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    try:
        return _arm(world, method, [urllib.parse.unquote(p) for p in rest.split("/")], query, body)
    except ArmError as exc:
        error: Obj = {"code": exc.code, "message": exc.message}
        if exc.subcode:
            error["subcode"] = exc.subcode
        return _json(exc.status, {"error": error}, {"x-ms-error-code": exc.code})


def _json(status: int, obj: Obj, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    return status, Raw(json.dumps(obj).encode(), "application/json", dict(headers or {}))


def _accepted(world: AzureWorld, a: AsyncOp | None, resource: Obj, api_version: str) -> tuple[int, Any]:
    """A PUT's answer: 200 and the resource when nothing changes; else 201, the resource as it
    is now (Upgrading) and the async operation's URL for the client's poller."""
    if a is None:
        return _json(200, resource)
    url = world.op_url(a, api_version)
    return _json(201, resource, {"Azure-AsyncOperation": url, "Location": url, "Retry-After": "1"})


def _arm(
    world: AzureWorld, method: str, parts: list[str], query: dict[str, str], body: bytes
) -> tuple[int, Any]:
    api_version = query.get("api-version", "")
    if not api_version:
        raise ArmError(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    data: Obj = json.loads(body) if body else {}
    head = ["subscriptions", world.subscription]
    if parts[:2] != head:
        raise ArmError(
            404,
            "SubscriptionNotFound",
            f"The subscription '{parts[1] if len(parts) > 1 else ''}' could not be found.",
        )
    tail = parts[2:]
    if (
        tail[:4] == ["providers", RP, "locations", world.location]
        and len(tail) == 6
        and tail[4] == "operations"
    ):
        world.calls["Operations_Get"] += 1
        return _json(200, world.operation(tail[5]))
    base = ["resourceGroups", world.resource_group, "providers", RP, "managedClusters"]
    if tail[:5] != base or len(tail) < 6:
        raise ArmError(404, "ResourceNotFound", f"The Resource '/{'/'.join(parts)}' was not found.")
    if tail[5] != world.name:
        raise ArmError(
            404,
            "ResourceNotFound",
            f"The Resource '{RP}/managedClusters/{tail[5]}' under resource group '{world.resource_group}' was not found.",
        )
    match (method, *tail[6:]):
        case ("GET",):
            world.calls["ManagedClusters_Get"] += 1
            return _json(200, world.cluster())
        case ("PUT",):
            world.calls["ManagedClusters_CreateOrUpdate"] += 1
            a = world.put_cluster(data)
            return _accepted(world, a, world.cluster(), api_version)
        case ("GET", "upgradeProfiles", "default"):
            world.calls["ManagedClusters_GetUpgradeProfile"] += 1
            return _json(200, world.upgrade_profile())
        case ("GET", "agentPools"):
            world.calls["AgentPools_List"] += 1
            return _json(200, {"value": [world.pool(n) for n in sorted(world.cloud.groups)]})
        case ("GET", "agentPools", name):
            world.calls["AgentPools_Get"] += 1
            return _json(200, world.pool(name))
        case ("PUT", "agentPools", name):
            world.calls["AgentPools_CreateOrUpdate"] += 1
            a = world.put_pool(name, data)
            return _accepted(world, a, world.pool(name), api_version)
        case ("GET", "maintenanceConfigurations"):
            world.calls["MaintenanceConfigurations_ListByManagedCluster"] += 1
            return _json(200, {"value": world.maintenance_configs()})
    raise ArmError(404, "ResourceNotFound", f"no operation for {method} /{'/'.join(parts)}")
