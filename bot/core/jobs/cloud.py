"""What the gated cloud actions share (EKS: `bot.core.jobs.eks`; AKS and GKE: `bot.core.jobs.aks`,
`bot.core.jobs.gke`). Each upgrades a control plane, a pool or an add-on through its cloud's
provider port (`bot.core.providers`) and follows the long-running operation to its end, never
calling twice.

- `CloudJob`: the provider client, the pool's nodes, the deadline, the step's end, and the
  two-person question before an update past the cloud's own refusal (EKS's force past its upgrade
  insights, AKS's override of its deprecated-API block).
- `OperationJob`: the intent rule of the AKS and GKE jobs, which have no idempotency token to lean
  on: a tick stores the call's intent, the next one sends it; a tick that finds an intent without
  an operation (a kill -9 between the call and storing its answer) first looks for what the call
  started (the resource upgrading, a running operation, the target reached) and follows it instead
  of calling again. Then it follows the operation to Successful, Failed or the job's timeout.

Every cloud job ticks alike (`CloudJob.tick`): people's answer to a question the job asked, then
the update call, then the follow of what it started; each job says what its own are.

EKS keeps its own intent rule (a `clientRequestToken` and `ListUpdates`): see `bot.core.jobs.eks`.
"""

from __future__ import annotations

import abc
import difflib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bot.core.durations import format_duration
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    JobCluster,
    bar,
    disruptions_allowed,
    few,
    iso,
    list_nodes,
    pdb_ref,
    selector_matches,
    timer_start,
    unschedulable,
)
from bot.core.jobs.waitgroup import group_counts
from bot.core.kube.objects import node_group, parse_iso
from bot.core.kube.versions import parse_version, reports
from bot.core.providers import (
    MaintenanceExclusion,
    Operation,
    OperationError,
    Provider,
    ProviderError,
    Versions,
)
from bot.errors import ClusterError, TemporaryError, UserError, clip

Obj = dict[str, Any]
T = TypeVar("T")


def unless_gone(call: Callable[[], T]) -> T | None:
    """`call()`, or None when the cloud answers 404: no such pool (a typo, a pool removed since),
    or an operation it no longer keeps."""
    try:
        return call()
    except ProviderError as exc:
        if exc.status == 404:
            return None
        raise


#: How often an operation is polled (a status read is cheap; a cloud's upgrade takes minutes).
POLL_SECONDS = 10.0
#: The progress key of an update call about to be sent (the intent rule).
INTENT = "intent"
STOP = "stop"
#: The answer that fails the step, offered in every question the cloud jobs ask (coordinators too).
STOP_OPTION = ChoiceOption(id=STOP, label="Stop (fail the step)", roles=("primary", "shadow", "coordinator"))


class ReadinessBlock(Exception):
    """The cloud refused the update over its own readiness block (EKS's upgrade insights in
    ERROR, AKS's deprecated-API usage): not the step's end but a question for people, asked with
    the cloud's `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def cloud_call(
    cloud: str,
    what: str,
    call: Callable[[], T],
    *,
    refused: Callable[[ProviderError], bool],
    reason: Callable[[ProviderError], str],
) -> T:
    """A call to the cloud whose refusal (`refused`: a 4xx the cloud means) ends the job with the
    cloud's `reason`; anything else (unreachable, a 5xx, throttled, busy) is tried again later."""
    try:
        return call()
    except ProviderError as exc:
        if refused(exc):
            raise UserError(f"{cloud} refused {what}: {reason(exc)}") from None
        raise TemporaryError(f"{cloud} did not answer {what}: {clip(str(exc), 200)}") from None


def coded_reason(exc: ProviderError) -> str:
    """A refusal as "Code: message" (the message clipped), as AKS and GKE send them."""
    return f"{exc.code + ': ' if exc.code else ''}{clip(str(exc), 300)}"


def blocking_budgets(
    cluster: JobCluster, nodes: Sequence[Obj], *, only_cordoned: bool
) -> list[dict[str, str]]:
    """(budget, pod, node) for every pod on a node group's or pool's nodes (old and cordoned ones only, while
    EKS drains) that a disruption budget allowing no disruption now selects."""
    chosen = [
        str((n.get("metadata") or {}).get("name", "")) for n in nodes if not only_cordoned or unschedulable(n)
    ]
    if not chosen:
        return []
    budgets: dict[str, list[Obj]] = {}
    for page in cluster.list_pages("/apis/policy/v1/poddisruptionbudgets"):
        for pdb in page.items:
            if disruptions_allowed(pdb) == 0:
                ns = str((pdb.get("metadata") or {}).get("namespace", ""))
                budgets.setdefault(ns, []).append(pdb)
    if not budgets:
        return []
    out: list[dict[str, str]] = []
    for node in chosen:
        for pod in cluster.node_pods(node):
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            for pdb in budgets.get(str(meta.get("namespace", "")), []):
                if selector_matches((pdb.get("spec") or {}).get("selector"), meta.get("labels")):
                    out.append(
                        {
                            "pdb": pdb_ref(pdb),
                            "pod": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                            "node": node,
                        }
                    )
    return out


def budgets_line(cluster: JobCluster, nodes: Sequence[Obj], then: str) -> list[str]:
    """The gate's line naming the disruption budgets at 0 that hold pods on a pool's nodes, with
    what the cloud then does (`then`); none when no budget holds any."""
    blocking = blocking_budgets(cluster, nodes, only_cordoned=False)
    if not blocking:
        return []
    named = few([f"{b['pdb']} ({b['pod']})" for b in blocking], 5)
    return [f"disruption budgets at 0 now that hold pods on its nodes: {named} — {then}"]


def covering(exclusions: Sequence[MaintenanceExclusion], now: datetime) -> list[MaintenanceExclusion]:
    """The exclusions in force at `now` (a freeze the team set on the cluster)."""
    out = []
    for e in exclusions:
        start, end = parse_iso(e.start), parse_iso(e.end)
        if start is not None and end is not None and start <= now < end:
            out.append(e)
    return out


def started_at(progress: Mapping[str, Any]) -> datetime:
    """The job's own clock for the gate's maintenance windows: when the step began."""
    return datetime.fromisoformat(str(progress["started"]).replace("Z", "+00:00"))


def update_errors(errors: Sequence[OperationError], cloud: str = "EKS") -> str:
    """An operation's errors as one line: "PodEvictionFailure: Reached max retries …" (a message
    that already begins with its code is not given the code twice)."""
    text = "; ".join(
        (e.message if e.code and e.message.startswith(e.code) else f"{e.code or '?'}: {e.message}").strip()
        for e in errors
    )
    return clip(text, 400) or f"{cloud} gave no reason"


def timeout_span(progress: Mapping[str, Any]) -> str:
    """The job's timeout as people write it (`1h`, `30m`)."""
    return format_duration(timedelta(seconds=float(progress["timeout"])))


def elapsed_since(now: datetime, since: str | None) -> str:
    """How long since `since` (ISO), as `12m05s`; empty when it is not a time."""
    begun = parse_iso(since)
    if begun is None:
        return ""
    seconds = max(0, int((now - begun).total_seconds()))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def api_version(cluster: JobCluster) -> str:
    """What the API server's /version says now (its gitVersion)."""
    return str(cluster.get_json("/version").get("gitVersion", ""))


def seen_version(cluster: JobCluster) -> str:
    """`api_version`, or why there is none: the API servers restart during a control plane's
    update, so an unanswered /version is expected then and is not the job's end."""
    try:
        return api_version(cluster)
    except ClusterError as exc:
        return f"(no answer: {clip(exc.user_message, 80)})"


class CloudJob(abc.ABC):
    """What every cloud job shares: its provider, the pool's nodes, the deadline and the end."""

    kind = ""
    #: The argument that names a pool (`nodepool`, EKS's `nodegroup`), the cloud's word for one
    #: (`agent pool`, `node pool`, `node group`) and for them all in a refusal (`pools`, `node
    #: groups`), the key of its name in the cloud's description, and the calls that read one and
    #: list them (how they are named in a refusal).
    pool_arg = "nodepool"
    pool_word = "node pool"
    pools_word = "pools"
    pool_name_key = "name"
    get_pool_call = ""
    list_pools_call = ""

    def __init__(self, access: Callable[[str], Provider], node_group_labels: Sequence[str] = ()) -> None:
        self.access = access
        self.node_group_labels = tuple(node_group_labels)

    def client(self, cluster: Any) -> Provider:
        return self.access(str(getattr(cluster, "name", "")))

    @abc.abstractmethod
    def _api(self, what: str, fn: Callable[..., T], **kwargs: Any) -> T:
        """A call to the cloud, its refusal ended with the cloud's reason, the rest retried (each
        cloud's jobs say how)."""

    def _pool_named(self, provider: Provider, name: str) -> Obj:
        """The pool `name` as the cloud describes it. A pool the cloud does not know (a typo in the
        plan, a pool removed since) is refused by name with the cluster's pools, the nearest first
        for a typo, never as the cloud's raw NotFound."""
        found = self._api(self.get_pool_call, lambda: unless_gone(lambda: provider.node_pool(name)))
        if found is not None:
            return found
        pools = sorted(
            str(p.get(self.pool_name_key, "")) for p in self._api(self.list_pools_call, provider.node_pools)
        )
        near = difflib.get_close_matches(name, pools, n=1, cutoff=0.6)
        raise UserError(
            f"{self.pool_arg}: {self.pool_word} {clip(name, 63)} does not exist in {provider.name} "
            f"(its {self.pools_word}: {few(pools, 8) or 'none'})"
            + (f"; did you mean {near[0]}?" if near else "")
        )

    def _nodes(self, cluster: JobCluster, pool: str) -> list[Obj]:
        """The nodes of the node group or pool `pool`, by the settings' node-group labels."""
        return [
            n
            for n in list_nodes(cluster)
            if node_group((n.get("metadata") or {}).get("labels"), self.node_group_labels) == pool
        ]

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        """People's answer to a question the job asked first (`_answered`); then the update call,
        made once (`_call`), until the job follows what the call started (`_follow`)."""
        provider = self.client(cluster)
        what = self._what(progress)
        if decision is not None:
            answered = self._answered(progress, decision, what, now=now)
            if answered is not None:
                return answered
        if self._started(progress):
            return self._follow(cluster, provider, progress, now=now, what=what)
        return self._call(cluster, provider, progress, now=now, what=what)

    def _what(self, progress: Progress) -> str:
        """The upgrade as the job's lines name it (`control plane 1.29 → 1.30`, `node pool apps
        1.29.1 → 1.30.2`)."""
        pool = progress.get(self.pool_arg)
        return f"{self.pool_word + ' ' + pool if pool else 'control plane'} {progress['from']} → {progress['target']}"

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """What people's `decision` does, when it answers the question this job asked; None when
        it is none of this job's (the default: a job that asks nothing)."""
        return None

    @abc.abstractmethod
    def _started(self, progress: Progress) -> bool:
        """Whether the update call was made (or found): the job now follows what it started."""

    @abc.abstractmethod
    def _call(
        self, cluster: JobCluster, provider: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        """A tick before the update call: the call, made once by the intent rule (or nothing to
        call)."""

    @abc.abstractmethod
    def _follow(
        self, cluster: JobCluster, provider: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        """A tick after the update call: the follow of what it started, to the step's end."""

    @abc.abstractmethod
    def _following(self, provider: Provider, progress: Progress) -> list[str]:
        """The dry run of a resumed job that already made its call: it follows, never calls."""

    def _dry_run_following(self, cluster: JobCluster, provider: Provider, progress: Progress) -> list[str]:
        """The dry run of a resumed job following its call, with what the cluster shows now: the
        pool's nodes, or the API server's /version."""
        pool = progress.get(self.pool_arg)
        if pool:
            counts = group_counts(self._nodes(cluster, pool), progress["target"])
            now = f"its nodes now: {counts['total']}, of which {counts['on_target']} Ready on {progress['target']}"
        else:
            now = f"API server /version now: {api_version(cluster) or '?'}"
        return [*self._following(provider, progress), now]

    def _timed_out(self, progress: Progress, now: datetime) -> bool:
        started = timer_start(progress, progress.get("started"), now)
        return now - started >= timedelta(seconds=float(progress["timeout"]))

    def _end(
        self,
        progress: Progress,
        text: str,
        *,
        ok: bool,
        key: str = "",
        posts: Sequence[Post] = (),
        said: str = "",
        people: Sequence[str] = (),
    ) -> Tick:
        """The step's end, posted once under `key` (after `posts`, the tick's other lines; no key, no
        post), audited as `said` (by default: done, or failed); `people`: who it names (mentions)."""
        return Tick(
            progress=progress,
            posts=(*posts, Post(key=key, text=text, people=tuple(people))) if key else tuple(posts),
            audit=((f"{self.kind} {said or ('done' if ok else 'failed')}", text),),
            card=(text,),
            done=True,
            ok=ok,
            detail=text,
            wait=0.0,
        )

    @staticmethod
    def _nothing_to_do(progress: Progress, text: str) -> Tick:
        """The target was reached before the job began: done, nothing called."""
        return Tick(progress=progress, card=(text,), done=True, ok=True, detail=text, wait=0.0)

    def _stopped(self, progress: Progress, text: str) -> Tick:
        """People chose to stop: the step fails with `text`, audited."""
        return self._end(progress, text, ok=False, said="stopped")

    def _second_person(
        self,
        progress: Progress,
        decision: Decision,
        *,
        what: str,
        yes: str,
        not_done: str,
        asked_key: str,
        asks: str,
        confirm: str,
        key: str,
        post: str,
    ) -> Tick | None:
        """People answered the question after the cloud refused the update: they stop (the step
        fails with the refusal, `progress["blocked"]`, and `not_done`); or one person asks for `yes`
        with a reason (`asks`: what they ask for) and a second person must confirm with theirs
        (`confirm`: the button) — never the asker. None once the second person confirmed: the
        caller goes on with the asker in `progress[asked_key]`."""
        if decision.option != yes:
            text = f"{str(progress.get('blocked') or what).rstrip('.')}; stopped by {decision.by}, {not_done}"
            return self._stopped(progress, text)
        asked = progress.get(asked_key) or {}
        if decision.choice_key.endswith(":confirm") and asked and asked.get("by") != decision.by:
            return None
        # The first person (or, should one ever get through, the asker again): a second must confirm.
        asked = {"by": decision.by, "reason": decision.reason or "no reason given"}
        text = f"{what}: {decision.by} asks to {asks}: {asked['reason']}. A second person confirms, or stops."
        choice = Choice(
            key=f"{key}:confirm",
            question=text,
            options=(
                ChoiceOption(id=yes, label=confirm, needs_reason=True, not_by=(decision.by,)),
                STOP_OPTION,
            ),
        )
        return Tick(
            progress={**progress, asked_key: asked},
            posts=(Post(key=post, text=text, people=(decision.by,)),),
            audit=((f"{yes} asked", text),),
            card=(text,),
            choice=choice,
            wait=POLL_SECONDS,
        )

    def _confirmed(
        self,
        progress: Progress,
        decision: Decision,
        *,
        asked_key: str,
        chosen: str,
        new: Progress,
        key: str,
        said: str,
    ) -> Tick:
        """The second person confirmed what the first asked for (`_second_person` answered None):
        `chosen` (what the two chose, as people read it) is posted under `key` with both of them
        and their reasons, audited as `said`; the next tick goes on with `new`."""
        asked = progress[asked_key]
        text = (
            f"{chosen}, asked by {asked['by']} ({asked['reason']}) and confirmed by {decision.by} "
            f"({decision.reason or 'no reason given'})"
        )
        return Tick(
            progress=new,
            posts=(Post(key=key, text=text, people=(asked["by"], decision.by)),),
            audit=((said, text),),
            card=(text,),
            wait=0.0,
        )


class OperationJob(CloudJob):
    """An AKS or GKE job: the intent rule of the module docstring, and the operation's follow.

    Its progress names the cluster under the cloud's key (`aks`, `gke`), and has `target`, `from`,
    `started`, `timeout`, `operation` (its id, "" while none), `following` (`operation`, or
    `resource` when the job follows the resource's own state) and `status`."""

    #: The cloud's name in what people read (`AKS`, `GKE`); its lower case is the progress key.
    cloud = ""
    #: The one update call this job makes.
    call = ""
    #: The status read of an operation (how it is named in a refusal).
    status_call = ""
    #: What the job follows when it has no operation id (`provisioningState`, `version`).
    resource_word = ""
    #: The cloud's word for an operation's success.
    done_word = "Successful"
    #: Where people follow an upgrade the job gave up on.
    console = ""
    #: What a resumed job does before it calls (the dry run's first line).
    looks_first = ""
    #: The control plane as a line that says it is already on the target names it.
    control_plane_word = "the control plane"

    @abc.abstractmethod
    def _found(self, provider: Provider, progress: Progress) -> tuple[str, str] | None:
        """What a call made before an interruption started: (its operation's id, "" when the job
        follows the resource; how it was found), or None when the call did not reach the cloud."""

    @abc.abstractmethod
    def _send(self, provider: Provider, progress: Progress) -> Operation:
        """The update call itself (once: its intent is stored before)."""

    @abc.abstractmethod
    def _gate(self, cluster: JobCluster, provider: Provider, progress: Progress) -> list[str]:
        """The dry run of a job that has not called yet: exactly the call, and what the cloud
        and the cluster say now."""

    @abc.abstractmethod
    def _resource_status(self, provider: Provider, progress: Progress) -> str:
        """The update's status read from the resource (the job has no operation id to follow)."""

    def _extra(self, progress: Progress) -> str:
        """What the audit adds to the call's target (the settings it was made with)."""
        return ""

    def _begin(
        self,
        provider: Provider,
        *,
        what: str,
        target: str,
        was: str,
        timeout: timedelta,
        now: datetime,
        **extra: Any,
    ) -> Progress:
        """The progress a job plans (the class docstring's keys) with its own `extra`; `seen` is
        what the cluster shows of the upgrade (/version, or a pool's node counts)."""
        return {
            "what": what,
            self.cloud.lower(): provider.name,
            "target": target,
            "from": was,
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "operation": "",
            "status": "",
            "seen": {} if what == "nodepool" else "",
            **extra,
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        provider = self.client(cluster)
        if self._started(progress):
            return self._dry_run_following(cluster, provider, progress)
        return [*self._interrupted(progress), *self._gate(cluster, provider, progress)]

    def _not_offered(self, progress: Progress, versions: Versions) -> list[str]:
        """The gate's warning when the cloud does not offer the target (it would refuse the call)."""
        target = progress["target"]
        if not versions.offered or target in versions.offered or progress["from"] == target:
            return []
        return [f"{self.cloud} does not offer {target} from {versions.current}: it would refuse the upgrade"]

    def _pool(self, progress: Progress) -> str:
        return str(progress.get("nodepool") or "")

    def _name(self, progress: Progress) -> str:
        return str(progress[self.cloud.lower()])

    def _start(self, provider: Provider, progress: Progress, *, now: datetime, what: str) -> Tick:
        """The intent rule of the module docstring: store, then send (or find) the call."""
        attempt = int(progress.get("attempt", 0))
        intent = progress.get(INTENT) or {}
        if intent.get("call") != self.call or int(intent.get("attempt", -1)) != attempt:
            new = {**progress, INTENT: {"call": self.call, "attempt": attempt, "at": iso(now)}}
            return Tick(progress=new, card=(f"{what}: calling {self.call}",), wait=0.0)
        target = f"{self._name(progress)} → {progress['target']}"
        found = self._found(provider, progress)
        # Sent now, or found made before an interruption: from here the job follows its operation,
        # or the resource itself when the cloud gave no operation.
        if found is not None:
            op_id, how = found
            status, key = "InProgress", f"found:{self.call}:{attempt}"
            text = f"{what}: {self.call} made before the interruption reached {self.cloud} ({how}): following it, not called again"
            audit = f"{target}: found after an interruption, not called again"
        else:
            op = self._send(provider, progress)
            op_id, status, key = op.id, op.status, f"update-started:{self.call}:{attempt}"
            text = f"{what}: {self.cloud} accepted {self.call}, operation {op.id or '(none: nothing to change)'} ({op.status})"
            audit = f"{target}{self._extra(progress)}: operation {op.id}"
        new = {
            **progress,
            "operation": op_id,
            "following": "operation" if op_id else "resource",
            "status": status,
        }
        return Tick(
            progress=new,
            posts=(Post(key=key, text=text),),
            audit=((self.call, audit),),
            card=(text,),
            wait=POLL_SECONDS,
        )

    def _call(
        self, cluster: JobCluster, provider: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        """Done when what the job upgrades was on the target before it began, else the intent
        rule (`_start`)."""
        if progress["from"] == progress["target"]:
            pool = self._pool(progress)
            on = f"{self.pool_word} {pool}" if pool else self.control_plane_word
            return self._nothing_to_do(
                progress, f"{on} is already on {progress['target']}: nothing to upgrade"
            )
        return self._start(provider, progress, now=now, what=what)

    def _pool_read(
        self, cluster: JobCluster, provider: Provider, progress: Progress
    ) -> tuple[Operation, dict[str, int], Progress, str]:
        """A pool's upgrade as it goes: its operation, its nodes' counts on the target, the progress
        with both, and how a success shows (`_settled`'s `done`)."""
        op = self._status(provider, progress)
        target = progress["target"]
        counts = group_counts(self._nodes(cluster, self._pool(progress)), target)
        done = f" — {counts['on_target']}/{counts['total']} node(s) Ready on {target}"
        return op, counts, {**progress, "status": op.status, "seen": counts}, done

    def _started(self, progress: Progress) -> bool:
        return bool(progress.get("operation") or progress.get("following"))

    def _status(self, provider: Provider, progress: Progress) -> Operation:
        """The operation the job follows, or the resource's state when it has no operation id, or
        when the cloud no longer keeps the operation (a bot paused for days: GKE and ARM keep a
        finished operation's record for a while only) — the resource then says how it ended."""
        if progress.get("operation"):
            op = self._api(
                self.status_call,
                lambda: unless_gone(
                    lambda: provider.operation(
                        operation_id=progress["operation"], node_pool=self._pool(progress)
                    )
                ),
            )
            if op is not None:
                return op
            return Operation(
                id=str(progress["operation"]),
                kind=self.call,
                status=self._resource_status(provider, progress),
            )
        return Operation(id="", kind=self.call, status=self._resource_status(provider, progress))

    def _op_name(self, progress: Progress) -> str:
        if progress.get("operation"):
            return f"{self.cloud} operation {progress['operation']}"
        # Followed from the resource: the pool's own state, not the cluster's, for a pool's job.
        pool = self._pool(progress)
        return f"{self._name(progress)}{'/' + pool if pool else ''}'s {self.resource_word}"

    def _following(self, provider: Provider, progress: Progress) -> list[str]:
        op = self._status(provider, progress)
        return [
            f"resumes following {self._op_name(progress)}, which this job started before it was interrupted: "
            f"no new {self.call} is made",
            f"now: {op.status}" + (f" — {update_errors(op.errors, self.cloud)}" if op.errors else ""),
        ]

    def _interrupted(self, progress: Progress) -> list[str]:
        """The dry run's first line for a resumed job whose call was interrupted: it looks first."""
        intent = progress.get(INTENT) or {}
        if not intent or self._started(progress):
            return []
        return [
            f"its {intent.get('call')} may have reached {self.cloud} before the interruption: {self.looks_first}"
        ]

    def _settled(
        self, progress: Progress, new: Progress, op: Operation, what: str, *, done: str | None
    ) -> Tick | None:
        """The step's end when the operation failed, or succeeded and `done` says how it shows
        (None while it does not show yet); None while it goes on."""
        key = progress.get("operation") or "resource"
        if op.status in ("Failed", "Cancelled"):
            text = f"{what}: {self._op_name(progress)} {op.status} — {update_errors(op.errors, self.cloud)}"
            return self._end(new, text, ok=False, key=f"update-failed:{key}")
        if op.status == "Successful" and done is not None:
            text = f"{what}: {self._op_name(progress)} {self.done_word}{done}"
            return self._end(new, text, ok=True, key=f"update-done:{key}")
        return None

    def _gave_up(
        self, progress: Progress, new: Progress, op: Operation, what: str, now: datetime
    ) -> Tick | None:
        """The step's end past the job's timeout (the upgrade goes on at the cloud); None before."""
        if not self._timed_out(progress, now):
            return None
        text = (
            f"{what}: {self._op_name(progress)} still {op.status} after {timeout_span(progress)}; the upgrade goes "
            f"on at {self.cloud} ({self.console}) — the step stops here"
        )
        return self._end(new, text, ok=False, key=f"timeout:{progress.get('operation') or 'resource'}")

    def _head(self, progress: Progress, op: Operation, what: str, now: datetime, *, phase: str = "") -> str:
        """The card's first line while the operation goes on (in its `phase`, when it says)."""
        elapsed = elapsed_since(now, progress["started"])
        return (
            f"{what}: {self._op_name(progress)} {op.status}"
            + (f" ({phase})" if phase else "")
            + (f", {elapsed} so far" if elapsed else "")
        )

    def _follow(
        self, cluster: JobCluster, provider: Provider, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        """Follow what the call started: a control plane's operation until it succeeded AND
        /version reports the target (a pool's job follows its nodes instead)."""
        op = self._status(provider, progress)
        seen = seen_version(cluster)
        new = {**progress, "status": op.status, "seen": seen}
        on_target = reports(seen, parse_version(progress["target"]))
        ended = self._settled(
            progress, new, op, what, done=f" and the API server reports {seen}" if on_target else None
        )
        ended = ended or self._gave_up(progress, new, op, what, now)
        if ended is not None:
            return ended
        card = (self._head(progress, op, what, now), f"API server /version: {seen or '?'}")
        return Tick(progress=new, card=card, wait=POLL_SECONDS)


def pool_bar(counts: Mapping[str, int], target: str) -> str:
    """The card's line of a pool's nodes as they roll: Ready on the target, and the old ones left."""
    return bar(counts["on_target"], counts["total"], f"nodes Ready on {target}") + (
        f" · {counts['old']} old" if counts["old"] else ""
    )
