"""The gated GKE actions (issue 46): upgrade the master or a node pool through GKE's API, and
follow the long-running operation to its end.

- `gke-update-master version=1.30.4-gke.1348000`: `update_master`, then `get_operation` until it
  is DONE and the API server's `/version` reports the target. The gate shows the exact call, the
  versions `get_server_config` offers, and any maintenance exclusion in force (the team's freeze:
  the check's GKE002 is Required while one covers the window).
- `gke-update-nodepool nodepool=NAME [version=…] [strategy=surge|blue-green] [max_surge=1]
  [max_unavailable=0] [soak=10m]`: `update_node_pool` with `nodeVersion` (the master's when not
  given) and the pool's upgrade settings — its own, or the plan's. The gate shows them: surge
  (`max_surge` new nodes at a time, at most `max_unavailable` old ones down) or blue-green (a
  green pool, the blue one cordoned, drained and kept for the soak). When a blue-green upgrade
  reaches its soak, the job reads the soak's evidence (the pool's nodes Ready on the target, its
  pods Ready) and asks people: let the soak finish (GKE then deletes the blue pool), or roll back
  (`rollback_node_pool_upgrade`: the blue pool back, the green one removed), with a reason. The
  pods drained off the blue pool may still be starting on the green one when the soak begins: a
  failing evidence is read again at each poll, and people are asked as soon as it holds, or with
  what still fails once the green pool has had its time to settle (`SETTLE`, at most a quarter of
  the soak). A failed evidence says so in the question; the job never rolls back by itself.

Never a call twice: before each update call (the update, and a rollback) a tick stores the
call's *intent*, and only the next tick sends it; the tick that sent it stores the operation's
name. GKE takes no idempotency token, so a tick that finds an intent without an operation (a
kill -9 between the call and storing its answer) first lists the cluster's running operations
(`list_operations`) and reads the versions: an operation on the target, or the target already
reached, means the call reached GKE — the job follows it and never calls again.

The Google side comes through the provider port (`bot.core.providers`): the cluster's
`provider: {gke: …}` and the `gke` extra; without either, the action refuses with a short reason.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.cloud import (
    POLL_SECONDS,
    OperationJob,
    budgets_line,
    cloud_call,
    coded_reason,
    covering,
    pool_bar,
    started_at,
    timeout_span,
    update_errors,
)
from bot.core.jobs.common import JobCluster, duration_arg, few, iso, label_value, unschedulable
from bot.core.jobs.waitgroup import group_counts
from bot.core.kube.objects import parse_iso
from bot.core.providers import Operation, PoolStrategy, Provider, ProviderError, said_time
from bot.errors import UserError, clip

Obj = dict[str, Any]
T = TypeVar("T")

MASTER_TIMEOUT = timedelta(hours=1)
NODEPOOL_TIMEOUT = timedelta(hours=3)
#: A blue-green upgrade's soak when neither the pool nor the plan names one (GKE's default).
SOAK = timedelta(hours=1)
#: How long a soak's failing evidence is read again before people are asked with it (at most a
#: quarter of the soak): the pods drained off the blue pool start on the green one meanwhile.
SETTLE = timedelta(minutes=5)
UPDATE_MASTER = "UpdateMaster"
UPDATE_POOL = "UpdateNodePool"
ROLLBACK = "RollbackNodePoolUpgrade"
#: The gated choice at a blue-green upgrade's soak.
SOAKING = "soak"
KEEP, ROLL_BACK = "keep", "rollback"
STRATEGIES = ("surge", "blue-green")
#: A GKE version: `1.30`, `1.30.4`, or `1.30.4-gke.1348000`.
_GKE_VERSION = re.compile(r"^\d{1,3}\.\d{1,3}(?:\.\d{1,3}(?:-gke\.\d{1,12})?)?$")


def gke_call(what: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """A GKE call whose refusal (a 4xx other than 429, or FAILED_PRECONDITION over another
    operation) ends the job with GKE's reason; anything else is tried again later."""
    return cloud_call("GKE", what, lambda: fn(**kwargs), refused=_refused, reason=coded_reason)


def _refused(exc: ProviderError) -> bool:
    busy = exc.code == "FAILED_PRECONDITION" and "incompatible operation" in str(exc)
    return 400 <= exc.status < 500 and exc.status != 429 and not busy


def version_arg(args: Mapping[str, str], *, required: bool) -> str:
    """`version`: a version as GKE takes it (`1.30.4-gke.1348000`, or `1.30.4`, `1.30`)."""
    text = str(args.get("version", "")).strip().removeprefix("v")
    if not text:
        if required:
            raise UserError("version: required (a version get_server_config offers, like 1.30.4-gke.1348000)")
        return ""
    if not _GKE_VERSION.match(text):
        raise UserError(f"version: {clip(text, 30)!r} is not a GKE version like 1.30.4-gke.1348000")
    return text


def _count_arg(args: Mapping[str, str], key: str) -> str:
    text = str(args.get(key, "")).strip()
    if text and not (text.isdigit() and len(text) <= 3):
        raise UserError(f"{key}: {clip(text, 20)!r} is not a node count (0–999)")
    return text


def strategy_arg(args: Mapping[str, str]) -> str:
    text = str(args.get("strategy", "")).strip()
    if text and text not in STRATEGIES:
        raise UserError(f"strategy: {clip(text, 20)!r} is not one of {', '.join(STRATEGIES)}")
    return text


class _GkeJob(OperationJob):
    """What the GKE jobs share: GKE's calls, its running operations as the sign a call reached
    GKE, and the maintenance exclusions the gate shows."""

    cloud = "GKE"
    status_call = "GetOperation"
    resource_word = "version"
    console = "gcloud container operations describe"
    looks_first = (
        "it first lists the running operations and reads the versions, and follows what it finds; "
        "it calls only if there is none"
    )

    def _api(self, what: str, fn: Callable[..., T], **kwargs: Any) -> T:
        return gke_call(what, fn, **kwargs)

    @abc.abstractmethod
    def _version_now(self, gke: Provider, progress: Progress) -> str:
        """The version the master or the pool is at now, as GKE says."""

    def _found(self, gke: Provider, progress: Progress) -> tuple[str, str] | None:
        """The operation a call made before an interruption started (the newest running one), or
        none to follow but the resource when the target is already reached."""
        running = gke_call("ListOperations", gke.operations, node_pool=self._pool(progress))
        if running:
            return running[0], f"operation {running[0]}"
        if self._version_now(gke, progress) == progress["target"] and progress["from"] != progress["target"]:
            return "", "the target is reached"
        return None

    def _resource_status(self, gke: Provider, progress: Progress) -> str:
        return "Successful" if self._version_now(gke, progress) == progress["target"] else "InProgress"

    def _exclusions(self, gke: Provider, now: datetime) -> list[str]:
        policy = gke_call("GetCluster", gke.maintenance)
        return [
            f":warning: maintenance exclusion {e.name} ({e.scope}) is in force until {said_time(e.end)}: the team's freeze — "
            "GKE lets a manual upgrade through it, the check's GKE002 does not"
            for e in covering(policy.exclusions, now)
        ]


class GkeUpdateMasterJob(_GkeJob):
    """`gke-update-master`: see the module docstring."""

    kind = "gke-update-master"
    call = UPDATE_MASTER
    control_plane_word = "the master"

    def _version_now(self, gke: Provider, progress: Progress) -> str:
        return str(gke_call("GetCluster", gke.control_plane).get("currentMasterVersion", ""))

    def _send(self, gke: Provider, progress: Progress) -> Operation:
        return gke_call(UPDATE_MASTER, gke.update_control_plane, version=progress["target"], token="")

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        version, timeout = _master_args(args)
        gke = self.client(cluster)
        found = gke_call("GetCluster", gke.control_plane)
        was = str(found.get("currentMasterVersion", ""))
        return self._begin(gke, what="master", target=version, was=was, timeout=timeout, now=now)

    def _gate(self, cluster: JobCluster, gke: Provider, progress: Progress) -> list[str]:
        versions = gke_call("GetServerConfig", gke.versions)
        provider = getattr(gke, "provider", None)
        where = (
            f"projects/{provider.project}/locations/{provider.location}/clusters/{progress['gke']}"
            if provider is not None and hasattr(provider, "project")
            else f"clusters/{progress['gke']}"
        )
        lines = [
            f"would call {UPDATE_MASTER} (POST {where}:updateMaster) with masterVersion={progress['target']} "
            "(the master only: the node pools stay on their versions)",
            f"GetCluster now: {versions.current or '?'}; get_server_config offers {few(list(versions.offered), 4) or 'nothing newer'}"
            + (f" (default {versions.default})" if versions.default else ""),
            f"then GetOperation every {POLL_SECONDS:g} s until DONE and /version reports {progress['target']} "
            f"(up to {timeout_span(progress)})",
        ]
        lines[1:1] = self._not_offered(progress, versions)
        return lines + self._exclusions(gke, started_at(progress))


class GkeUpdateNodepoolJob(_GkeJob):
    """`gke-update-nodepool`: see the module docstring."""

    kind = "gke-update-nodepool"
    call = UPDATE_POOL
    get_pool_call = "GetNodePool"
    list_pools_call = "ListNodePools"

    def _version_now(self, gke: Provider, progress: Progress) -> str:
        return str(self._pool_named(gke, progress["nodepool"]).get("version", ""))

    def _strategy(self, progress: Progress) -> PoolStrategy:
        if progress["strategy"] == "blue-green":
            return PoolStrategy(kind="replace", soak_seconds=float(progress["soak"]))
        return PoolStrategy(
            kind="surge", max_surge=progress["max_surge"], max_unavailable=progress["max_unavailable"]
        )

    def _send(self, gke: Provider, progress: Progress) -> Operation:
        return gke_call(
            UPDATE_POOL,
            gke.update_node_pool,
            pool=progress["nodepool"],
            version=progress["target"],
            strategy=self._strategy(progress),
            token="",
        )

    def _extra(self, progress: Progress) -> str:
        return f" ({_settings_text(progress)})"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        pool, version, strategy, surge, unavailable, soak, timeout = _nodepool_args(args)
        gke = self.client(cluster)
        found = self._pool_named(gke, pool)
        own = found.get("upgradeSettings") or {}
        own_strategy = "blue-green" if own.get("strategy") == "BLUE_GREEN" else "surge"
        own_soak = _seconds((own.get("blueGreenSettings") or {}).get("nodePoolSoakDuration"))
        target = version or str(gke_call("GetCluster", gke.control_plane).get("currentMasterVersion", ""))
        chosen = strategy or own_strategy
        return self._begin(
            gke, what="nodepool", target=target, was=str(found.get("version", "")), timeout=timeout, now=now,
            nodepool=pool,
            strategy=chosen,
            by_plan=bool(strategy or surge or unavailable or soak),
            max_surge=surge or str(own.get("maxSurge", 1 if chosen == "surge" else "")),
            max_unavailable=unavailable or str(own.get("maxUnavailable", 0 if chosen == "surge" else "")),
            soak=soak.total_seconds() if soak is not None else own_soak or SOAK.total_seconds(),
        )  # fmt: skip

    def _gate(self, cluster: JobCluster, gke: Provider, progress: Progress) -> list[str]:
        pool = progress["nodepool"]
        nodes = self._nodes(cluster, pool)
        counts = group_counts(nodes, progress["target"])
        found = self._pool_named(gke, pool)
        whose = "set by the plan" if progress.get("by_plan") else "the pool's own"
        lines = [
            f"would call {UPDATE_POOL} (PUT …/clusters/{progress['gke']}/nodePools/{pool}) with "
            f"nodeVersion={progress['target']}, upgradeSettings {_settings_text(progress)}",
        ]
        if progress["strategy"] == "blue-green":
            lines.append(
                f"blue-green ({whose}): GKE creates a green pool of {counts['total']} node(s) on {progress['target']}, "
                f"cordons and drains the blue one, and keeps it for a soak of {_span(progress['soak'])}; at the soak "
                f"people choose to let it finish or to roll back ({ROLLBACK}: the blue pool back)"
            )
        else:
            lines.append(
                f"surge ({whose}): max_surge {progress['max_surge']}, max_unavailable {progress['max_unavailable']} — "
                f"GKE adds up to {progress['max_surge']} new node(s) at a time and takes at most "
                f"{progress['max_unavailable']} old one(s) down before their replacements are Ready"
            )
        lines += [
            f"GetNodePool now: {found.get('version', '?')}, {found.get('status', '?')}; its nodes now: {counts['total']}, "
            f"{counts['on_target']} Ready on {progress['target']}",
            *budgets_line(
                cluster,
                nodes,
                "GKE respects a budget for up to an hour a node, then evicts the pods anyway: free them "
                "first if they must not go down",
            ),
            f"then GetOperation every {POLL_SECONDS:g} s while GKE upgrades the pool (up to {timeout_span(progress)})",
            *self._exclusions(gke, started_at(progress)),
        ]
        return lines

    def _follow(
        self, cluster: JobCluster, gke: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        # A rollback is chosen at the soak, so only ever after the call: it is followed here.
        if progress.get("rollback"):
            return self._rolling_back(cluster, gke, progress, what, now=now)
        pool = progress["nodepool"]
        op, counts, new, done = self._pool_read(cluster, gke, progress)
        if progress["strategy"] == "blue-green" and not progress.get("soak_asked"):
            # The job was not following the operation through the whole soak (the bot was down):
            # GKE ended it on its own, and nobody was asked.
            done += "; its soak ended before the job read it (GKE deleted the blue pool), so nobody was asked to keep it or roll back"
        ended = self._settled(progress, new, op, what, done=done)
        if ended is not None:
            return ended
        phase = ""
        if progress["strategy"] == "blue-green":
            info = self._pool_named(gke, pool).get("updateInfo") or {}
            phase = str((info.get("blueGreenInfo") or {}).get("phase") or "")
            if phase == "NODE_POOL_SOAKING" and not progress.get("soak_asked"):
                return self._soak(cluster, new, counts, what, now=now)
        ended = self._gave_up(progress, new, op, what, now)
        if ended is not None:
            return ended
        card = (
            self._head(progress, op, what, now, phase=phase) + f" · {_settings_text(progress)}",
            pool_bar(counts, progress["target"]),
        )
        return Tick(progress=new, card=card, wait=POLL_SECONDS)

    def _evidence(self, cluster: JobCluster, pool: str, counts: Mapping[str, int]) -> list[str]:
        """What fails the soak's evidence: green nodes not Ready on the target, pods on the pool's
        nodes not Ready."""
        bad = []
        green = counts["total"] - counts["old"]
        if counts["on_target"] < green or green == 0:
            bad.append(f"{counts['on_target']}/{green} green node(s) Ready")
        unready = []
        pods = [
            pod
            for n in self._nodes(cluster, pool)
            if not unschedulable(n)
            for page in cluster.list_pages(
                "/api/v1/pods",
                {"fieldSelector": f"spec.nodeName={(n.get('metadata') or {}).get('name', '')}"},
            )
            for pod in page.items
        ]
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
            if conditions.get("Ready") != "True":
                meta = pod.get("metadata") or {}
                unready.append(f"{meta.get('namespace', '?')}/{meta.get('name', '?')}")
        if unready:
            bad.append(f"{len(unready)} pod(s) not Ready on the pool: {few(unready, 3)}")
        return bad

    def _soak(
        self, cluster: JobCluster, progress: Progress, counts: Mapping[str, int], what: str, *, now: datetime
    ) -> Tick:
        """The blue-green upgrade soaks: read the evidence, and ask people when it holds or when the
        green pool has had its time to settle (see the docstring)."""
        pool = progress["nodepool"]
        bad = self._evidence(cluster, pool, counts)
        soaking = (
            f"{what}: the green pool soaks for {_span(progress['soak'])} (the blue one is kept until then)"
        )
        seen = str(progress.get("soak_seen") or iso(now))
        ask_by = (parse_iso(seen) or now) + min(SETTLE, timedelta(seconds=float(progress["soak"]) / 4))
        if bad and now < ask_by:
            return Tick(
                progress={**progress, "soak_seen": seen},
                # Three short lines: the card clips each one at 200 characters, and what fails
                # must show whole.
                card=(
                    soaking,
                    f"the soak's evidence does not hold yet: {'; '.join(bad)}",
                    f"the green pool settles: read again every {POLL_SECONDS:g} s, people are asked when it "
                    f"holds, or at {ask_by:%H:%M:%S} UTC with what still fails",
                ),
                wait=POLL_SECONDS,
            )
        evidence = (
            f"the soak's evidence fails: {'; '.join(bad)}"
            if bad
            else f"the soak's evidence holds: {counts['on_target']} green node(s) Ready on {progress['target']}, the pool's pods Ready"
        )
        text = f"{soaking}; {evidence}"
        choice = Choice(
            key=f"{SOAKING}:{progress['target']}:{int(progress.get('attempt', 0))}",
            question=(
                f"{text}. Let the soak finish (GKE then deletes the blue pool), or roll back now "
                f"({ROLLBACK}: the blue nodes uncordoned, the green ones drained and removed) — with a reason."
            ),
            options=(
                ChoiceOption(
                    id=KEEP, label="Let the soak finish", roles=("primary", "shadow", "coordinator")
                ),
                ChoiceOption(id=ROLL_BACK, label="Roll back…", needs_reason=True),
            ),
        )
        return Tick(
            progress={**progress, "soak_asked": True, "evidence": bad},
            posts=(Post(key=f"soak:{pool}:{progress['target']}", text=text),),
            audit=(("soak", text),),
            card=(
                soaking,
                evidence,
                "waiting for people: let the soak finish, or roll back (see the thread)",
            ),
            choice=choice,
            wait=POLL_SECONDS,
        )

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """The answer to the soak's question: let it finish, or roll back (stored, then called)."""
        if not decision.choice_key.startswith(f"{SOAKING}:"):
            return None
        if decision.option != ROLL_BACK:
            text = f"{what}: {decision.by} lets the soak finish"
            return Tick(progress=progress, audit=(("soak kept", text),), card=(text,), wait=0.0)
        text = f"{what}: roll back asked by {decision.by} ({decision.reason or 'no reason given'})"
        new = {**progress, "rollback": {"by": decision.by, "reason": decision.reason, "operation": ""}}
        return Tick(
            progress=new,
            posts=(Post(key=f"rollback-asked:{progress['nodepool']}", text=text, people=(decision.by,)),),
            audit=(("rollback chosen", text),),
            card=(text,),
            wait=0.0,
        )

    def _rolling_back(
        self, cluster: JobCluster, gke: Provider, progress: Progress, what: str, *, now: datetime
    ) -> Tick:
        """The rollback, by the intent rule: store it, call once (or find it), follow it."""
        pool = progress["nodepool"]
        rollback = dict(progress["rollback"])
        if not rollback.get("operation"):
            if not rollback.get("intent"):
                rollback["intent"] = iso(now)
                return Tick(
                    progress={**progress, "rollback": rollback},
                    card=(f"{what}: calling {ROLLBACK}",),
                    wait=0.0,
                )
            running = [
                o
                for o in gke_call("ListOperations", gke.operations, node_pool=pool)
                if o != progress.get("operation")
            ]
            back = self._version_now(gke, progress) == progress["from"]
            if running or back:
                rollback["operation"] = running[0] if running else "resource"
                text = f"{what}: {ROLLBACK} made before the interruption reached GKE: following it, not called again"
            else:
                op = gke_call(ROLLBACK, gke.rollback_node_pool, pool=pool, token="")
                rollback["operation"] = op.id
                text = f"{what}: GKE accepted {ROLLBACK}, operation {op.id} ({op.status})"
            return Tick(
                progress={**progress, "rollback": rollback},
                posts=(Post(key=f"rollback-started:{pool}", text=text),),
                audit=(
                    (
                        ROLLBACK,
                        f"{progress['gke']}/{pool} back to {progress['from']}: {rollback['operation']}",
                    ),
                ),
                card=(text,),
                wait=POLL_SECONDS,
            )
        counts = group_counts(self._nodes(cluster, pool), progress["from"])
        if rollback["operation"] == "resource":
            status = "Successful" if self._version_now(gke, progress) == progress["from"] else "InProgress"
            op = Operation(id="", kind=ROLLBACK, status=status)
        else:
            op = gke_call("GetOperation", gke.operation, operation_id=rollback["operation"], node_pool=pool)
        if op.status == "InProgress":
            card = (f"{what}: rolling back, GKE operation {rollback['operation']} {op.status}",)
            return Tick(progress=progress, card=card, wait=POLL_SECONDS)
        ok_back = op.status == "Successful"
        text = (
            f"{what}: rolled back ({ROLLBACK}, asked by {rollback['by']}): the pool is on {progress['from']} again, "
            f"{counts['on_target']}/{counts['total']} node(s) Ready"
            if ok_back
            else f"{what}: the rollback {op.status} — {update_errors(op.errors, self.cloud)}"
        )
        # The upgrade did not happen: the step fails either way, and the run pauses for people.
        return self._end(progress, text, ok=False, key=f"rollback-done:{pool}", people=(str(rollback["by"]),))


def _settings_text(progress: Progress) -> str:
    if progress["strategy"] == "blue-green":
        return f"strategy=BLUE_GREEN nodePoolSoakDuration={_span(progress['soak'])}"
    return f"strategy=SURGE maxSurge={progress['max_surge']} maxUnavailable={progress['max_unavailable']}"


def _span(seconds: Any) -> str:
    from bot.core.durations import format_duration

    return format_duration(timedelta(seconds=float(seconds or 0)))


def _seconds(text: Any) -> float:
    value = str(text or "").strip()
    try:
        return float(value[:-1]) if value.endswith("s") else float(value or 0)
    except ValueError:
        return 0.0


# the registry's checks


def _master_args(args: Mapping[str, str]) -> tuple[str, timedelta]:
    """`gke-update-master`'s arguments, checked: (version, timeout)."""
    return version_arg(args, required=True), duration_arg(args, "timeout", MASTER_TIMEOUT)


def _nodepool_args(
    args: Mapping[str, str],
) -> tuple[str, str, str, str, str, timedelta | None, timedelta]:
    """`gke-update-nodepool`'s arguments, checked: (nodepool, version, strategy, max_surge,
    max_unavailable, soak — None when not given —, timeout)."""
    return (
        label_value("nodepool", str(args.get("nodepool", "")).strip()),
        version_arg(args, required=False),
        strategy_arg(args),
        _count_arg(args, "max_surge"),
        _count_arg(args, "max_unavailable"),
        duration_arg(args, "soak", SOAK) if "soak" in args else None,
        duration_arg(args, "timeout", NODEPOOL_TIMEOUT),
    )


def check_master(args: Mapping[str, str]) -> None:
    _master_args(args)


def check_nodepool(args: Mapping[str, str]) -> None:
    _nodepool_args(args)
