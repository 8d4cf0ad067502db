"""The provider port: what checks and jobs ask of a cloud's control plane and node pools.

A managed cluster's cloud (EKS today; GKE and AKS next, issue 46) is one adapter under
`bot/adapters/providers/` that answers `Provider`, plus one sim facade its real SDK talks to
(`bot/sim/world/providers.py`). Checks and jobs import this module only, never an adapter: they
get a `Provider` from a `ProviderAccess` built with the clusters' provider configurations, and
read its answers as the plain records below (bot/records.py) or, for the cloud's own describe
calls, as the cloud's JSON, which that cloud's checks read.

What the port covers, and how each cloud fits it:

| port                      | EKS                              | GKE                               | AKS                                  |
|---------------------------|----------------------------------|-----------------------------------|--------------------------------------|
| `versions`                | DescribeCluster (next minor)     | get_server_config                 | get_upgrade_profile                  |
| `update_control_plane`    | UpdateClusterVersion (`force`)   | update_master                     | begin_create_or_update (CP only)     |
| `update_node_pool`        | UpdateNodegroupVersion (surge)   | update_node_pool (surge/blue-green)| agent pool upgrade (max surge)      |
| `rollback_node_pool`      | (refused)                        | rollback_node_pool_upgrade        | (refused)                            |
| `update_addon`            | UpdateAddon (resolveConflicts)   | (add-ons follow the master)       | (add-ons follow the control plane)   |
| `operations`/`operation`  | ListUpdates / DescribeUpdate     | list/get_operation                | the ARM async operation              |
| `maintenance`             | none (a note)                    | windows and exclusions            | planned maintenance configurations   |
| `upgrade_insights`        | ListInsights / DescribeInsight   | UNKNOWN (the Recommender API's)   | the override's state (the block)     |
| `capacity`                | DescribeSubnets                  | none (not read yet)               | none (not read yet)                  |
| `describe_for_snapshot`   | the describe calls above, + ASGs | None (not captured yet)           | None (not captured yet)              |

`force` overrides the cloud's own readiness block, only when people chose it: EKS's `force`
(past its upgrade insights); AKS's `upgradeSettings.overrideSettings` until `until` (ISO-8601
UTC; EKS's force has no expiry and ignores it).

Update calls take a `token`: the job's idempotency key (EKS's `clientRequestToken`; GKE and ARM
are asked for the operation by name instead). A job stores its intent before it calls and, after
an interruption, looks the operation up (`operations`, `operation`) before it ever calls again.

The errors: `ProviderUnavailable` (the cloud's SDK extra is not installed) and `ProviderError`
(the call failed; `code` and `status` from the cloud) — bot/errors.py draws them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from bot.errors import ProviderError, ProviderUnavailable, UserError, clip
from bot.records import (
    OPERATION_STATUSES,
    AksProvider,
    EksProvider,
    GkeProvider,
    Insight,
    MaintenanceExclusion,
    MaintenancePolicy,
    Operation,
    OperationError,
    PoolStrategy,
    SubnetCapacity,
    Versions,
)
from bot.timetext import said_span, said_time

__all__ = [
    "OPERATION_STATUSES",
    "Insight",
    "MaintenanceExclusion",
    "MaintenancePolicy",
    "Operation",
    "OperationError",
    "PoolStrategy",
    "Provider",
    "ProviderAccess",
    "ProviderConfig",
    "ProviderError",
    "ProviderUnavailable",
    "SubnetCapacity",
    "Versions",
    "connect",
    "said_span",
    "said_time",
    "sdk_missing",
]

Obj = dict[str, Any]

#: A cluster's `provider:` configuration; one record type per cloud.
ProviderConfig = EksProvider | AksProvider | GkeProvider

#: Each cloud's SDK and the extra that installs it (said when it is missing).
SDKS = {
    "eks": ("boto3", "pip install 'upgrade-bot[aws]'"),
    "aks": ("azure-mgmt-containerservice", "pip install 'upgrade-bot[aks]'"),
    "gke": ("google-cloud-container", "pip install 'upgrade-bot[gke]'"),
}
#: What each cloud's `provider:` entry names (said when a cluster has none).
PROVIDER_KEYS = {
    "eks": "name, region",
    "aks": "subscription_id, resource_group, name",
    "gke": "project, location, name",
}


class Provider(Protocol):
    """One managed cluster's cloud side. Reads return the cloud's answers; updates return the
    `Operation` they started (the same one again for the same `token`)."""

    #: The cloud (`eks`, `gke`, `aks`) and the cluster's name there.
    kind: str
    name: str

    # -- the cloud's own descriptions (its JSON: that cloud's checks read them) --------------------
    def control_plane(self) -> Obj: ...
    def node_pools(self) -> list[Obj]: ...
    def node_pool(self, name: str) -> Obj: ...
    def addons(self) -> list[Obj]: ...
    def addon(self, name: str) -> Obj: ...
    def addon_versions(self, addon: str, kubernetes_version: str) -> list[Obj]: ...

    # -- the port's own answers ---------------------------------------------------------------------
    def versions(self) -> Versions: ...
    def maintenance(self) -> MaintenancePolicy: ...
    def upgrade_insights(self, kubernetes_version: str) -> list[Insight]: ...
    def capacity(self, subnet_ids: list[str]) -> list[SubnetCapacity]: ...

    # -- what a snapshot keeps of the cloud's side (`bot.core.snapshots.provider`) -----------------
    def describe_for_snapshot(self, minors: Sequence[str]) -> Obj | None:
        """The cloud's own descriptions a snapshot keeps (its JSON, by part: `cluster`,
        `node_pools`, `addons`, `addon_versions` per add-on and minor of `minors`, `insights`,
        `subnets`, `launch_templates`, `auto_scaling_groups` for EKS); None when this cloud's side
        is not captured by snapshots (the snapshot says so)."""
        ...

    # -- updates, each once per token, and the operations that follow them -------------------------
    def update_control_plane(
        self, version: str, *, token: str, force: bool = False, until: str = ""
    ) -> Operation: ...
    def update_node_pool(
        self, pool: str, *, version: str, strategy: PoolStrategy, token: str
    ) -> Operation: ...
    def update_addon_version(self, addon: str, *, version: str, conflicts: str, token: str) -> Operation: ...
    def rollback_node_pool(self, pool: str, *, token: str) -> Operation:
        """A node pool's update undone (GKE's `rollback_node_pool_upgrade`; the others refuse)."""
        ...

    def operations(self, *, node_pool: str = "", addon: str = "") -> list[str]: ...
    def operation(self, operation_id: str, *, node_pool: str = "", addon: str = "") -> Operation: ...


def connect(config: ProviderConfig, *, update_within: float | None = None) -> Provider:
    """The adapter for `config`'s cloud, its SDK imported only now (`ProviderUnavailable` without
    the extra). A new cloud is one branch here, its adapter and its sim facade.

    `update_within`: the seconds an update call may take, the figure the replica's lease is
    checked against before it (`bot.core.tenure`); None for the SDK's own timeouts."""
    if isinstance(config, EksProvider):
        from bot.adapters.providers import eks

        return eks.connect(config, update_within=update_within)
    if isinstance(config, AksProvider):
        from bot.adapters.providers import aks

        return aks.connect(config, update_within=update_within)
    if isinstance(config, GkeProvider):
        from bot.adapters.providers import gke

        return gke.connect(config, update_within=update_within)
    raise ProviderUnavailable(f"no provider adapter for {type(config).__name__}")


#: The clients that only read each cloud, by the configuration they were connected for (`reading`).
_READERS: dict[ProviderConfig, Provider] = {}
_READERS_LOCK = threading.Lock()


def reading(config: ProviderConfig) -> Provider:
    """`config`'s provider for what only reads the cloud (a snapshot's cloud side, a check's cloud
    findings, a drafted plan's versions), connected once per process. Connecting builds the SDK's
    clients (five for EKS): about half a second of CPU, which each snapshot and check of a cluster
    with a provider paid again, and a rehearsal took as minutes of its sped-up clock. Update calls
    go through `ProviderAccess`, whose clients are its own, guarded by the replica's lease. Two first
    calls at once may both connect (one of the two is kept): clusters of a fleet check connect side
    by side rather than one after another behind a lock."""
    with _READERS_LOCK:
        known = _READERS.get(config)
    if known is not None:
        return known
    provider = connect(config)  # ProviderUnavailable propagates, and nothing is kept
    with _READERS_LOCK:
        return _READERS.setdefault(config, provider)


def sdk_missing(kind: str) -> str:
    """Why the bot cannot import cloud `kind`'s SDK, for people ("" when it can, or the cloud is
    unknown): what its `connect` would refuse with, asked before a plan's actions meet it."""
    if kind == "eks":
        from bot.adapters.providers import eks

        return eks.missing()
    if kind == "aks":
        from bot.adapters.providers import aks

        return aks.missing()
    if kind == "gke":
        from bot.adapters.providers import gke

        return gke.missing()
    return ""


class ProviderAccess:
    """Cluster name (as the configuration names it) → its provider, connected once and kept.

    Refuses with a short reason (`UserError`) when the cluster names no provider, or the bot
    lacks the cloud's SDK extra (`kind` names the cloud in those reasons)."""

    def __init__(
        self,
        providers: Mapping[str, ProviderConfig | None],
        connect: Callable[[ProviderConfig], Provider] | None = None,
        *,
        kind: str = "eks",
        guard: Callable[[Provider], Provider] | None = None,
        elsewhere: Mapping[str, str] | None = None,
    ) -> None:
        self.providers = dict(providers)
        self.kind = kind
        #: Cluster → the cloud its configuration does name, when another one: said in the refusal
        #: ("prod is an EKS cluster"), which a plan for the wrong cloud meets at its first step.
        self._elsewhere = dict(elsewhere or {})
        self._connect = connect
        #: Wraps each client so its update calls are made only inside the leader's lease
        #: (`bot.core.tenure.GuardedCalls`, given by `assemble`).
        self._guard = guard
        self._clients: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: str) -> Provider:
        provider = self.providers.get(cluster)
        if provider is None:
            other = self._elsewhere.get(cluster)
            if other and other != self.kind:
                raise UserError(
                    f"cluster {clip(cluster)} runs on {other.upper()} (its `provider: {{{other}: …}}`), not "
                    f"{self.kind.upper()}: the {self.kind.upper()} actions are for {self.kind.upper()} clusters — is "
                    "this the right plan for it?"
                )
            raise UserError(
                f"cluster {clip(cluster)} has no {self.kind.upper()} provider: the {self.kind.upper()} actions need "
                f"`provider: {{{self.kind}: {{{PROVIDER_KEYS.get(self.kind, 'name')}}}}}` in its configuration"
            )
        with self._lock:
            if cluster not in self._clients:
                try:
                    client = (self._connect or connect)(provider)
                    self._clients[cluster] = self._guard(client) if self._guard is not None else client
                except ProviderUnavailable:
                    sdk, extra = SDKS.get(self.kind, ("its SDK", "its extra"))
                    raise UserError(
                        f"the {self.kind.upper()} actions need {sdk}, which this bot does not have ({extra})"
                    ) from None
            return self._clients[cluster]


def no_provider_of(kind: str) -> Callable[[str], Provider]:
    """The access of a registry built without `kind`'s providers (tests, tools): its actions refuse."""
    name = kind.upper()

    def refuse(cluster: str) -> Provider:
        raise UserError(f"cluster {clip(cluster)} has no {name} provider: the {name} actions need one")

    return refuse


#: Each cloud's actions' access in a registry built without providers.
no_provider = no_provider_of("eks")
no_aks_provider = no_provider_of("aks")
no_gke_provider = no_provider_of("gke")
