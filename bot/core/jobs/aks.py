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
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.common import JobCluster, bar, duration_arg, few, iso, label_value, list_nodes, timer_start
from bot.core.jobs.eks import api_version, elapsed_since, timeout_span, update_errors
from bot.core.jobs.waitgroup import group_counts
from bot.core.kube.objects import node_group
from bot.core.kube.versions import on_version, parse_version
from bot.core.providers import Operation, PoolStrategy, Provider, ProviderError
from bot.errors import ClusterError, TemporaryError, UserError, clip

Obj = dict[str, Any]
T = TypeVar("T")

CONTROL_PLANE_TIMEOUT = timedelta(hours=1)
NODEPOOL_TIMEOUT = timedelta(hours=2)
#: How long AKS's override lasts when people choose it (the plan's `override_for`).
OVERRIDE_FOR = timedelta(hours=1)
POLL_SECONDS = 10.0
#: ARM's subcode for the refusal over deprecated-API usage.
API_BLOCK = "UpgradeBlockedOnDeprecatedAPIUsage"
OVERRIDE, STOP = "override", "stop"
#: The gated choice after AKS refused the upgrade over deprecated-API usage.
BLOCKED = "api-block"
INTENT = "intent"
PUT_CLUSTER = "ManagedClusters_CreateOrUpdate"
PUT_POOL = "AgentPools_CreateOrUpdate"
#: "usage has been detected on API X, and was recently seen at: …" in AKS's refusal.
_USAGE = re.compile(r"usage has been detected on API (\S+?),")
#: `max_surge`: a count or a percentage, as AKS takes it.
_SURGE = re.compile(r"^(?:[1-9][0-9]{0,2}|[1-9][0-9]?%|100%)$")


def arm_call(what: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """An ARM call whose refusal (a 4xx other than 409 and 429) ends the job with ARM's reason;
    anything else (unreachable, 5xx, throttled, another operation running) is tried again later."""
    try:
        return fn(**kwargs)
    except ProviderError as exc:
        if 400 <= exc.status < 500 and exc.status not in (409, 429):
            raise UserError(
                f"AKS refused {what}: {exc.code + ': ' if exc.code else ''}{clip(str(exc), 300)}"
            ) from None
        raise TemporaryError(f"AKS did not answer {what}: {clip(str(exc), 200)}") from None


def version_arg(args: Mapping[str, str], *, required: bool) -> str:
    """`version`: a full Kubernetes version as AKS takes it (`1.26.6`; `v1.26.6` is read as it)."""
    text = str(args.get("version", "")).strip()
    if not text:
        if required:
            raise UserError("version: required (the Kubernetes version AKS offers, like 1.26.6)")
        return ""
    parsed = parse_version(text)
    if parsed is None or len(parsed) < 3:
        raise UserError(
            f"version: {clip(text, 20)!r} is not a Kubernetes version like 1.26.6 (AKS takes the patch)"
        )
    return ".".join(str(p) for p in parsed[:3])


def surge_arg(args: Mapping[str, str]) -> str:
    text = str(args.get("max_surge", "")).strip()
    if text and not _SURGE.match(text):
        raise UserError(f"max_surge: {clip(text, 20)!r} is not a node count or a percentage like 33%")
    return text


def _props(obj: Mapping[str, Any]) -> Obj:
    return dict(obj.get("properties") or {})


class _AksJob(abc.ABC):
    """What the AKS jobs share: the client, the intent rule, the operation's end."""

    kind = ""
    call = ""

    def __init__(self, aks: Callable[[str], Provider], node_group_labels: Sequence[str] = ()) -> None:
        self.aks = aks
        self.node_group_labels = tuple(node_group_labels)

    def client(self, cluster: Any) -> Provider:
        return self.aks(str(getattr(cluster, "name", "")))

    @abc.abstractmethod
    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        """The ARM resource this job upgrades, as it is now."""

    @abc.abstractmethod
    def _version_of(self, resource: Obj) -> str:
        """The Kubernetes version `resource` runs."""

    @abc.abstractmethod
    def _send(self, aks: Provider, progress: Progress) -> Operation:
        """The one PUT this job makes."""

    def _reached(self, aks: Provider, progress: Progress) -> bool:
        """Whether a PUT made before an interruption reached ARM: the resource is upgrading, or
        already on the target it was not on when the job began."""
        found = self._resource(aks, progress)
        props = _props(found)
        return props.get("provisioningState") == "Upgrading" or (
            self._version_of(found) == progress["target"] and progress["from"] != progress["target"]
        )

    def _start(self, aks: Provider, progress: Progress, *, now: datetime, what: str) -> Tick:
        """The intent rule of the module docstring: store, then send (or find) the PUT."""
        attempt = int(progress.get("attempt", 0))
        intent = progress.get(INTENT) or {}
        if intent.get("call") != self.call or int(intent.get("attempt", -1)) != attempt:
            new = {**progress, INTENT: {"call": self.call, "attempt": attempt, "at": iso(now)}}
            return Tick(progress=new, card=(f"{what}: calling {self.call}",), wait=0.0)
        if self._reached(aks, progress):
            new = {**progress, "operation": "", "following": "resource", "status": "InProgress"}
            text = f"{what}: {self.call} made before the interruption reached AKS (the resource is upgrading): following it, not called again"
            return Tick(
                progress=new,
                posts=(Post(key=f"found:{self.call}:{attempt}", text=text),),
                audit=((self.call, f"{progress['aks']} → {progress['target']}: found after an interruption, not called again"),),
                card=(text,),
                wait=POLL_SECONDS,
            )  # fmt: skip
        op = self._send(aks, progress)
        new = {
            **progress,
            "operation": op.id,
            "following": "operation" if op.id else "resource",
            "status": op.status,
        }
        text = f"{what}: AKS accepted {self.call}, operation {op.id or '(none: nothing to change)'} ({op.status})"
        return Tick(
            progress=new,
            posts=(Post(key=f"update-started:{self.call}:{attempt}", text=text),),
            audit=(
                (
                    self.call,
                    f"{progress['aks']} → {progress['target']}{self._extra(progress)}: operation {op.id}",
                ),
            ),
            card=(text,),
            wait=POLL_SECONDS,
        )

    def _extra(self, progress: Progress) -> str:
        return ""

    def _status(self, aks: Provider, progress: Progress, **which: str) -> Operation:
        """The operation the job follows, or the resource's state when it has no operation id."""
        if progress.get("operation"):
            return arm_call("the async operation", aks.operation, operation_id=progress["operation"], **which)
        found = self._resource(aks, progress)
        state = str(_props(found).get("provisioningState", ""))
        status = {
            "Upgrading": "InProgress",
            "Updating": "InProgress",
            "Failed": "Failed",
            "Canceled": "Cancelled",
        }.get(state, "Successful" if self._version_of(found) == progress["target"] else "InProgress")
        return Operation(id="", kind=self.call, status=status)

    def _timed_out(self, progress: Progress, now: datetime) -> bool:
        started = timer_start(progress, progress.get("started"), now)
        return now - started >= timedelta(seconds=float(progress["timeout"]))

    def _end(self, progress: Progress, text: str, *, ok: bool, key: str) -> Tick:
        return Tick(
            progress=progress,
            posts=(Post(key=key, text=text),),
            audit=((f"{self.kind} {'done' if ok else 'failed'}", text),),
            card=(text,),
            done=True,
            ok=ok,
            detail=text,
            wait=0.0,
        )

    def _op_name(self, progress: Progress) -> str:
        return (
            f"AKS operation {progress['operation']}"
            if progress.get("operation")
            else f"{progress['aks']}'s provisioningState"
        )

    def _following(self, aks: Provider, progress: Progress, **which: str) -> list[str]:
        op = self._status(aks, progress, **which)
        return [
            f"resumes following {self._op_name(progress)}, which this job started before it was interrupted: "
            f"no new {self.call} is made",
            f"now: {op.status}" + (f" — {update_errors(op.errors)}" if op.errors else ""),
        ]

    def _interrupted(self, progress: Progress) -> list[str]:
        intent = progress.get(INTENT) or {}
        if not intent or progress.get("operation") or progress.get("following"):
            return []
        return [
            f"its {intent.get('call')} may have reached AKS before the interruption: it first reads the resource "
            "(provisioningState, versions) and follows an upgrade it finds; it calls only if there is none"
        ]


class AksUpgradeControlPlaneJob(_AksJob):
    """`aks-upgrade-control-plane`: see the module docstring."""

    kind = "aks-upgrade-control-plane"
    call = PUT_CLUSTER

    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        return arm_call("ManagedClusters_Get", aks.control_plane)

    def _version_of(self, resource: Obj) -> str:
        props = _props(resource)
        return str(props.get("currentKubernetesVersion") or props.get("kubernetesVersion") or "")

    def _send(self, aks: Provider, progress: Progress) -> Operation:
        force = bool(progress.get("force"))
        try:
            return aks.update_control_plane(
                progress["target"], token="", force=force, until=str(progress.get("until") or "")
            )
        except ProviderError as exc:
            if exc.code == API_BLOCK and not force:
                raise _Blocked(str(exc)) from None
            return arm_call(PUT_CLUSTER, _raise, exc=exc)

    def _extra(self, progress: Progress) -> str:
        return f" (overrideSettings forceUpgrade until {progress['until']})" if progress.get("force") else ""

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        version = version_arg(args, required=True)
        timeout = duration_arg(args, "timeout", CONTROL_PLANE_TIMEOUT)
        override = duration_arg(args, "override_for", OVERRIDE_FOR)
        aks = self.client(cluster)
        found = arm_call("ManagedClusters_Get", aks.control_plane)
        return {
            "what": "control-plane",
            "aks": aks.name,
            "target": version,
            "from": self._version_of(found),
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "override_for": override.total_seconds(),
            "operation": "",
            "status": "",
            "seen": "",
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        aks = self.client(cluster)
        if progress.get("operation") or progress.get("following"):
            return [
                *self._following(aks, progress),
                f"API server /version now: {api_version(cluster) or '?'}",
            ]
        found = arm_call("ManagedClusters_Get", aks.control_plane)
        props = _props(found)
        versions = arm_call("ManagedClusters_GetUpgradeProfile", aks.versions)
        pools = ", ".join(
            f"{p.get('name', '?')} {p.get('orchestratorVersion', '?')}"
            for p in props.get("agentPoolProfiles") or []
        )
        lines = [
            *self._interrupted(progress),
            f"would call {PUT_CLUSTER} (PUT managedClusters/{progress['aks']}) with kubernetesVersion={progress['target']}, "
            f"every agent pool kept on its version (control plane only: {pools or 'none'})"
            + (
                f", upgradeSettings.overrideSettings forceUpgrade=true until {progress['until']} (chosen by two people)"
                if progress.get("force")
                else ""
            ),
            f"ManagedClusters_Get now: {self._version_of(found) or '?'}, provisioningState {props.get('provisioningState', '?')}; "
            f"the upgrade profile offers {', '.join(versions.offered) or 'nothing'}",
            f"then GET its async operation every {POLL_SECONDS:g} s until Succeeded and /version reports "
            f"{progress['target']} (up to {timeout_span(progress)})",
        ]
        if (
            versions.offered
            and progress["target"] not in versions.offered
            and progress["from"] != progress["target"]
        ):
            lines.insert(
                1,
                f"AKS does not offer {progress['target']} from {versions.current}: it would refuse the upgrade",
            )
        exclusions = arm_call("MaintenanceConfigurations_ListByManagedCluster", aks.maintenance).exclusions
        if exclusions:
            lines.append(
                "planned maintenance: not-allowed spans "
                + few([f"{e.name} {e.start}…{e.end}" for e in exclusions], 3)
                + " (they hold AKS's own upgrades, not this one)"
            )
        return lines

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        aks = self.client(cluster)
        target = progress["target"]
        what = f"control plane {progress['from']} → {target}"
        if decision is not None and decision.choice_key.startswith(f"{BLOCKED}:"):
            return self._decided(progress, decision, what, now=now)
        if not progress.get("operation") and not progress.get("following"):
            if progress["from"] == target:
                text = f"the control plane is already on {target}: nothing to upgrade"
                return Tick(progress=progress, card=(text,), done=True, ok=True, detail=text, wait=0.0)
            try:
                return self._start(aks, progress, now=now, what=what)
            except _Blocked as blocked:
                return self._blocked(progress, blocked.reason, what)
        op = self._status(aks, progress)
        try:
            seen = api_version(cluster)
        except ClusterError as exc:
            seen = f"(no answer: {clip(exc.user_message, 80)})"
        new = {**progress, "status": op.status, "seen": seen}
        if op.status in ("Failed", "Cancelled"):
            text = f"{what}: {self._op_name(progress)} {op.status} — {update_errors(op.errors)}"
            return self._end(
                new, text, ok=False, key=f"update-failed:{progress.get('operation') or 'resource'}"
            )
        if op.status == "Successful" and on_version(seen, parse_version(target)):
            text = f"{what}: {self._op_name(progress)} Succeeded and the API server reports {seen}"
            return self._end(new, text, ok=True, key=f"update-done:{progress.get('operation') or 'resource'}")
        if self._timed_out(progress, now):
            text = (
                f"{what}: {self._op_name(progress)} still {op.status} after {timeout_span(progress)}; the upgrade goes "
                "on at AKS (az aks show) — the step stops here"
            )
            return self._end(new, text, ok=False, key=f"timeout:{progress.get('operation') or 'resource'}")
        elapsed = elapsed_since(now, progress["started"])
        card = (
            f"{what}: {self._op_name(progress)} {op.status}" + (f", {elapsed} so far" if elapsed else ""),
            f"API server /version: {seen or '?'}",
        )
        return Tick(progress=new, card=card, wait=POLL_SECONDS)

    def _blocked(self, progress: Progress, reason: str, what: str) -> Tick:
        """AKS refused the upgrade over deprecated-API usage: name the APIs and ask people."""
        apis = _USAGE.findall(reason)
        names = few(apis, 5) or "none named"
        n = int(progress.get("refused", 0)) + 1
        span = timedelta(seconds=float(progress.get("override_for") or OVERRIDE_FOR.total_seconds()))
        from bot.core.durations import format_duration

        text = f"{what}: AKS refused {PUT_CLUSTER} ({API_BLOCK}): deprecated APIs used in the last 12 hours that {progress['target']} removes: {names}"
        choice = Choice(
            key=f"{BLOCKED}:{progress['target']}:{n}",
            question=(
                f"{what}: AKS refused the upgrade over recent use of APIs {progress['target']} removes: {names}. "
                f"Override? The bot then sets upgradeSettings.overrideSettings forceUpgrade=true, expiring "
                f"{format_duration(span)} after it is confirmed, and AKS upgrades past the block: those API calls "
                "fail once the upgrade is done. One person asks with a reason; a second person confirms with theirs."
            ),
            options=(
                ChoiceOption(id=OVERRIDE, label=f"Override for {format_duration(span)}…", needs_reason=True),
                ChoiceOption(
                    id=STOP, label="Stop (fail the step)", roles=("primary", "shadow", "coordinator")
                ),
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

    def _decided(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick:
        """Stop; or one person asked for the override and a second must confirm; or the second
        confirmed: the override's expiry is fixed now, and the next tick stores the new intent."""
        target = progress["target"]
        if decision.option != OVERRIDE:
            text = f"{str(progress.get('blocked') or what).rstrip('.')}; stopped by {decision.by}, not overridden"
            return Tick(
                progress=progress, audit=((f"{self.kind} stopped", text),), card=(text,),
                done=True, ok=False, detail=text, wait=0.0,
            )  # fmt: skip
        asked = progress.get("override_asked") or {}
        names = few(list(progress.get("apis") or []), 5) or "none named"
        n = progress.get("refused", 1)
        if not decision.choice_key.endswith(":confirm") or not asked or asked.get("by") == decision.by:
            asked = {"by": decision.by, "reason": decision.reason or "no reason given"}
            text = (
                f"{what}: {decision.by} asks to override AKS's deprecated-API block ({names}): {asked['reason']}. "
                "A second person confirms, or stops."
            )
            choice = Choice(
                key=f"{BLOCKED}:{target}:{n}:confirm",
                question=text,
                options=(
                    ChoiceOption(
                        id=OVERRIDE, label="Confirm the override", needs_reason=True, not_by=(decision.by,)
                    ),
                    ChoiceOption(
                        id=STOP, label="Stop (fail the step)", roles=("primary", "shadow", "coordinator")
                    ),
                ),
            )
            return Tick(
                progress={**progress, "override_asked": asked},
                posts=(Post(key=f"override-asked:{target}:{n}", text=text),),
                audit=(("override asked", text),),
                card=(text,),
                choice=choice,
                wait=POLL_SECONDS,
            )
        until = (
            now + timedelta(seconds=float(progress.get("override_for") or OVERRIDE_FOR.total_seconds()))
        ).strftime("%Y-%m-%dT%H:%M:%SZ")
        text = (
            f"{what}: override of AKS's deprecated-API block ({names}) until {until}, asked by {asked['by']} "
            f"({asked['reason']}) and confirmed by {decision.by} ({decision.reason or 'no reason given'})"
        )
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
        return Tick(
            progress=new,
            posts=(Post(key=f"override:{target}:{n}", text=text),),
            audit=(("override chosen", text),),
            card=(text,),
            wait=0.0,
        )


class _Blocked(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _raise(*, exc: Exception) -> Operation:
    raise exc


class AksUpgradeNodepoolJob(_AksJob):
    """`aks-upgrade-nodepool`: see the module docstring."""

    kind = "aks-upgrade-nodepool"
    call = PUT_POOL

    def _resource(self, aks: Provider, progress: Progress) -> Obj:
        return arm_call("AgentPools_Get", aks.node_pool, name=progress["nodepool"])

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

    def _nodes(self, cluster: JobCluster, pool: str) -> list[Obj]:
        return [
            n
            for n in list_nodes(cluster)
            if node_group((n.get("metadata") or {}).get("labels"), self.node_group_labels) == pool
        ]

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        pool = label_value("nodepool", str(args.get("nodepool", "")).strip())
        version = version_arg(args, required=False)
        surge = surge_arg(args)
        timeout = duration_arg(args, "timeout", NODEPOOL_TIMEOUT)
        aks = self.client(cluster)
        found = arm_call("AgentPools_Get", aks.node_pool, name=pool)
        target = version or self._cp_version(aks)
        own = str((_props(found).get("upgradeSettings") or {}).get("maxSurge") or "")
        return {
            "what": "nodepool",
            "aks": aks.name,
            "nodepool": pool,
            "target": target,
            "from": self._version_of(found),
            "max_surge": surge,
            "surge": surge or own,
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "operation": "",
            "status": "",
            "seen": {},
        }

    @staticmethod
    def _cp_version(aks: Provider) -> str:
        props = _props(arm_call("ManagedClusters_Get", aks.control_plane))
        return str(props.get("currentKubernetesVersion") or props.get("kubernetesVersion") or "")

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        aks = self.client(cluster)
        pool = progress["nodepool"]
        counts = group_counts(self._nodes(cluster, pool), progress["target"])
        if progress.get("operation") or progress.get("following"):
            return [
                *self._following(aks, progress, node_pool=pool),
                f"its nodes now: {counts['total']}, of which {counts['on_target']} Ready on {progress['target']}",
            ]
        found = arm_call("AgentPools_Get", aks.node_pool, name=pool)
        props = _props(found)
        own = str((props.get("upgradeSettings") or {}).get("maxSurge") or "AKS's default (10%)")
        surge = progress["max_surge"] or own
        return [
            *self._interrupted(progress),
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
            f"then GET its async operation every {POLL_SECONDS:g} s while AKS surges and drains (up to {timeout_span(progress)})",
        ]

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        aks = self.client(cluster)
        pool = progress["nodepool"]
        what = f"agent pool {pool} {progress['from']} → {progress['target']}"
        if not progress.get("operation") and not progress.get("following"):
            if progress["from"] == progress["target"]:
                text = f"agent pool {pool} is already on {progress['target']}: nothing to upgrade"
                return Tick(progress=progress, card=(text,), done=True, ok=True, detail=text, wait=0.0)
            return self._start(aks, progress, now=now, what=what)
        op = self._status(aks, progress, node_pool=pool)
        counts = group_counts(self._nodes(cluster, pool), progress["target"])
        new = {**progress, "status": op.status, "seen": counts}
        if op.status in ("Failed", "Cancelled"):
            text = f"{what}: {self._op_name(progress)} {op.status} — {update_errors(op.errors)}"
            return self._end(
                new, text, ok=False, key=f"update-failed:{progress.get('operation') or 'resource'}"
            )
        if op.status == "Successful":
            text = (
                f"{what}: {self._op_name(progress)} Succeeded — {counts['on_target']}/{counts['total']} node(s) "
                f"Ready on {progress['target']}"
            )
            return self._end(new, text, ok=True, key=f"update-done:{progress.get('operation') or 'resource'}")
        if self._timed_out(progress, now):
            text = (
                f"{what}: {self._op_name(progress)} still {op.status} after {timeout_span(progress)}; the upgrade goes on "
                "at AKS (az aks nodepool show) — the step stops here"
            )
            return self._end(new, text, ok=False, key=f"timeout:{progress.get('operation') or 'resource'}")
        elapsed = elapsed_since(now, progress["started"])
        card = (
            f"{what}: {self._op_name(progress)} {op.status}"
            + (f", {elapsed} so far" if elapsed else "")
            + f" · max surge {progress['surge'] or '?'}",
            bar(counts["on_target"], counts["total"], f"nodes Ready on {progress['target']}")
            + (f" · {counts['old']} old" if counts["old"] else ""),
        )
        return Tick(progress=new, card=card, wait=POLL_SECONDS)


# the registry's checks


def check_control_plane(args: Mapping[str, str]) -> None:
    version_arg(args, required=True)
    duration_arg(args, "timeout", CONTROL_PLANE_TIMEOUT)
    duration_arg(args, "override_for", OVERRIDE_FOR)


def check_nodepool(args: Mapping[str, str]) -> None:
    label_value("nodepool", str(args.get("nodepool", "")).strip())
    version_arg(args, required=False)
    surge_arg(args)
    duration_arg(args, "timeout", NODEPOOL_TIMEOUT)
