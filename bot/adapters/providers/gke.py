"""The GKE provider (`bot.core.providers`' GKE adapter): the one module that imports
`google-cloud-container` (and google-auth, google-api-core with it), and only when a GKE cluster
is used.

The SDK is the optional `gke` extra (`pip install 'upgrade-bot[gke]'`). `connect(provider)`
imports it then, and raises `GcpUnavailable` with the reason when it cannot, so a bot without the
extra loads and runs as before. The client is `ClusterManagerClient` on its REST transport
(`transport="rest"`): against Google, credentials from google-auth's default chain (Workload
Identity in the chart); against another endpoint (the simulator's `/gke`,
`client_options={"api_endpoint": …}`) `AnonymousCredentials`, google-auth's own credential for an
endpoint that asks for none. Both are the client's documented extension points.

What the port asks, in GKE's terms (v1 `projects.locations.clusters`):
- `versions`: `get_server_config` (the location's valid master versions, its default);
- `update_control_plane`: `update_master` (`masterVersion`); GKE has no readiness block to force;
- `update_node_pool`: `update_node_pool` with `nodeVersion`, the pool's own `imageType`, and
  `upgradeSettings` — surge (`maxSurge`, `maxUnavailable`) or blue-green (`BLUE_GREEN` with its
  `nodePoolSoakDuration`); `rollback_node_pool`: `rollback_node_pool_upgrade` (a blue-green
  upgrade's blue pool comes back while it soaks);
- `operations`/`operation`: `list_operations` (the cluster's operations still running) and
  `get_operation`. GKE takes no idempotency token: after an interruption the job lists the
  running operations and reads the versions before it ever calls again (bot/core/jobs/gke.py).
- `maintenance`: the cluster's `maintenancePolicy` (its window, its exclusions and their scopes).
- `upgrade_insights`: GKE's deprecation insights live in the Recommender API
  (`google.container.DiagnosisInsight`), not in this one: an UNKNOWN insight says so, and the
  bot's own removed-API check (the API server's metric) is what reads the usage.

Answers are GKE's JSON as the REST API writes it (camelCase, enum names), or the port's records;
any SDK error becomes `GcpError` (the port's `ProviderError`) with GKE's status (`FAILED_PRECONDITION`
…) and the HTTP status.
"""

from __future__ import annotations

import threading
from typing import Any

from bot.adapters.providers import FollowsControlPlane, not_importable
from bot.errors import ProviderError, ProviderUnavailable
from bot.records import (
    GkeProvider,
    Insight,
    MaintenanceExclusion,
    MaintenancePolicy,
    Operation,
    OperationError,
    PoolStrategy,
    Versions,
)
from bot.timetext import said_duration, said_span

Obj = dict[str, Any]

EXTRA_HINT = "pip install 'upgrade-bot[gke]'"
#: GKE's operation statuses in the port's words (a DONE operation with an error is Failed).
STATUSES = {
    "PENDING": "InProgress",
    "RUNNING": "InProgress",
    "ABORTING": "InProgress",
    "DONE": "Successful",
}


#: google.rpc.Code's names for an operation's `error.code` (the REST JSON gives the number).
RPC_CODES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
}


class GcpUnavailable(ProviderUnavailable):
    """The GKE side cannot be read at all (no google-cloud-container); the reason is for people."""


class GcpError(ProviderError):
    """A GKE call failed; `code` is Google's status name (`FAILED_PRECONDITION`), `status` the
    HTTP status (0 when GKE did not answer: worth trying again)."""


def as_json(message: Any) -> Obj:
    """A proto-plus message as GKE's REST JSON (camelCase keys, enum names, no defaults)."""
    out: Obj = _prune(
        type(message).to_dict(message, use_integers_for_enums=False, preserving_proto_field_name=False)
    )
    return out


def _prune(value: Any) -> Any:
    """proto-plus writes every field; the REST API omits empty ones, and so does this."""
    if isinstance(value, dict):
        kept = {k: _prune(v) for k, v in value.items()}
        return {
            k: v
            for k, v in kept.items()
            if v not in ("", 0, False, None, [], {})
            and not (isinstance(v, str) and v.endswith("_UNSPECIFIED"))
        }
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


class Gke(FollowsControlPlane):
    """One GKE cluster through `ClusterManagerClient` (REST) (add-ons, capacity and the snapshot:
    `FollowsControlPlane`)."""

    kind = "gke"

    def __init__(
        self, provider: GkeProvider, client: Any, errors: tuple[type[Exception], ...], timeout: float
    ) -> None:
        self.provider = provider
        self.name = provider.name
        self._client = client
        self._errors = errors
        self._timeout = timeout
        self._lock = threading.Lock()

    @property
    def location_path(self) -> str:
        return f"projects/{self.provider.project}/locations/{self.provider.location}"

    @property
    def cluster_path(self) -> str:
        return f"{self.location_path}/clusters/{self.name}"

    def _call(self, fn: Any, request: Obj, *, update: bool = False) -> Any:
        try:
            # An update is never retried by the client: a retried POST is the same call made twice.
            extra: Obj = {"retry": None} if update else {}
            return fn(request=request, timeout=self._timeout, **extra)
        except self._errors as exc:
            raise _error(exc) from exc

    # ---- GKE's descriptions ------------------------------------------------------------------------

    def control_plane(self) -> Obj:
        return as_json(self._call(self._client.get_cluster, {"name": self.cluster_path}))

    def node_pools(self) -> list[Obj]:
        found = self._call(self._client.list_node_pools, {"parent": self.cluster_path})
        return [as_json(p) for p in found.node_pools]

    def node_pool(self, name: str) -> Obj:
        return as_json(
            self._call(self._client.get_node_pool, {"name": f"{self.cluster_path}/nodePools/{name}"})
        )

    def server_config(self) -> Obj:
        return as_json(self._call(self._client.get_server_config, {"name": self.location_path}))

    def _managed(self, addon: str) -> GcpError:
        # GKE's add-ons (kube-dns, the CSI drivers …) follow the master's version.
        return GcpError(f"GKE manages its add-on {addon} with the master", code="UNIMPLEMENTED", status=501)

    # ---- the port's own answers -------------------------------------------------------------------

    def versions(self) -> Versions:
        """`get_server_config`'s valid master versions newer than the master's (GKE lists every
        version it runs; it upgrades one minor at a time)."""
        current = str(self.control_plane().get("currentMasterVersion", ""))
        config = self.server_config()
        offered = tuple(str(v) for v in config.get("validMasterVersions") or [] if _newer(str(v), current))
        return Versions(
            current=current, offered=offered, default=str(config.get("defaultClusterVersion", ""))
        )

    def maintenance(self) -> MaintenancePolicy:
        policy = self.control_plane().get("maintenancePolicy") or {}
        window = policy.get("window") or {}
        windows: list[str] = []
        recurring = window.get("recurringWindow") or {}
        if recurring:
            span = recurring.get("window") or {}
            # GKE's window is the first occurrence's span; the RRULE says how it recurs.
            first = said_span(str(span.get("startTime", "?")), str(span.get("endTime", "?")))
            windows.append(f"recurring {recurring.get('recurrence', '?')}, first {first}")
        daily = window.get("dailyMaintenanceWindow") or {}
        if daily:
            lasting = said_duration(str(daily.get("duration", "?")))
            windows.append(f"daily at {daily.get('startTime', '?')} UTC for {lasting}")
        exclusions = tuple(
            MaintenanceExclusion(
                name=str(name),
                start=str(span.get("startTime", "")),
                end=str(span.get("endTime", "")),
                scope=str((span.get("maintenanceExclusionOptions") or {}).get("scope") or "NO_UPGRADES"),
            )
            for name, span in sorted((window.get("maintenanceExclusions") or {}).items())
        )
        return MaintenancePolicy(
            windows=tuple(windows),
            exclusions=exclusions,
            note="GKE's maintenance window and exclusions bound its automatic upgrades; the team's "
            "exclusions are freezes the bot respects (a Required finding, shown at the gate)",
        )

    def upgrade_insights(self, kubernetes_version: str) -> list[Insight]:
        """GKE's deprecation insights are the Recommender API's, which this SDK does not reach: one
        UNKNOWN insight says where the usage is read instead."""
        return [
            Insight(
                id="deprecation-insights",
                name="Deprecated API usage (GKE's deprecation insights)",
                status="UNKNOWN",
                reason="GKE reports deprecated-API usage as Recommender insights (not in the container API); "
                "GKE pauses its own automatic upgrades over it but does not refuse this one",
                category="UPGRADE_READINESS",
                kubernetes_version=kubernetes_version,
                recommendation="the removed-API check names the callers (the API server's own metric)",
                blocking=False,
            )
        ]

    # ---- updates -------------------------------------------------------------------------------

    def update_control_plane(
        self, version: str, *, token: str, force: bool = False, until: str = ""
    ) -> Operation:
        """`update_master` (`token`, `force` and `until` are unused: GKE takes no token and has no
        readiness block to force past)."""
        found = self._call(
            self._client.update_master, {"name": self.cluster_path, "master_version": version}, update=True
        )
        return _operation(as_json(found))

    def update_node_pool(self, pool: str, *, version: str, strategy: PoolStrategy, token: str) -> Operation:
        current = self.node_pool(pool)
        settings: Obj = {}
        if strategy.kind == "surge":
            settings = {"strategy": "SURGE"}
            if strategy.max_surge:
                settings["max_surge"] = int(strategy.max_surge)
            if strategy.max_unavailable:
                settings["max_unavailable"] = int(strategy.max_unavailable)
        elif strategy.kind == "replace":
            soak = f"{int(strategy.soak_seconds)}s"
            settings = {
                "strategy": "BLUE_GREEN",
                "blue_green_settings": {
                    "node_pool_soak_duration": soak,
                    "standard_rollout_policy": {"batch_percentage": 1.0},
                },
            }
        else:
            raise GcpError(
                f"GKE node pools upgrade by surge or blue-green, not {strategy.kind!r}",
                code="INVALID_ARGUMENT",
                status=400,
            )
        request: Obj = {
            "name": f"{self.cluster_path}/nodePools/{pool}",
            "node_version": version or "-",
            "image_type": str((current.get("config") or {}).get("imageType") or "COS_CONTAINERD"),
            "upgrade_settings": settings,
        }
        return _operation(as_json(self._call(self._client.update_node_pool, request, update=True)))

    def rollback_node_pool(self, pool: str, *, token: str) -> Operation:
        """`rollback_node_pool_upgrade`: a blue-green upgrade's blue pool back (while it soaks)."""
        found = self._call(
            self._client.rollback_node_pool_upgrade,
            {"name": f"{self.cluster_path}/nodePools/{pool}", "respect_pdb": True},
            update=True,
        )
        return _operation(as_json(found))

    def operations(self, *, node_pool: str = "", addon: str = "") -> list[str]:
        """The cluster's (or `node_pool`'s) operations still running, newest first."""
        found = self._call(self._client.list_operations, {"parent": self.location_path})
        target = f"/clusters/{self.name}" + (f"/nodePools/{node_pool}" if node_pool else "")
        out = []
        for op in found.operations:
            data = as_json(op)
            link = str(data.get("targetLink", ""))
            if data.get("status") in ("PENDING", "RUNNING") and (
                link.endswith(target) if node_pool else link.endswith(target) or "/nodePools/" not in link
            ):
                out.append(str(data.get("name", "")))
        return list(reversed(out))

    def operation(self, operation_id: str, *, node_pool: str = "", addon: str = "") -> Operation:
        found = self._call(
            self._client.get_operation, {"name": f"{self.location_path}/operations/{operation_id}"}
        )
        return _operation(as_json(found))

    def close(self) -> None:
        self._client.transport.close()


def _operation(data: Obj) -> Operation:
    status = STATUSES.get(str(data.get("status", "")), str(data.get("status", "")))
    error = data.get("error") or {}
    errors: tuple[OperationError, ...] = ()
    if error or (status == "Successful" and data.get("statusMessage")):
        status = "Failed"
        errors = (
            OperationError(
                code=RPC_CODES.get(int(error.get("code") or 2), str(error.get("code"))),
                message=str(error.get("message") or data.get("statusMessage", "")),
            ),
        )
    return Operation(
        id=str(data.get("name", "")),
        kind=str(data.get("operationType", "")),
        status=status,
        params={"Target": str(data.get("targetLink", "")).rsplit("/", 1)[-1]},
        errors=errors,
        created=str(data.get("startTime", "")),
    )


def _newer(version: str, current: str) -> bool:
    def key(text: str) -> tuple[int, ...]:
        head, _, build = text.lstrip("v").partition("-gke.")
        return (*(int(p) for p in head.split(".") if p.isdigit()), int(build or 0) if build.isdigit() else 0)

    try:
        return key(version) > key(current)
    except ValueError:
        return False


def _error(exc: Exception) -> GcpError:
    """google-api-core's exception as `GcpError`: Google's status name and the HTTP status."""
    status = int(getattr(exc, "code", 0) or 0)
    grpc_status = getattr(exc, "grpc_status_code", None)
    code = str(getattr(grpc_status, "name", "") or "")
    message = str(getattr(exc, "message", "") or exc)
    response = getattr(exc, "response", None)
    if response is not None:
        # The REST error's own `status` (FAILED_PRECONDITION …): api-core maps only some of them.
        try:
            error = response.json().get("error") or {}
        except Exception:
            error = {}
        if isinstance(error, dict):
            code = str(error.get("status") or code)
            message = str(error.get("message") or message)
    return GcpError(message, code=code, status=status)


#: The client's timeout for every call, in seconds.
TIMEOUT = 30.0


def missing() -> str:
    """Why the GKE SDK cannot be imported, for people ("" when it can): what `connect` refuses with."""
    return not_importable(
        "google-cloud-container",
        EXTRA_HINT,
        "google.api_core.client_options",
        "google.auth.credentials",
        "google.cloud.container_v1",
    )


def connect(provider: GkeProvider, *, update_within: float | None = None) -> Gke:
    """`ClusterManagerClient` (REST) for `provider`; `GcpUnavailable` without the SDK.

    `update_within`: the seconds an update call may take (the lease's figure, `bot.core.tenure`)."""
    reason = missing()
    if reason:
        raise GcpUnavailable(reason)
    from google.api_core import exceptions as core_exceptions
    from google.api_core.client_options import ClientOptions
    from google.auth import credentials as auth_credentials
    from google.cloud import container_v1

    options = None
    credentials: Any = None
    if provider.endpoint_url:
        options = ClientOptions(api_endpoint=provider.endpoint_url)
        credentials = auth_credentials.AnonymousCredentials()  # type: ignore[no-untyped-call]
    client = container_v1.ClusterManagerClient(
        credentials=credentials, transport="rest", client_options=options
    )
    timeout = TIMEOUT if update_within is None else min(TIMEOUT, update_within)
    return Gke(provider, client, (core_exceptions.GoogleAPIError,), timeout)
