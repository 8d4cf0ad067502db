"""The EKS provider (`bot.core.providers`' first adapter): the one module that imports boto3, and
only when it is used.

boto3 is the optional `aws` extra (`pip install 'upgrade-bot[aws]'`). `connect(provider)` imports
it then, and raises `AwsUnavailable` with the reason when it cannot: nothing else in the bot
imports boto3, so a bot without the extra loads and runs as before. Credentials come from the
standard chain (environment, shared files, IRSA / EKS Pod Identity in the chart); the region and,
for the simulator, the endpoint come from the cluster's `provider: {eks: …}`.

The answers are botocore's, as plain dicts and lists (datetimes stay datetimes), or the port's
records (`Operation`, `Versions`, `Insight` …) for the port's own calls; any client or connection
error becomes `AwsError` (the port's `ProviderError`) with botocore's message, so callers never
see botocore's types.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from bot.adapters.providers import call_timeouts, not_importable
from bot.errors import ProviderError, ProviderUnavailable
from bot.records import (
    EksProvider,
    Insight,
    MaintenancePolicy,
    Operation,
    OperationError,
    PoolStrategy,
    SubnetCapacity,
    Versions,
)

Obj = dict[str, Any]

#: What to install for the EKS checks (said in every "skipped" note).
EXTRA_HINT = "pip install 'upgrade-bot[aws]'"


class AwsUnavailable(ProviderUnavailable):
    """The AWS side cannot be read at all (no boto3); the reason is for people."""


class AwsError(ProviderError):
    """An AWS call failed (refused, unreachable, no credentials); the message is botocore's.

    `code` is AWS's error code (`InvalidParameterException`, `ResourceInUseException` …) and
    `status` its HTTP status when AWS answered; both empty/0 when it did not (a connection error,
    no credentials), which is worth trying again."""


class Eks:
    """One EKS cluster's reads through boto3's `eks`, `ec2`, `autoscaling` and `cloudformation`
    clients."""

    kind = "eks"

    def __init__(
        self,
        provider: EksProvider,
        clients: tuple[Any, Any, Any],
        errors: tuple[type[Exception], ...],
        *,
        once: Any = None,
        cloudformation: Any = None,
    ) -> None:
        self.provider = provider
        self.name = provider.name
        self._eks, self._ec2, self._autoscaling = clients
        #: The `eks` client the update calls go through: boto3 does not retry it (a retried
        #: UpdateX is the same call made twice); the job looks its update up instead.
        self._once = once if once is not None else self._eks
        #: eksctl's node-group stacks are read, never changed: DescribeStacks, DescribeStackEvents.
        self._cloudformation = cloudformation
        self._errors = errors

    def _call(self, fn: Any, **kwargs: Any) -> Obj:
        try:
            return dict(fn(**kwargs))
        except self._errors as exc:
            raise _error(exc) from exc

    def _pages(self, client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[Obj]:
        try:
            for page in client.get_paginator(operation).paginate(**kwargs):
                yield from page.get(key) or []
        except self._errors as exc:
            raise _error(exc) from exc

    # ---- EKS --------------------------------------------------------------------------------------

    def cluster(self) -> Obj:
        return dict(self._call(self._eks.describe_cluster, name=self.name)["cluster"])

    def nodegroups(self) -> list[Obj]:
        names = list(self._pages(self._eks, "list_nodegroups", "nodegroups", clusterName=self.name))
        return [
            dict(
                self._call(self._eks.describe_nodegroup, clusterName=self.name, nodegroupName=n)["nodegroup"]
            )
            for n in names
        ]

    def addons(self) -> list[Obj]:
        names = list(self._pages(self._eks, "list_addons", "addons", clusterName=self.name))
        return [
            dict(self._call(self._eks.describe_addon, clusterName=self.name, addonName=n)["addon"])
            for n in names
        ]

    def addon_versions(self, addon: str, kubernetes_version: str) -> list[Obj]:
        """The versions of `addon` EKS offers for `kubernetes_version` (each with its compatibilities)."""
        infos = self._pages(
            self._eks,
            "describe_addon_versions",
            "addons",
            addonName=addon,
            kubernetesVersion=kubernetes_version,
        )
        return [
            dict(v)
            for info in infos
            if info.get("addonName") == addon
            for v in info.get("addonVersions") or []
        ]

    def insights(self, kubernetes_version: str) -> list[Obj]:
        """The upgrade insights for `kubernetes_version`, each described in full."""
        summaries = list(
            self._pages(
                self._eks,
                "list_insights",
                "insights",
                clusterName=self.name,
                filter={"kubernetesVersions": [kubernetes_version]},
            )
        )
        return [
            dict(self._call(self._eks.describe_insight, clusterName=self.name, id=s["id"])["insight"])
            for s in summaries
        ]

    def nodegroup(self, name: str) -> Obj:
        found = self._call(self._eks.describe_nodegroup, clusterName=self.name, nodegroupName=name)
        return dict(found["nodegroup"])

    def addon(self, name: str) -> Obj:
        return dict(self._call(self._eks.describe_addon, clusterName=self.name, addonName=name)["addon"])

    # ---- EKS updates (the gated EKS actions: `bot.core.jobs.eks`) ---------------------------------
    # Each takes the job's `clientRequestToken`: EKS answers the same update for the same token, so
    # a job that crashed between the call and storing its answer never starts a second update.

    def update_cluster_version(self, version: str, *, token: str, force: bool = False) -> Obj:
        # `force` only when people chose it (it overrides the upgrade insights' block); never sent
        # otherwise, so the call is the one EKS always saw.
        extra: Obj = {"force": True} if force else {}
        found = self._call(
            self._once.update_cluster_version,
            name=self.name,
            version=version,
            clientRequestToken=token,
            **extra,
        )
        return dict(found["update"])

    def update_nodegroup_version(self, nodegroup: str, *, version: str, force: bool, token: str) -> Obj:
        args: Obj = {"clusterName": self.name, "nodegroupName": nodegroup, "force": force}
        if version:
            args["version"] = version
        found = self._call(self._once.update_nodegroup_version, clientRequestToken=token, **args)
        return dict(found["update"])

    def update_addon(self, addon: str, *, version: str, resolve_conflicts: str, token: str) -> Obj:
        found = self._call(
            self._once.update_addon,
            clusterName=self.name,
            addonName=addon,
            addonVersion=version,
            resolveConflicts=resolve_conflicts,
            clientRequestToken=token,
        )
        return dict(found["update"])

    def list_updates(self, *, nodegroup: str = "", addon: str = "") -> list[str]:
        """The ids of the cluster's updates (of a node group's or an add-on's, when named)."""
        args: Obj = {"name": self.name}
        if nodegroup:
            args["nodegroupName"] = nodegroup
        if addon:
            args["addonName"] = addon
        return [str(i) for i in self._pages(self._eks, "list_updates", "updateIds", **args)]

    def describe_update(self, update_id: str, *, nodegroup: str = "", addon: str = "") -> Obj:
        args: Obj = {"name": self.name, "updateId": update_id}
        if nodegroup:
            args["nodegroupName"] = nodegroup
        if addon:
            args["addonName"] = addon
        return dict(self._call(self._eks.describe_update, **args)["update"])

    # ---- EC2 and Auto Scaling ---------------------------------------------------------------------

    def subnets(self, ids: list[str]) -> list[Obj]:
        if not ids:
            return []
        return [dict(s) for s in self._pages(self._ec2, "describe_subnets", "Subnets", SubnetIds=ids)]

    def latest_template_version(self, template_id: str) -> int | None:
        found = (
            self._call(
                self._ec2.describe_launch_template_versions,
                LaunchTemplateId=template_id,
                Versions=["$Latest"],
            ).get("LaunchTemplateVersions")
            or []
        )
        return int(found[0]["VersionNumber"]) if found else None

    def auto_scaling_groups(self) -> list[Obj]:
        """The Auto Scaling groups tagged as the cluster's (`kubernetes.io/cluster/NAME`)."""
        return [
            dict(g)
            for g in self._pages(
                self._autoscaling,
                "describe_auto_scaling_groups",
                "AutoScalingGroups",
                Filters=[{"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{self.name}"]}],
            )
        ]

    # ---- CloudFormation (eksctl builds each node group as a stack) -------------------------------

    def stack(self, name: str) -> Obj | None:
        """The stack as DescribeStacks describes it; None when there is no such stack (a node group
        that eksctl did not build: Terraform's, the console's)."""
        if self._cloudformation is None:
            return None
        try:
            found = self._call(self._cloudformation.describe_stacks, StackName=name).get("Stacks") or []
        except AwsError as exc:
            # CloudFormation's word for "no such stack" is a ValidationError, not a 404.
            if exc.code == "ValidationError" and "does not exist" in str(exc):
                return None
            raise
        return dict(found[0]) if found else None

    def stack_events(self, name: str) -> list[Obj]:
        """The stack's events, newest first (DescribeStackEvents' first page: the last operation's
        events are on it)."""
        if self._cloudformation is None:
            return []
        found = self._call(self._cloudformation.describe_stack_events, StackName=name)
        return [dict(e) for e in found.get("StackEvents") or []]

    # ---- the provider port (`bot.core.providers.Provider`) ----------------------------------------

    def control_plane(self) -> Obj:
        return self.cluster()

    def node_pools(self) -> list[Obj]:
        return self.nodegroups()

    def node_pool(self, name: str) -> Obj:
        return self.nodegroup(name)

    def versions(self) -> Versions:
        """EKS updates one minor at a time: the next minor is the one version offered."""
        current = str(self.cluster().get("version", ""))
        major, _, minor = current.partition(".")
        offered = (f"{major}.{int(minor) + 1}",) if major.isdigit() and minor.isdigit() else ()
        return Versions(current=current, offered=offered, default=offered[0] if offered else "")

    def maintenance(self) -> MaintenancePolicy:
        return MaintenancePolicy(
            note="EKS has no maintenance windows or exclusions: AWS patches the control plane within"
            " its minor version on its own, and starts no version update by itself"
        )

    def upgrade_insights(self, kubernetes_version: str) -> list[Insight]:
        return [_insight(i) for i in self.insights(kubernetes_version)]

    def capacity(self, subnet_ids: list[str]) -> list[SubnetCapacity]:
        return [
            SubnetCapacity(
                id=str(s.get("SubnetId", "")),
                zone=str(s.get("AvailabilityZone", "")),
                free=int(s.get("AvailableIpAddressCount") or 0),
            )
            for s in self.subnets(subnet_ids)
        ]

    def describe_for_snapshot(self, minors: Sequence[str]) -> Obj:
        """What a snapshot keeps of the cloud's side, as EKS, EC2 and Auto Scaling describe it:
        the cluster, its managed node groups (with each launch template's latest version), its
        add-ons and the versions EKS offers of each for every minor of `minors`, the upgrade
        insights of those minors, the subnets of the cluster and of its groups, and the cluster's
        Auto Scaling groups."""
        cluster = self.cluster()
        groups = self.nodegroups()
        addons = self.addons()
        vpc = cluster.get("resourcesVpcConfig") or {}
        subnet_ids = sorted(
            {str(i) for i in vpc.get("subnetIds") or []}
            | {str(i) for g in groups for i in g.get("subnets") or []}
        )
        templates = sorted({str(lt["id"]) for g in groups if (lt := g.get("launchTemplate") or {}).get("id")})
        return {
            "cluster": cluster,
            "node_pools": groups,
            "addons": addons,
            "addon_versions": {
                str(a["addonName"]): {m: self.addon_versions(str(a["addonName"]), m) for m in minors}
                for a in addons
            },
            "insights": [i for m in minors for i in self.insights(m)],
            "subnets": self.subnets(subnet_ids),
            "launch_templates": {t: self.latest_template_version(t) for t in templates},
            "auto_scaling_groups": self.auto_scaling_groups(),
        }

    def update_control_plane(
        self, version: str, *, token: str, force: bool = False, until: str = ""
    ) -> Operation:
        # `until`: EKS's force has no expiry (it is one call's flag).
        return _operation(self.update_cluster_version(version, token=token, force=force))

    def update_node_pool(self, pool: str, *, version: str, strategy: PoolStrategy, token: str) -> Operation:
        if strategy.kind != "surge":
            raise AwsError(
                f"EKS managed node groups update by surge only, not {strategy.kind!r}",
                code="InvalidParameterException",
                status=400,
            )
        return _operation(
            self.update_nodegroup_version(pool, version=version, force=strategy.force, token=token)
        )

    def update_addon_version(self, addon: str, *, version: str, conflicts: str, token: str) -> Operation:
        return _operation(self.update_addon(addon, version=version, resolve_conflicts=conflicts, token=token))

    def rollback_node_pool(self, pool: str, *, token: str) -> Operation:
        # EKS rolls a node group back by updating it again to the old version (a new update).
        raise AwsError(f"EKS has no rollback of node group {pool}'s update", code="NotSupported", status=400)

    def operations(self, *, node_pool: str = "", addon: str = "") -> list[str]:
        return self.list_updates(nodegroup=node_pool, addon=addon)

    def operation(self, operation_id: str, *, node_pool: str = "", addon: str = "") -> Operation:
        return _operation(self.describe_update(operation_id, nodegroup=node_pool, addon=addon))


def _operation(update: Obj) -> Operation:
    """EKS's `update` as the port's `Operation` (its statuses are the port's own words)."""
    created = update.get("createdAt")
    return Operation(
        id=str(update.get("id", "")),
        kind=str(update.get("type", "")),
        status=str(update.get("status", "")),
        params={str(p.get("type")): str(p.get("value")) for p in update.get("params") or []},
        errors=tuple(
            OperationError(
                code=str(e.get("errorCode", "?")),
                message=str(e.get("errorMessage", "")),
                resources=tuple(str(r) for r in e.get("resourceIds") or []),
            )
            for e in update.get("errors") or []
        ),
        created=created.isoformat() if isinstance(created, datetime) else str(created or ""),
    )


def _insight(insight: Obj) -> Insight:
    status = insight.get("insightStatus") or {}
    return Insight(
        id=str(insight.get("id", "")),
        name=str(insight.get("name", "")),
        status=str(status.get("status", "UNKNOWN")),
        reason=str(status.get("reason", "")),
        category=str(insight.get("category", "")),
        kubernetes_version=str(insight.get("kubernetesVersion", "")),
        recommendation=str(insight.get("recommendation", "")),
        # EKS blocks UpdateClusterVersion on an upgrade-readiness insight in ERROR (unless forced).
        blocking=status.get("status") == "ERROR" and insight.get("category") == "UPGRADE_READINESS",
        uses=_insight_uses(insight.get("categorySpecificSummary") or {}),
    )


def _insight_uses(summary: Obj) -> tuple[str, ...]:
    """DescribeInsight's deprecated APIs with their callers, and its add-ons with the versions that
    suit the target, one line each."""
    uses = []
    for d in summary.get("deprecationDetails") or []:
        callers = ", ".join(
            f"{c.get('userAgent') or 'an unnamed client'} {int(c.get('numberOfRequestsLast30Days') or 0):,} "
            "times in 30 days"
            for c in d.get("clientStats") or []
        )
        replaced = f" → {d['replacedWith']}" if d.get("replacedWith") else ""
        uses.append(f"{d.get('usage', '')}{replaced}" + (f", called by {callers}" if callers else ""))
    for a in summary.get("addonCompatibilityDetails") or []:
        versions = ", ".join(a.get("compatibleVersions") or []) or "none listed"
        uses.append(f"add-on {a.get('name', '')} (versions for the target: {versions})")
    return tuple(uses)


def _error(exc: Exception) -> AwsError:
    """botocore's exception as `AwsError`, with AWS's code and status when AWS answered."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = str((response.get("Error") or {}).get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        return AwsError(str(exc), code=code, status=status)
    return AwsError(str(exc))


#: botocore's timeouts for every call: to connect, and to read the answer.
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0


@functools.cache
def _service_models() -> Any:
    """botocore's loader of its service models, kept for the process: it caches what it parsed."""
    from botocore.loaders import create_loader

    return create_loader()


def missing() -> str:
    """Why boto3 cannot be imported, for people ("" when it can): what `connect` refuses with."""
    # The extra is boto3: botocore comes with it.
    return not_importable("boto3", EXTRA_HINT, "boto3", "botocore.session")


def connect(provider: EksProvider, *, update_within: float | None = None) -> Eks:
    """boto3's clients for `provider`; `AwsUnavailable` when boto3 is not installed.

    `update_within`: the seconds an update call (the client that never retries) may take, connect
    and read together — the figure this replica's lease was checked against before the call
    (`bot.core.tenure`); by default botocore's own 5 s + 30 s."""
    reason = missing()
    if reason:
        raise AwsUnavailable(reason)
    import botocore.session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    config = Config(
        region_name=provider.region,
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        retries={"max_attempts": 3, "mode": "standard"},
    )
    # A session of its own (credentials and configuration read now), with the service models
    # parsed once per process: each session would read them again (ec2's alone is megabytes of
    # JSON), 0.6 s of CPU a connect, and a check connects each time.
    session = botocore.session.get_session()
    session.register_component("data_loader", _service_models())
    clients = tuple(
        session.create_client(service, endpoint_url=provider.endpoint_url, config=config)
        for service in ("eks", "ec2", "autoscaling")
    )
    once_config = Config(retries={"total_max_attempts": 1})
    if update_within is not None:
        # One attempt, so connect and read add up to the whole call.
        connect_s, read_s = call_timeouts(update_within, CONNECT_TIMEOUT, READ_TIMEOUT)
        once_config = once_config.merge(Config(connect_timeout=connect_s, read_timeout=read_s))
    once = session.create_client("eks", endpoint_url=provider.endpoint_url, config=config.merge(once_config))
    cloudformation = session.create_client(
        "cloudformation", endpoint_url=provider.endpoint_url, config=config
    )
    return Eks(
        provider,
        (clients[0], clients[1], clients[2]),
        (BotoCoreError, ClientError),
        once=once,
        cloudformation=cloudformation,
    )
