"""The AKS provider (`bot.core.providers`' ARM adapter): the one module that imports
`azure-mgmt-containerservice`, and only when an AKS cluster is used.

The SDK is the optional `aks` extra (`pip install 'upgrade-bot[aks]'`). `connect(provider)` imports
it then, and raises `AzureUnavailable` with the reason when it cannot, so a bot without the extra
loads and runs as before. Credentials: azure-identity's `DefaultAzureCredential` against Azure
itself (workload identity in the chart); against another endpoint (the simulator's `/azure`) a
`StaticToken`, the SDK's documented `TokenCredential` extension point, and `enforce_https=False`
on each request (azure-core refuses a bearer token over plain HTTP otherwise).

What the port asks, in ARM's terms:
- `update_control_plane`: PUT of the managed cluster with `kubernetesVersion` changed and every
  agent pool's `orchestratorVersion` left as it is (the control plane only, as `az aks upgrade
  --control-plane-only` does). `force` sets `upgradeSettings.overrideSettings` (`forceUpgrade`,
  `until`): AKS's own override of its deprecated-API block, with the expiry people chose.
- `update_node_pool`: PUT of the agent pool with `orchestratorVersion` and, when given,
  `upgradeSettings.maxSurge`.
- Both are started with `polling=False`: the job, not a thread of the SDK's poller, follows the
  long-running operation, through its `Azure-AsyncOperation` URL (its last segment is the
  `Operation.id`; `operation` GETs it). ARM takes no idempotency token and lists no operations
  (`operations` is empty): after an interruption the job reads the resource's own
  `provisioningState` and versions before it ever calls again (bot/core/jobs/aks.py).

Answers are ARM's JSON as the SDK's models serialize it (`properties` nested, camelCase), or the
port's records; any SDK error becomes `AzureError` (the port's `ProviderError`) with ARM's code —
its `subcode` when it has one (`UpgradeBlockedOnDeprecatedAPIUsage`) — and HTTP status.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from bot.adapters.providers import FollowsControlPlane, call_timeouts, not_importable
from bot.errors import ProviderError, ProviderUnavailable
from bot.records import (
    AksProvider,
    Insight,
    MaintenanceExclusion,
    MaintenancePolicy,
    Operation,
    OperationError,
    PoolStrategy,
    Versions,
)
from bot.timetext import said_time

Obj = dict[str, Any]

EXTRA_HINT = "pip install 'upgrade-bot[aks]'"
RP = "Microsoft.ContainerService"
#: ARM's async-operation statuses in the port's words.
STATUSES = {
    "InProgress": "InProgress",
    "Running": "InProgress",
    "Accepted": "InProgress",
    "Succeeded": "Successful",
    "Failed": "Failed",
    "Canceled": "Cancelled",
    "Cancelled": "Cancelled",
}
#: The refusal of a minor upgrade over deprecated-API usage in the last 12 hours (ARM's subcode).
API_BLOCK = "UpgradeBlockedOnDeprecatedAPIUsage"


class AzureUnavailable(ProviderUnavailable):
    """The Azure side cannot be read at all (no azure-mgmt-containerservice); the reason is for people."""


class AzureError(ProviderError):
    """An ARM call failed; `code` is ARM's (its subcode when it gives one), `status` the HTTP
    status (0 when ARM did not answer: worth trying again)."""


class StaticToken:
    """A `TokenCredential` that answers one fixed token: for an ARM endpoint that is not Azure's
    (the simulator), where no identity platform exists to ask."""

    def __init__(self, token: str = "upgrade-bot-static-token") -> None:
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(datetime.now(UTC).timestamp()) + 3600)


class Aks(FollowsControlPlane):
    """One AKS managed cluster through `ContainerServiceClient` (add-ons, capacity and the snapshot:
    `FollowsControlPlane`)."""

    kind = "aks"

    def __init__(
        self, provider: AksProvider, client: Any, errors: tuple[type[Exception], ...], *, plain_http: bool
    ) -> None:
        self.provider = provider
        self.name = provider.name
        self._client = client
        self._errors = errors
        #: Per-request options: `enforce_https=False` only for an endpoint that is not Azure's.
        self._options: Obj = {"enforce_https": False} if plain_http else {}
        self._location = ""
        self._lock = threading.Lock()

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self.provider.resource_group, self.name, *args, **self._options, **kwargs)
        except self._errors as exc:
            raise _error(exc) from exc

    # ---- ARM's descriptions ------------------------------------------------------------------------

    def control_plane(self) -> Obj:
        found = self._call(self._client.managed_clusters.get)
        out: Obj = found.as_dict()
        with self._lock:
            self._location = str(out.get("location") or self._location)
        return out

    def node_pools(self) -> list[Obj]:
        try:
            return [
                p.as_dict()
                for p in self._client.agent_pools.list(
                    self.provider.resource_group, self.name, **self._options
                )
            ]
        except self._errors as exc:
            raise _error(exc) from exc

    def node_pool(self, name: str) -> Obj:
        out: Obj = self._call(self._client.agent_pools.get, name).as_dict()
        return out

    def upgrade_profile(self) -> Obj:
        out: Obj = self._call(self._client.managed_clusters.get_upgrade_profile).as_dict()
        return out

    def maintenance_configurations(self) -> list[Obj]:
        try:
            pages = self._client.maintenance_configurations.list_by_managed_cluster(
                self.provider.resource_group, self.name, **self._options
            )
            return [m.as_dict() for m in pages]
        except self._errors as exc:
            raise _error(exc) from exc

    def _managed(self, addon: str) -> AzureError:
        # AKS's add-ons (CoreDNS, kube-proxy, the CSI drivers) follow the control plane's version.
        return AzureError(
            f"AKS manages its add-on {addon} with the control plane", code="NotSupported", status=400
        )

    # ---- the port's own answers -------------------------------------------------------------------

    def versions(self) -> Versions:
        """The upgrade profile's control-plane upgrades (AKS offers the next minor's patches)."""
        cp = (self.upgrade_profile().get("properties") or {}).get("controlPlaneProfile") or {}
        offered = tuple(
            str(u.get("kubernetesVersion", "")) for u in cp.get("upgrades") or [] if not u.get("isPreview")
        )
        return Versions(
            current=str(cp.get("kubernetesVersion", "")),
            offered=offered,
            default=offered[-1] if offered else "",
        )

    def maintenance(self) -> MaintenancePolicy:
        windows: list[str] = []
        exclusions: list[MaintenanceExclusion] = []
        for config in self.maintenance_configurations():
            name = str(config.get("name", ""))
            props = config.get("properties") or {}
            window = props.get("maintenanceWindow") or {}
            if window:
                # ARM writes the offset even when it is none ("+00:00"): "01:00 UTC" then.
                offset = str(window.get("utcOffset") or "").removeprefix("+00:00")
                windows.append(
                    f"{name}: {_schedule(window.get('schedule') or {})} at {window.get('startTime', '?')} "
                    f"UTC{offset} for {window.get('durationHours', '?')}h"
                )
            # A configuration's own blackout spans, then its window's: each named by where it stands.
            spans = (("notAllowedTime", props), ("notAllowedDates", window))
            exclusions.extend(
                MaintenanceExclusion(
                    name=name, start=str(span.get("start", "")), end=str(span.get("end", "")), scope=scope
                )
                for scope, holder in spans
                for span in holder.get(scope) or []
            )
        return MaintenancePolicy(
            windows=tuple(windows),
            exclusions=tuple(exclusions),
            note="AKS's planned maintenance configurations: aksManagedAutoUpgradeSchedule and "
            "aksManagedNodeOSUpgradeSchedule bound its own upgrades; a user's PUT is not held by them",
        )

    def upgrade_insights(self, kubernetes_version: str) -> list[Insight]:
        """AKS's deprecated-API block, as far as ARM shows it: ARM does not list the usage (AKS
        reads the API server's `apiserver_requested_deprecated_apis`, as the bot's own API check
        does); it shows whether the override is set, and until when."""
        props = self.control_plane().get("properties") or {}
        override = (props.get("upgradeSettings") or {}).get("overrideSettings") or {}
        until = str(override.get("until") or "")
        active = bool(override.get("forceUpgrade")) and _after_now(until)
        return [
            Insight(
                id="deprecated-api-usage",
                name="Deprecated API usage (AKS's upgrade block)",
                status="WARNING" if active else "UNKNOWN",
                reason=(
                    f"the override is set until {said_time(until)}: AKS does not block on deprecated-API usage"
                    if active
                    else "AKS refuses a minor upgrade after usage of an API the target removes in the last 12 hours"
                ),
                category="UPGRADE_READINESS",
                kubernetes_version=kubernetes_version,
                recommendation="stop the usage (the API check names the callers), or override with an expiry",
                blocking=False,
            )
        ]

    # ---- updates -------------------------------------------------------------------------------

    def update_control_plane(
        self, version: str, *, token: str, force: bool = False, until: str = ""
    ) -> Operation:
        """PUT of the managed cluster with only `kubernetesVersion` changed (`token` is unused:
        ARM takes none). `force` with `until` (ISO-8601 UTC) sets AKS's override until then."""
        from azure.mgmt.containerservice import models

        current = self._call(self._client.managed_clusters.get)
        current.kubernetes_version = version
        if force:
            if current.upgrade_settings is None:
                current.upgrade_settings = models.ClusterUpgradeSettings()
            current.upgrade_settings.override_settings = models.UpgradeOverrideSettings(
                force_upgrade=True,
                until=datetime.fromisoformat(until.replace("Z", "+00:00")) if until else None,
            )
        return self._begin(
            self._client.managed_clusters.begin_create_or_update,
            current,
            kind="ManagedClusterUpgrade",
            version=version,
        )

    def update_node_pool(self, pool: str, *, version: str, strategy: PoolStrategy, token: str) -> Operation:
        from azure.mgmt.containerservice import models

        if strategy.kind != "surge":
            raise AzureError(
                f"AKS agent pools upgrade by surge only, not {strategy.kind!r}", code="BadRequest", status=400
            )
        current = self._call(self._client.agent_pools.get, pool)
        if version:
            current.orchestrator_version = version
        if strategy.max_surge:
            if current.upgrade_settings is None:
                current.upgrade_settings = models.AgentPoolUpgradeSettings()
            current.upgrade_settings.max_surge = strategy.max_surge
        return self._begin(
            self._client.agent_pools.begin_create_or_update,
            pool,
            current,
            kind="AgentPoolUpgrade",
            version=version,
        )

    def rollback_node_pool(self, pool: str, *, token: str) -> Operation:
        raise AzureError(
            f"AKS has no rollback of agent pool {pool}'s upgrade", code="NotSupported", status=400
        )

    def _begin(self, fn: Any, *args: Any, kind: str, version: str) -> Operation:
        """Start a PUT without the SDK's poller; the operation is read from its
        `Azure-AsyncOperation` header (none: nothing changed, so nothing to follow)."""
        headers: dict[str, str] = {}

        def hook(response: Any) -> None:
            headers.update({k.lower(): v for k, v in response.http_response.headers.items()})

        self._call(fn, *args, polling=False, raw_response_hook=hook)
        url = headers.get("azure-asyncoperation") or headers.get("location") or ""
        if not url:
            return Operation(id="", kind=kind, status="Successful", params={"Version": version})
        op_id = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        location = url.split("/locations/", 1)[1].split("/", 1)[0] if "/locations/" in url else ""
        if location:
            with self._lock:
                self._location = location
        return Operation(
            id=op_id, kind=kind, status="InProgress", params={"Version": version}, created=_now_iso()
        )

    def operations(self, *, node_pool: str = "", addon: str = "") -> list[str]:
        # ARM lists no operations: a job recovers from the resource's provisioningState instead.
        return []

    def operation(self, operation_id: str, *, node_pool: str = "", addon: str = "") -> Operation:
        """The async operation `operation_id` (GET of its Azure-AsyncOperation URL)."""
        from azure.core.rest import HttpRequest

        with self._lock:
            location = self._location
        if not location:
            location = str(self.control_plane().get("location", ""))
        endpoint = (self.provider.endpoint_url or "https://management.azure.com").rstrip("/")
        url = (
            f"{endpoint}/subscriptions/{self.provider.subscription_id}/providers/{RP}/locations/{location}"
            f"/operations/{operation_id}?api-version={self._client._config.api_version}"
        )
        try:
            response = self._client.send_request(HttpRequest("GET", url), **self._options)
            response.raise_for_status()
            found = response.json()
        except self._errors as exc:
            raise _error(exc) from exc
        error = found.get("error") or {}
        return Operation(
            id=str(found.get("name", operation_id)),
            kind="AgentPoolUpgrade" if node_pool else "ManagedClusterUpgrade",
            status=STATUSES.get(str(found.get("status", "")), str(found.get("status", ""))),
            errors=(OperationError(code=str(error.get("code", "?")), message=str(error.get("message", ""))),)
            if error
            else (),
            created=str(found.get("startTime", "")),
        )

    def close(self) -> None:
        self._client.close()


def _schedule(schedule: Obj) -> str:
    if "weekly" in schedule:
        w = schedule["weekly"]
        return f"every {w.get('intervalWeeks', 1)} week(s) on {w.get('dayOfWeek', '?')}"
    if "daily" in schedule:
        return f"every {schedule['daily'].get('intervalDays', 1)} day(s)"
    if "absoluteMonthly" in schedule:
        m = schedule["absoluteMonthly"]
        return f"day {m.get('dayOfMonth', '?')} every {m.get('intervalMonths', 1)} month(s)"
    if "relativeMonthly" in schedule:
        m = schedule["relativeMonthly"]
        return f"the {m.get('weekIndex', '?')} {m.get('dayOfWeek', '?')} every {m.get('intervalMonths', 1)} month(s)"
    return "a schedule"


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _after_now(text: str) -> bool:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (when if when.tzinfo else when.replace(tzinfo=UTC)) > datetime.now(UTC)


def _error(exc: Exception) -> AzureError:
    """azure-core's exception as `AzureError`: ARM's code (its subcode first) and status."""
    status = int(getattr(exc, "status_code", 0) or 0)
    code = ""
    message = str(getattr(exc, "message", "") or exc)
    response = getattr(exc, "response", None)
    if response is not None:
        try:
            body = response.json()
        except Exception:
            body = {}
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code = str(error.get("subcode") or error.get("code") or "")
            message = str(error.get("message") or message)
    return AzureError(message, code=code, status=status)


#: azure-core's timeouts for every call: to connect, and to read the answer.
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0


def missing() -> str:
    """Why the AKS SDK cannot be imported, for people ("" when it can): what `connect` refuses
    with (azure-identity, needed for Azure's own endpoint only, is asked for there)."""
    return not_importable(
        "azure-mgmt-containerservice", EXTRA_HINT, "azure.core.exceptions", "azure.mgmt.containerservice"
    )


def connect(provider: AksProvider, *, update_within: float | None = None) -> Aks:
    """`ContainerServiceClient` for `provider`; `AzureUnavailable` without the SDK.

    `update_within`: the seconds an update call may take (the lease's figure, `bot.core.tenure`);
    the client then retries nothing (a retried PUT is the same call made twice)."""
    reason = missing()
    if reason:
        raise AzureUnavailable(reason)
    from azure.core.exceptions import AzureError as SdkError
    from azure.mgmt.containerservice import ContainerServiceClient

    credential: Any
    if provider.endpoint_url:
        credential = StaticToken()
    else:
        try:
            from azure.identity import DefaultAzureCredential  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:
            raise AzureUnavailable(f"azure-identity is not installed ({EXTRA_HINT}): {exc}") from None
        credential = DefaultAzureCredential()
    # azure-core logs every request and response at INFO: the bot's log keeps its own lines.
    logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)
    connect_s, read_s = call_timeouts(update_within, CONNECT_TIMEOUT, READ_TIMEOUT)
    kwargs: Obj = {"connection_timeout": connect_s, "read_timeout": read_s}
    if update_within is not None:
        # One attempt: the job's own look-up of the resource is the retry.
        kwargs["retry_total"] = 0
    client = ContainerServiceClient(
        credential,
        provider.subscription_id,
        base_url=provider.endpoint_url or "https://management.azure.com",
        **kwargs,
    )
    plain = bool(provider.endpoint_url and provider.endpoint_url.startswith("http://"))
    return Aks(provider, client, (SdkError,), plain_http=plain)
