"""The gated AKS actions (issue 46): upgrade the control plane or an agent pool through ARM, and
follow the long-running operation to its end.

- `aks-upgrade-control-plane version=1.26.6`: PUT of the managed cluster with `kubernetesVersion`
  changed and every agent pool left on its version (the control plane only), then the async
  operation (`Azure-AsyncOperation`) until it Succeeded AND the API server's `/version` reports the
  target. When AKS refuses the upgrade over deprecated-API usage in the last 12 hours
  (`UpgradeBlockedOnDeprecatedAPIUsage`), the job names the APIs AKS named and asks people:
  override (AKS's `upgradeSettings.overrideSettings`: `forceUpgrade` until an expiry, the plan's
  `override_for`, 1h by default) — one person asks with a reason, a second confirms with theirs,
  both audited — or stop. It never sets the override by itself.
- `aks-upgrade-nodepool nodepool=NAME [version=…] [max_surge=33%]`: PUT of the agent pool with
  `orchestratorVersion` (the control plane's when not given) and, when given, `maxSurge`; the gate
  shows the surge the pool upgrades with (its own, or the plan's), then the async operation while
  the pool's nodes are counted as they roll.

Never a call twice: before the PUT a tick stores the call's *intent*, and only the next tick
sends it; the tick that sent it stores the operation's id. ARM takes no idempotency token and
lists no operations, so a tick that finds an intent without an operation (a kill -9 between the
PUT and storing its answer) first reads the resource: `provisioningState: Upgrading`, or already
on the target, means the PUT reached ARM — the job follows the resource (its provisioningState and
versions) and never PUTs again. The update calls go through a client that retries nothing.

The Azure side comes through the provider port (`bot.core.providers`): the cluster's
`provider: {aks: …}` and the `aks` extra; without either, the action refuses with a short reason.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.core.durations import format_duration
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.cloud import (
    POLL_SECONDS,
    STOP_OPTION,
    OperationJob,
    ReadinessBlock,
    budgets_line,
    cloud_call,
    coded_reason,
    covering,
    pool_bar,
    started_at,
    timeout_span,
)
from bot.core.jobs.common import JobCluster, duration_arg, few, iso, label_value
from bot.core.jobs.waitgroup import group_counts
from bot.core.providers import Operation, PoolStrategy, Provider, ProviderError, said_span, said_time
from bot.errors import UserError, clip

Obj = dict[str, Any]
T = TypeVar("T")

CONTROL_PLANE_TIMEOUT = timedelta(hours=1)
NODEPOOL_TIMEOUT = timedelta(hours=2)
#: How long AKS's override lasts when people choose it (the plan's `override_for`).
OVERRIDE_FOR = timedelta(hours=1)
#: ARM's subcode for the refusal over deprecated-API usage.
API_BLOCK = "UpgradeBlockedOnDeprecatedAPIUsage"
OVERRIDE = "override"
#: The gated choice after AKS refused the upgrade over deprecated-API usage.
BLOCKED = "api-block"
PUT_CLUSTER = "ManagedClusters_CreateOrUpdate"
PUT_POOL = "AgentPools_CreateOrUpdate"
#: "usage has been detected on API X, and was recently seen at: …" in AKS's refusal.
_USAGE = re.compile(r"usage has been detected on API (\S+?),")
#: A Kubernetes version as AKS takes it (`kubernetesVersion`, `orchestratorVersion`): `1.26.6`.
_AKS_VERSION = re.compile(r"^v?\d{1,3}\.\d{1,3}\.\d{1,3}$")
#: `max_surge`: a count or a percentage, as AKS takes it.
_SURGE = re.compile(r"^(?:[1-9][0-9]{0,2}|[1-9][0-9]?%|100%)$")
#: ARM's provisioningState of a resource as an operation's status (else: its version says).
_STATES = {"Upgrading": "InProgress", "Updating": "InProgress", "Failed": "Failed", "Canceled": "Cancelled"}


def arm_call(what: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """An ARM call whose refusal (a 4xx other than 409 and 429) ends the job with ARM's reason;
    anything else (unreachable, 5xx, throttled, another operation running) is tried again later."""
    return cloud_call("AKS", what, lambda: fn(**kwargs), refused=_refused, reason=coded_reason)


def _refused(exc: ProviderError) -> bool:
    return 400 <= exc.status < 500 and exc.status not in (409, 429)


def version_arg(args: Mapping[str, str], *, required: bool) -> str:
    """`version`: a full Kubernetes version as AKS takes it (`1.26.6`; `v1.26.6` is read as it).
    Anything else is refused, never trimmed to one: a `1.26.6-gke.100` is another cloud's build,
    most likely a plan written for another cluster."""
    text = str(args.get("version", "")).strip()
    if not text:
        if required:
            raise UserError("version: required (the Kubernetes version AKS offers, like 1.26.6)")
        return ""
    if not _AKS_VERSION.match(text):
        raise UserError(
            f"version: {clip(text, 30)!r} is not a version AKS takes: major.minor.patch, like 1.26.6"
        )
    return text.removeprefix("v")


def surge_arg(args: Mapping[str, str]) -> str:
    text = str(args.get("max_surge", "")).strip()
    if text and not _SURGE.match(text):
        raise UserError(f"max_surge: {clip(text, 20)!r} is not a node count or a percentage like 33%")
    return text


def _props(obj: Mapping[str, Any]) -> Obj:
    return dict(obj.get("properties") or {})


def _cluster_version(props: Mapping[str, Any]) -> str:
    return str(props.get("currentKubernetesVersion") or props.get("kubernetesVersion") or "")


class _AksJob(OperationJob):
    """What the AKS jobs share: ARM's calls, and the resource as the sign a PUT reached ARM (ARM
    lists no operations)."""

    cloud = "AKS"
    status_call = "the async operation"
    resource_word = "provisioningState"
    done_word = "Succeeded"
    looks_first = (
        "it first reads the resource (provisioningState, versions) and follows an upgrade it finds; "
        "it calls only if there is none"
    )

    def _api(self, what: str, fn: Callable[..., T], **kwargs: Any) -> T:
        return arm_call(what, fn, **kwargs)

    @abc.abstractmethod
    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        """The ARM resource this job upgrades, as it is now."""

    @abc.abstractmethod
    def _version_of(self, resource: Obj) -> str:
        """The Kubernetes version `resource` runs."""

    def _found(self, aks: Provider, progress: Progress) -> tuple[str, str] | None:
        """A PUT made before an interruption reached ARM when the resource is upgrading, or
        already on the target it was not on when the job began."""
        found = self._resource(aks, progress)
        reached = _props(found).get("provisioningState") == "Upgrading" or (
            self._version_of(found) == progress["target"] and progress["from"] != progress["target"]
        )
        return ("", "the resource is upgrading") if reached else None

    def _resource_status(self, aks: Provider, progress: Progress) -> str:
        found = self._resource(aks, progress)
        on_target = self._version_of(found) == progress["target"]
        return _STATES.get(
            str(_props(found).get("provisioningState", "")), "Successful" if on_target else "InProgress"
        )


class AksUpgradeControlPlaneJob(_AksJob):
    """`aks-upgrade-control-plane`: see the module docstring."""

    kind = "aks-upgrade-control-plane"
    call = PUT_CLUSTER
    console = "az aks show"

    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        return arm_call("ManagedClusters_Get", aks.control_plane)

    def _version_of(self, resource: Obj) -> str:
        return _cluster_version(_props(resource))

    def _send(self, aks: Provider, progress: Progress) -> Operation:
        force = bool(progress.get("force"))
        try:
            return aks.update_control_plane(
                progress["target"], token="", force=force, until=str(progress.get("until") or "")
            )
        except ProviderError as exc:
            if exc.code == API_BLOCK and not force:
                raise ReadinessBlock(str(exc)) from None
            return arm_call(PUT_CLUSTER, _raise, exc=exc)

    def _extra(self, progress: Progress) -> str:
        return (
            f" (overrideSettings forceUpgrade until {said_time(progress['until'])})"
            if progress.get("force")
            else ""
        )

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        version, timeout, override = _control_plane_args(args)
        aks = self.client(cluster)
        found = arm_call("ManagedClusters_Get", aks.control_plane)
        return self._begin(
            aks, what="control-plane", target=version, was=self._version_of(found), timeout=timeout, now=now,
            override_for=override.total_seconds(),
        )  # fmt: skip

    def _gate(self, cluster: JobCluster, aks: Provider, progress: Progress) -> list[str]:
        found = arm_call("ManagedClusters_Get", aks.control_plane)
        props = _props(found)
        versions = arm_call("ManagedClusters_GetUpgradeProfile", aks.versions)
        pools = ", ".join(
            f"{p.get('name', '?')} {p.get('orchestratorVersion', '?')}"
            for p in props.get("agentPoolProfiles") or []
        )
        lines = [
            f"would call {PUT_CLUSTER} (PUT managedClusters/{progress['aks']}) with kubernetesVersion={progress['target']}, "
            f"every agent pool kept on its version (control plane only: {pools or 'none'})"
            + (
                f", upgradeSettings.overrideSettings forceUpgrade=true until {said_time(progress['until'])} (chosen by two people)"
                if progress.get("force")
                else ""
            ),
            f"ManagedClusters_Get now: {self._version_of(found) or '?'}, provisioningState {props.get('provisioningState', '?')}; "
            f"the upgrade profile offers {', '.join(versions.offered) or 'nothing'}",
            f"then GET its async operation every {POLL_SECONDS:g} s until Succeeded and /version reports "
            f"{progress['target']} (up to {timeout_span(progress)})",
        ]
        lines[1:1] = self._not_offered(progress, versions)
        exclusions = arm_call("MaintenanceConfigurations_ListByManagedCluster", aks.maintenance).exclusions
        held = covering(exclusions, started_at(progress))
        lines += [
            f":warning: planned maintenance: not-allowed span {e.name} ({said_span(e.start, e.end)}) is in force now: the "
            "team's freeze — AKS lets this manual upgrade through it"
            for e in held
        ]
        later = [e for e in exclusions if e not in held]
        if later:
            lines.append(
                "planned maintenance: not-allowed spans "
                + few([f"{e.name} {said_span(e.start, e.end)}" for e in later], 3)
                + " (they hold AKS's own upgrades, not this one)"
            )
        return lines

    def _start(self, aks: Provider, progress: Progress, *, now: datetime, what: str) -> Tick:
        try:
            return super()._start(aks, progress, now=now, what=what)
        except ReadinessBlock as blocked:
            return self._blocked(progress, blocked.reason, what)

    def _blocked(self, progress: Progress, reason: str, what: str) -> Tick:
        """AKS refused the upgrade over deprecated-API usage: name the APIs and ask people."""
        apis = _USAGE.findall(reason)
        names = few(apis, 5) or "none named"
        n = int(progress.get("refused", 0)) + 1
        span = format_duration(_override_for(progress))
        text = f"{what}: AKS refused {PUT_CLUSTER} ({API_BLOCK}): deprecated APIs used in the last 12 hours that {progress['target']} removes: {names}"
        choice = Choice(
            key=f"{BLOCKED}:{progress['target']}:{n}",
            question=(
                f"{what}: AKS refused the upgrade over recent use of APIs {progress['target']} removes: {names}. "
                f"Override? The bot then sets upgradeSettings.overrideSettings forceUpgrade=true, expiring "
                f"{span} after it is confirmed, and AKS upgrades past the block: those API calls "
                "fail once the upgrade is done. One person asks with a reason; a second person confirms with theirs."
            ),
            options=(
                ChoiceOption(id=OVERRIDE, label=f"Override for {span}…", needs_reason=True),
                STOP_OPTION,
            ),
        )
        return Tick(
            progress={**progress, "refused": n, "apis": apis, "blocked": text},
            posts=(Post(key=f"api-block:{progress['target']}:{n}", text=text),),
            audit=((f"{PUT_CLUSTER} refused", text),),
            card=(text, "waiting for people: override with an expiry (two people) or stop (see the thread)"),
            choice=choice,
            wait=POLL_SECONDS,
        )

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """The answer to the API block's question: stop; or one person asked for the override and
        a second must confirm; or the second confirmed: the override's expiry is fixed now, and the
        next tick stores the new intent."""
        if not decision.choice_key.startswith(f"{BLOCKED}:"):
            return None
        target = progress["target"]
        names = few(list(progress.get("apis") or []), 5) or "none named"
        n = progress.get("refused", 1)
        question = self._second_person(
            progress, decision, what=what, yes=OVERRIDE, not_done="not overridden", asked_key="override_asked",
            asks=f"override AKS's deprecated-API block ({names})", confirm="Confirm the override",
            key=f"{BLOCKED}:{target}:{n}", post=f"override-asked:{target}:{n}",
        )  # fmt: skip
        if question is not None:
            return question
        until = (now + _override_for(progress)).strftime("%Y-%m-%dT%H:%M:%SZ")
        new = {
            **progress,
            "force": True,
            "until": until,
            "attempt": int(progress.get("attempt", 0)) + 1,
            "operation": "",
            "following": "",
            "status": "",
            "started": iso(now),
        }
        return self._confirmed(
            progress, decision, asked_key="override_asked", new=new, key=f"override:{target}:{n}",
            chosen=f"{what}: override of AKS's deprecated-API block ({names}) until {said_time(until)}",
            said="override chosen",
        )  # fmt: skip


def _override_for(progress: Progress) -> timedelta:
    return timedelta(seconds=float(progress.get("override_for") or OVERRIDE_FOR.total_seconds()))


def _raise(*, exc: Exception) -> Operation:
    raise exc


class AksUpgradeNodepoolJob(_AksJob):
    """`aks-upgrade-nodepool`: see the module docstring."""

    kind = "aks-upgrade-nodepool"
    call = PUT_POOL
    console = "az aks nodepool show"
    pool_word = "agent pool"
    get_pool_call = "AgentPools_Get"
    list_pools_call = "AgentPools_List"

    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        return self._pool_named(aks, progress["nodepool"])

    def _version_of(self, resource: Obj) -> str:
        props = _props(resource)
        return str(props.get("currentOrchestratorVersion") or props.get("orchestratorVersion") or "")

    def _send(self, aks: Provider, progress: Progress) -> Operation:
        return arm_call(
            PUT_POOL,
            aks.update_node_pool,
            pool=progress["nodepool"],
            version=progress["target"],
            strategy=PoolStrategy(kind="surge", max_surge=progress["max_surge"]),
            token="",
        )

    def _extra(self, progress: Progress) -> str:
        return f" maxSurge={progress['surge'] or '?'}"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        pool, version, surge, timeout = _nodepool_args(args)
        aks = self.client(cluster)
        found = self._pool_named(aks, pool)
        target = version or _cluster_version(_props(arm_call("ManagedClusters_Get", aks.control_plane)))
        own = str((_props(found).get("upgradeSettings") or {}).get("maxSurge") or "")
        return self._begin(
            aks, what="nodepool", target=target, was=self._version_of(found), timeout=timeout, now=now,
            nodepool=pool, max_surge=surge, surge=surge or own,
        )  # fmt: skip

    def _gate(self, cluster: JobCluster, aks: Provider, progress: Progress) -> list[str]:
        pool = progress["nodepool"]
        nodes = self._nodes(cluster, pool)
        counts = group_counts(nodes, progress["target"])
        found = self._pool_named(aks, pool)
        props = _props(found)
        own = str((props.get("upgradeSettings") or {}).get("maxSurge") or "AKS's default (10%)")
        surge = progress["max_surge"] or own
        return [
            f"would call {PUT_POOL} (PUT agentPools/{pool}) with orchestratorVersion={progress['target']}"
            + (f", upgradeSettings.maxSurge={progress['max_surge']}" if progress["max_surge"] else ""),
            f"max surge {surge}"
            + (
                " (set by the plan; the pool's own is " + own + ")"
                if progress["max_surge"]
                else " (the pool's own)"
            )
            + ": AKS adds that many new nodes at a time, then drains and removes as many old ones",
            f"AgentPools_Get now: {self._version_of(found) or '?'}, provisioningState {props.get('provisioningState', '?')}, "
            f"{props.get('count', '?')} node(s); its nodes now: {counts['total']}, {counts['on_target']} Ready on {progress['target']}",
            *budgets_line(
                cluster,
                nodes,
                "AKS's drain waits on them until its drain timeout (30 minutes by default), then fails the "
                "upgrade (PodEvictionFailure) with the pool half upgraded: free them first",
            ),
            f"then GET its async operation every {POLL_SECONDS:g} s while AKS surges and drains (up to {timeout_span(progress)})",
        ]

    def _follow(
        self, cluster: JobCluster, aks: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        op, counts, new, done = self._pool_read(cluster, aks, progress)
        ended = self._settled(progress, new, op, what, done=done) or self._gave_up(
            progress, new, op, what, now
        )
        if ended is not None:
            return ended
        card = (
            self._head(progress, op, what, now) + f" · max surge {progress['surge'] or '?'}",
            pool_bar(counts, progress["target"]),
        )
        return Tick(progress=new, card=card, wait=POLL_SECONDS)


# the registry's checks


def _control_plane_args(args: Mapping[str, str]) -> tuple[str, timedelta, timedelta]:
    """`aks-upgrade-control-plane`'s arguments, checked: (version, timeout, override_for)."""
    return (
        version_arg(args, required=True),
        duration_arg(args, "timeout", CONTROL_PLANE_TIMEOUT),
        duration_arg(args, "override_for", OVERRIDE_FOR),
    )


def _nodepool_args(args: Mapping[str, str]) -> tuple[str, str, str, timedelta]:
    """`aks-upgrade-nodepool`'s arguments, checked: (nodepool, version, max_surge, timeout)."""
    return (
        label_value("nodepool", str(args.get("nodepool", "")).strip()),
        version_arg(args, required=False),
        surge_arg(args),
        duration_arg(args, "timeout", NODEPOOL_TIMEOUT),
    )


def check_control_plane(args: Mapping[str, str]) -> None:
    _control_plane_args(args)


def check_nodepool(args: Mapping[str, str]) -> None:
    _nodepool_args(args)
