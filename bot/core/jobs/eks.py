"""The gated EKS actions (issue 29): update the control plane, a managed node group or an add-on
through the EKS API, and follow the update to its end.

- `eks-update-cluster version=1.25`: `UpdateClusterVersion`, then `DescribeUpdate` until the update
  is Successful AND the API server's `/version` reports the target. When EKS refuses the update
  because upgrade insights of the target are in ERROR (InvalidStateException), the job names the
  insights and asks people: "update with force" (one person asks with a reason, a second person
  confirms with theirs, both audited) or stop. It never sends `force` by itself.
- `eks-update-nodegroup nodegroup=NAME [version=…] [force=false]`: `UpdateNodegroupVersion`, then
  `DescribeUpdate`, while the group's nodes are counted as they roll and every disruption budget
  that holds a pod on an old, cordoned node is named in the thread (EKS retries such an eviction
  and fails the update with PodEvictionFailure after 15 minutes). After such a failure the job
  asks people: update again with `force` (EKS then deletes what the budgets protect) or stop.
  It never forces by itself.
- `eks-update-addon addon=NAME version=… [resolve_conflicts=NONE]`: `UpdateAddon` with the conflict
  policy the gate shows, then `DescribeUpdate` until the add-on is on the version. When EKS fails
  the update with a ConfigurationConflict (someone changed the add-on's objects by hand), the job
  asks people: retry with OVERWRITE (EKS's defaults replace those changes), with PRESERVE (EKS
  keeps them) or stop — a new update with its own token, never the same call again.

Never a call twice (issue 38): before an update call, a tick stores the call's *intent* in the
job's progress — the call, its `clientRequestToken` (the run's and the job's ids, `token`) and the
ids `ListUpdates` knows then — and only the next tick sends it; the tick that sent it stores the
update's id. A tick that finds an intent without an update (a kill -9, or a connection lost,
between the call and storing its answer) first asks `ListUpdates` for an update the intent did not
know, of the call's kind and version (`DescribeUpdate`), and follows it instead of calling again;
only when there is none does it send the call, with the same token (so even a call EKS received
but did not yet list returns the same update). The update calls go through a client that boto3
does not retry (a retried UpdateX is a repeated call too); the job's own look-up is the retry.

The AWS side comes through the provider port (`bot.core.providers`: `EksAccess` is its
`ProviderAccess`): the cluster's `provider: {eks: …}` and boto3 (the `aws` extra). Without either the action refuses with a short reason, at the gate's dry run and when it
starts. Only the calls named above are made (plus `DescribeCluster`, `DescribeNodegroup` and
`DescribeAddon` to show what EKS says now): least privilege for the bot's role.

Progress (JSON), e.g. of `eks-update-cluster`:

    {"what": "cluster", "version": "1.25", "from": "1.24", "started": "…", "timeout": 3600,
     "update": "a1b2…", "status": "InProgress", "seen": "v1.24.17-eks-…", "force": false,
     "intent": {"call": "UpdateClusterVersion", "token": "upgrade-bot-R1-job-7", "at": "…",
                "known": ["9e1f…"]}}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bot.core.jobs import trail as tr
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.cloud import (
    INTENT,
    POLL_SECONDS,
    STOP,
    STOP_OPTION,
    CloudJob,
    ReadinessBlock,
    api_version,
    blocking_budgets,
    budgets_line,
    cloud_call,
    elapsed_since,
    pool_bar,
    seen_version,
    timeout_span,
    update_errors,
)
from bot.core.jobs.common import (
    JobCluster,
    duration_arg,
    few,
    flag,
    iso,
    label_value,
)
from bot.core.jobs.eksargs import (
    CONFLICT_POLICIES,
    addon_arg,
    addon_version_arg,
    conflicts_arg,
    minor,
    minor_arg,
)
from bot.core.jobs.waitgroup import group_counts
from bot.core.kube.objects import parse_iso
from bot.core.kube.versions import parse_version, reports
from bot.core.providers import (
    Operation,
    OperationError,
    PoolStrategy,
    Provider,
    ProviderAccess,
    ProviderError,
    no_provider,
)
from bot.errors import clip

Obj = dict[str, Any]
T = TypeVar("T")

#: How long a job follows its update before it gives up (the update goes on at AWS).
CLUSTER_TIMEOUT = timedelta(hours=1)
NODEGROUP_TIMEOUT = timedelta(hours=2)
ADDON_TIMEOUT = timedelta(minutes=30)
FORCE = "force"
#: The gated choice after an add-on update failed on a ConfigurationConflict (issue 40 item 8):
#: its key's prefix and the answers, each a policy EKS is asked again with.
CONFLICT = "conflict"
RETRY_WITH = {"overwrite": "OVERWRITE", "preserve": "PRESERVE"}
#: The gated choice after EKS refused a control-plane update over its upgrade insights (issue 46
#: item 3): one person asks for force with a reason, a second confirms (`…:confirm`).
INSIGHTS = "insights-force"
#: EKS's refusal of UpdateClusterVersion while an upgrade-readiness insight is in ERROR.
INSIGHTS_REFUSAL = "InvalidStateException"


#: What the EKS actions call: the provider port (`bot.adapters.providers.eks.Eks` answers it).
EksActs = Provider
#: Cluster name → its EKS provider, connected once (a short reason when it has none, or no boto3).
EksAccess = ProviderAccess
#: The access of a registry built without providers (tests, tools): every EKS action refuses.
no_eks = no_provider


def aws_call(what: str, fn: Callable[..., T], **kwargs: Any) -> T:
    """An AWS call whose refusal ends the job with AWS's reason (a 4xx that is not throttling);
    anything else (a connection error, a 5xx, throttling) is tried again later."""
    return cloud_call(
        "EKS", what, lambda: fn(**kwargs), refused=_refused, reason=lambda exc: clip(_reason(exc), 300)
    )


def _refused(exc: ProviderError) -> bool:
    return 400 <= exc.status < 500 and "Throttl" not in exc.code and exc.code != "TooManyRequestsException"


#: botocore's "… when calling the Op operation: message" ("operation (reached max retries: 0): "
#: when the client does not retry, as the update calls' does).
_BOTOCORE_HEAD = re.compile(r" operation(?: \(reached max retries: [0-9]+\))?: ")


def _reason(exc: Exception) -> str:
    """botocore's "An error occurred (Code) when calling the Op operation: message" as "Code: message"."""
    text = str(exc)
    code = getattr(exc, "code", "")
    parts = _BOTOCORE_HEAD.split(text, maxsplit=1)
    return f"{code}: {parts[1]}" if len(parts) == 2 and code else text


def token(progress: Mapping[str, Any], suffix: str = "") -> str:
    """The job's `clientRequestToken`: the run's and the job's ids (unique across runs and bots
    sharing a cluster), plus `suffix` for a second, deliberate update (people chose force)."""
    trail = progress.get(tr.TRAIL) or {}
    text = f"upgrade-bot-{trail.get('run', '')}-job-{trail.get('job', '')}{suffix}"
    return text[:64]


def _started(call: str, found: bool) -> str:
    """How the job came to follow its update: EKS accepted the call, or the call made before an
    interruption was found by ListUpdates (and not made again)."""
    return (
        f"{call} made before the interruption found by ListUpdates (not called again)"
        if found
        else f"EKS accepted {call}"
    )


def _following_update(progress: Progress, update: Operation, text: str, audit: tuple[str, str]) -> Tick:
    """From this tick the job follows `update` (the one it started, or found): `text` is said
    once in the thread, under the update's id, and `audit` records how it came to follow it."""
    return Tick(
        progress={**progress, "update": update.id, "status": update.status},
        posts=(Post(key=f"update-started:{update.id}", text=text),),
        audit=(audit,),
        card=(text,),
        wait=POLL_SECONDS,
    )


def _interrupted(progress: Mapping[str, Any]) -> list[str]:
    """The dry run's first line for a resumed job whose call was interrupted: it looks first."""
    intent = progress.get(INTENT) or {}
    if not intent or progress.get("update"):
        return []
    return [
        f"its {intent.get('call')} may have reached EKS before the interruption: it first looks for that "
        "update (ListUpdates, DescribeUpdate) and follows it; it calls only if there is none, with the "
        "same clientRequestToken"
    ]


def _how(found: bool) -> str:
    return " (found by ListUpdates after an interrupted call; not called again)" if found else ""


def _already(group: Mapping[str, Any], progress: Progress) -> bool:
    """Is the node group (DescribeNodegroup's answer) already on the job's target, and not updating?"""
    version = str(group.get("version", ""))
    return bool(version) and minor(version) == minor(progress["target"]) and group.get("status") != "UPDATING"


def _updated_outside(group: Mapping[str, Any], progress: Progress) -> bool:
    """Is the node group on the target now though it was not when the step began (updated in the
    console, by hand)? One already on it then is the plan's AMI refresh, which is called."""
    return minor(progress["from"]) != minor(progress["target"]) and _already(group, progress)


class _EksJob(CloudJob):
    """What the three EKS jobs share: the intent rule with its token, and the update's end."""

    def _api(self, what: str, fn: Callable[..., T], **kwargs: Any) -> T:
        return aws_call(what, fn, **kwargs)

    def _started(self, progress: Progress) -> bool:
        return bool(progress["update"])

    def _following(self, eks: EksActs, progress: Progress) -> list[str]:
        """It calls no Update again, it follows the one it started (what DescribeUpdate says of it now)."""
        which = {"node_pool": progress.get("nodegroup", ""), "addon": progress.get("addon", "")}
        update = aws_call("DescribeUpdate", eks.operation, operation_id=progress["update"], **which)
        return [
            f"resumes following EKS update {progress['update']}, which this job started before it was "
            "interrupted: no new update is called",
            f"DescribeUpdate now: {update.status or '?'}"
            + (f" — {update_errors(update.errors)}" if update.errors else ""),
        ]

    def _call_once(
        self,
        eks: EksActs,
        progress: Progress,
        *,
        now: datetime,
        call: str,
        tok: str,
        match: tuple[str, str, str],
        which: Mapping[str, str],
        send: Callable[[], Operation],
        what: str,
        audit: str,
        said: str = "",
        then: str = "",
        busy: Callable[[], bool] | None = None,
    ) -> Tick:
        """The update call of the module docstring's rule: the tick that stores its intent, when
        not stored yet; else the tick that stores the update it started, or that the call made
        before an interruption started (found, not called again). The thread's line says `said`
        before the update and `then` after it; `audit` names what the call changes. `busy`: is
        the resource UPDATING now? Then an update of the same kind still in progress — a step
        that timed out, resumed as a new job — is followed instead (EKS would refuse a second
        one with ResourceInUseException)."""
        intent = progress.get(INTENT) or {}
        if intent.get("call") != call or intent.get("token") != tok:
            known = aws_call("ListUpdates", eks.operations, **which)
            running = self._running(eks, known, match, which) if busy is not None and busy() else None
            if running is not None:
                text = (
                    f"{what}: EKS update {running.id} to {match[2]} is already in progress (started "
                    f"{_clock(running.created)}, before this job): following it, {call} not called"
                )
                return _following_update(
                    progress,
                    running,
                    text,
                    (call, f"{audit}: not called, following update {running.id} in progress"),
                )
            new = {**progress, INTENT: {"call": call, "token": tok, "at": iso(now), "known": known}}
            return Tick(progress=new, card=(f"{what}: calling {call}",), wait=0.0)
        update = self._find(eks, intent, match, which)
        found = update is not None
        if update is None:
            update = send()
        text = f"{what}: {_started(call, found)}{said}, update {update.id} ({update.status}){then}"
        return _following_update(progress, update, text, (call, f"{audit}: update {update.id}{_how(found)}"))

    @staticmethod
    def _running(
        eks: EksActs, known: Sequence[str], match: tuple[str, str, str], which: Mapping[str, str]
    ) -> Operation | None:
        """An update of the call's type and version still InProgress (the newest if several)."""
        kind, param, value = match
        found = [
            update
            for update_id in known
            if (update := aws_call("DescribeUpdate", eks.operation, operation_id=update_id, **which)).kind
            == kind
            and update.params.get(param) == value
            and update.status == "InProgress"
        ]
        return max(found, key=lambda u: u.created) if found else None

    @staticmethod
    def _find(
        eks: EksActs, intent: Mapping[str, Any], match: tuple[str, str, str], which: Mapping[str, str]
    ) -> Operation | None:
        """The update an interrupted call started: one the intent did not know, of the call's
        type (`VersionUpdate`, `AddonUpdate`) with its version parameter; the newest if several."""
        kind, param, value = match
        known = set(intent.get("known") or [])
        found: list[Operation] = []
        for update_id in aws_call("ListUpdates", eks.operations, **which):
            if update_id in known:
                continue
            update = aws_call("DescribeUpdate", eks.operation, operation_id=update_id, **which)
            if update.kind == kind and update.params.get(param) == value:
                found.append(update)
        return max(found, key=lambda u: u.created) if found else None

    def _failed(self, progress: Progress, update: Operation, what: str) -> Tick:
        why = update_errors(update.errors)
        text = f"{what}: EKS update {progress['update']} {update.status or 'Failed'} — {why}"
        # Not broadcast: the step's failure, which follows at once, is (with this reason).
        return self._end(progress, text, ok=False, key=f"update-failed:{progress['update']}")

    @staticmethod
    def _head(progress: Progress, status: str, what: str, now: datetime) -> str:
        """The card's first line while the update goes on."""
        elapsed = elapsed_since(now, progress["started"])
        return f"{what}: EKS update {progress['update']} {status}" + (
            f", {elapsed} so far" if elapsed else ""
        )

    def _gave_up(self, progress: Progress, what: str) -> Tick:
        text = (
            f"{what}: EKS update {progress['update'] or '(none)'} still {progress.get('status') or 'not started'} "
            f"after {timeout_span(progress)}; the update goes on at AWS "
            "(aws eks describe-update) — the step stops here"
        )
        return Tick(
            progress=progress,
            posts=(Post(key=f"timeout:{progress['update']}", text=text),),
            card=(text,),
            done=True,
            ok=False,
            detail=text,
            wait=0.0,
        )


class EksUpdateClusterJob(_EksJob):
    """`eks-update-cluster`: see the module docstring."""

    kind = "eks-update-cluster"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        version = minor_arg(args, required=True)
        timeout = duration_arg(args, "timeout", CLUSTER_TIMEOUT)
        eks = self.client(cluster)
        current = aws_call("DescribeCluster", eks.control_plane)
        return {
            "what": "cluster",
            "eks": eks.name,
            "version": version,
            "from": str(current.get("version", "")),
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "update": "",
            "status": "",
            "seen": "",
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        eks = self.client(cluster)
        if progress.get("update"):
            return self._dry_run_following(cluster, eks, progress)
        now = aws_call("DescribeCluster", eks.control_plane)
        api = api_version(cluster)
        described = (
            f"DescribeCluster now: version {now.get('version', '?')}, platform {now.get('platformVersion', '?')}, "
            f"status {now.get('status', '?')}"
        )
        seen_now = f"API server /version now: {api or '?'}"
        if str(now.get("version", "")) == progress["version"]:
            # As the job does: nothing is called, so nothing else of the call's text holds.
            return [
                *_interrupted(progress),
                f"the control plane is already on {progress['version']}: nothing will be called, the step "
                "succeeds as it starts",
                described,
                seen_now,
            ]
        lines = [
            *_interrupted(progress),
            f"would call eks:UpdateClusterVersion name={progress['eks']} version={progress['version']} "
            + (
                "force=true (chosen by two people past the upgrade insights) "
                if progress.get("force")
                else ""
            )
            + "clientRequestToken=(the run's and the job's ids: a resumed job never starts a second update)",
            described,
            seen_now,
            f"then eks:DescribeUpdate every {POLL_SECONDS:g} s until the update is Successful and /version "
            f"reports {progress['version']} (up to {timeout_span(progress)})",
        ]
        current = parse_version(str(now.get("version", "")))
        target = parse_version(progress["version"])
        seen = parse_version(api)
        if current is not None and seen is not None and seen[:2] != current[:2]:
            lines.insert(
                1,
                f":warning: the API server this cluster's kubeconfig reaches reports {api}, EKS says "
                f"{now.get('version', '?')}: they are not the same cluster, and the step could not tell "
                "when the update is done — check the kubeconfig (or the provider's cluster name) first",
            )
        if current is not None and target is not None and target[:2] > (current[0], current[1] + 1):
            lines.insert(
                1,
                f":warning: EKS updates the control plane one minor version at a time: from "
                f"{now.get('version', '?')} it refuses {progress['version']} (InvalidParameterException)",
            )
        behind = [
            f"{g.get('nodegroupName', '?')} ({g.get('version', '?')})"
            for g in aws_call("ListNodegroups", eks.node_pools)
            if current is not None and (parse_version(str(g.get("version", ""))) or (0,)) < current[:2]
        ]
        if behind:
            lines.insert(
                2,
                f"node groups behind the control plane, which EKS requires on {now.get('version', '?')} "
                f"before it updates it: {few(behind, 5)}",
            )
        return lines

    def _what(self, progress: Progress) -> str:
        return f"control plane {progress['from']} → {progress['version']}"

    def _call(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        version = progress["version"]
        if progress["from"] == version:
            return self._nothing_to_do(
                progress, f"the control plane is already on {version}: nothing to update"
            )
        force = bool(progress.get("force"))
        # Force is a new, deliberate update: its own token (the first one was refused).
        tok = token(progress, "-force" if force else "")
        try:
            return self._call_once(
                eks, progress, now=now, call="UpdateClusterVersion", tok=tok,
                match=("VersionUpdate", "Version", version), which={}, what=what,
                busy=lambda: aws_call("DescribeCluster", eks.control_plane).get("status") == "UPDATING",
                send=lambda: aws_call(
                    "UpdateClusterVersion", _update_control_plane, eks=eks, version=version, token=tok,
                    force=force,
                ),
                audit=f"{progress['eks']} {progress['from']} → {version}",
            )  # fmt: skip
        except ReadinessBlock as blocked:
            return self._insights_refused(eks, progress, blocked.reason, what)

    def _follow(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        version = progress["version"]
        update = aws_call("DescribeUpdate", eks.operation, operation_id=progress["update"])
        status = update.status
        seen = seen_version(cluster)
        new = {**progress, "status": status, "seen": seen}
        if status in ("Failed", "Cancelled"):
            return self._failed(new, update, what)
        card: tuple[str, ...] = (
            self._head(progress, status, what, now),
            f"API server /version: {seen or '?'}",
        )
        if status == "Successful" and reports(seen, parse_version(version)):
            text = f"{what}: EKS update {progress['update']} Successful and the API server reports {seen}"
            return self._end(new, text, ok=True, key=f"update-done:{progress['update']}")
        if self._timed_out(progress, now):
            return self._gave_up(new, what)
        if status == "Successful":
            card = (
                *card,
                f"EKS says Successful; waiting for /version to report {version}{_elsewhere(seen, version)}",
            )
        return Tick(progress=new, card=card, wait=POLL_SECONDS)

    def _insights_refused(self, eks: EksActs, progress: Progress, reason: str, what: str) -> Tick:
        """EKS refused the update over its upgrade insights: name the ones in ERROR and ask people."""
        version = progress["version"]
        insights = [
            i
            for i in aws_call("ListInsights", eks.upgrade_insights, kubernetes_version=version)
            if i.status == "ERROR"
        ]
        names = (
            few([f"{i.name} ({i.reason.rstrip('.')})" if i.reason else i.name for i in insights], 5)
            or "none listed"
        )
        # What they name: the removed APIs still called and by whom, the add-ons out of step.
        listed = [clip(u, 200) for i in insights for u in i.uses]
        uses = "; ".join(listed[:5]) + (f"; +{len(listed) - 5} more" if len(listed) > 5 else "")
        named = f" They name: {uses}." if uses else ""
        n = int(progress.get("refused", 0)) + 1
        text = (
            f"{what}: EKS refused UpdateClusterVersion — {clip(reason, 300)} Insights in ERROR for {version}: "
            f"{names}.{named}"
        )
        choice = Choice(
            key=f"{INSIGHTS}:{version}:{n}",
            question=(
                f"{what}: EKS refused UpdateClusterVersion over its upgrade insights in ERROR for {version}: "
                f"{names}.{named} Update with force? EKS then skips these readiness checks, and what they "
                f"name breaks after the update (APIs removed in {version} still in use, add-ons or kubelets "
                f"out of skew); `/upgrade check --to {version}` lists each finding with its objects "
                "(EKS010). One person asks with a reason; a second person confirms with theirs."
            ),
            options=(
                ChoiceOption(id=FORCE, label="Update with force…", needs_reason=True),
                STOP_OPTION,
            ),
        )
        return Tick(
            progress={**progress, "refused": n, "insights": [i.name for i in insights], "blocked": text},
            # Not broadcast: the question that follows at once is.
            posts=(Post(key=f"insights-refused:{version}:{n}", text=text),),
            audit=(("UpdateClusterVersion refused", text),),
            card=(text, "waiting for people: update with force (two people) or stop (see the thread)"),
            choice=choice,
            wait=POLL_SECONDS,
        )

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """People answered the insights' question: stop; or one asked for force and a second
        person must confirm; or the second confirmed, and the next tick calls with force."""
        if not decision.choice_key.startswith(f"{INSIGHTS}:"):
            return None
        version = progress["version"]
        names = few(list(progress.get("insights") or []), 5) or "none listed"
        n = progress.get("refused", 1)
        question = self._second_person(
            progress, decision, what=what, yes=FORCE, not_done="not forced", asked_key="force_asked",
            asks=f"update with force past the upgrade insights in ERROR ({names})", confirm="Confirm update with force",
            key=f"{INSIGHTS}:{version}:{n}", post=f"force-asked:{version}:{n}",
        )  # fmt: skip
        if question is not None:
            return question
        new = {**progress, "force": True, "update": "", "status": "", "started": iso(now)}
        return self._confirmed(
            progress, decision, asked_key="force_asked", new=new, key=f"forced:{version}",
            chosen=f"{what}: update with force past the upgrade insights in ERROR ({names})",
            said="force chosen",
        )  # fmt: skip


def _subnets_line(eks: EksActs, group: Mapping[str, Any]) -> list[str]:
    """The gate's line on the group's subnets: the free addresses in each, and a warning when
    they cannot hold EKS's surge (up to twice as many new nodes as the group has zones, each with
    an address, and with the VPC CNI its pods' too)."""
    ids = [str(i) for i in group.get("subnets") or ()]
    if not ids:
        return []
    subnets = aws_call("DescribeSubnets", eks.capacity, subnet_ids=ids)
    free = sum(s.free for s in subnets)
    surge = 2 * len({s.zone for s in subnets} or {""})
    text = "its subnets now: " + few([f"{s.id} ({s.zone}) {s.free} free" for s in subnets], 4)
    if free < surge:
        text = (
            f":warning: {text} — {free} address(es) for a surge of up to {surge} new node(s): EKS cannot "
            "launch them (the update fails with NodeCreationFailure); free addresses first"
        )
    return [text]


def _elsewhere(seen: str, version: str) -> str:
    """What a /version past the target says: the kubeconfig reaches another cluster."""
    mine, target = parse_version(seen), parse_version(version)
    if mine is None or target is None or mine[: len(target)] <= target:
        return ""
    return f" (it reports {seen}, past it: is this cluster's kubeconfig the EKS cluster that was updated?)"


def _clock(created: str) -> str:
    """An update's ISO-8601 creation time as "14:02 UTC" ("?" when EKS gave none)."""
    moment = parse_iso(created)
    return f"{moment.astimezone(UTC):%H:%M} UTC" if moment is not None else "?"


def _update_control_plane(*, eks: EksActs, version: str, token: str, force: bool) -> Operation:
    """UpdateClusterVersion; its refusal over upgrade insights is raised as `ReadinessBlock` (a
    question for people, not the job's end), unless force was already chosen."""
    try:
        return eks.update_control_plane(version, token=token, force=force)
    except ProviderError as exc:
        if exc.code == INSIGHTS_REFUSAL and not force:
            raise ReadinessBlock(_reason(exc).removeprefix(f"{INSIGHTS_REFUSAL}: ")) from None
        raise


class EksUpdateNodegroupJob(_EksJob):
    """`eks-update-nodegroup`: see the module docstring."""

    kind = "eks-update-nodegroup"
    pool_arg, pool_word, pools_word, pool_name_key = "nodegroup", "node group", "node groups", "nodegroupName"
    get_pool_call, list_pools_call = "DescribeNodegroup", "ListNodegroups"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        group = label_value("nodegroup", str(args.get("nodegroup", "")).strip())
        version = minor_arg(args, required=False)
        timeout = duration_arg(args, "timeout", NODEGROUP_TIMEOUT)
        eks = self.client(cluster)
        found = self._pool_named(eks, group)
        target = version or str(aws_call("DescribeCluster", eks.control_plane).get("version", ""))
        return {
            "what": "nodegroup",
            "eks": eks.name,
            "nodegroup": group,
            "version": version,
            "target": target,
            "from": str(found.get("version", "")),
            "release": str(found.get("releaseVersion", "")),
            "force": flag(args, "force"),
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "update": "",
            "status": "",
            "tries": 0,
            "seen": {},
            "blocked": [],
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        eks = self.client(cluster)
        group = progress["nodegroup"]
        if progress.get("update"):
            return self._dry_run_following(cluster, eks, progress)
        now = self._pool_named(eks, group)
        nodes = self._nodes(cluster, group)
        counts = group_counts(nodes, progress["target"])
        if _updated_outside(now, progress):
            return [
                *_interrupted(progress),
                f"node group {group} is already on {progress['target']} (it was on {progress['from']} when the "
                f"step began: updated outside the bot; release {now.get('releaseVersion', '?')}, status "
                f"{now.get('status', '?')}): nothing will be called, the step succeeds as it starts",
                f"its nodes now: {counts['total']}, of which {counts['on_target']} Ready on {progress['target']}",
            ]
        call = (
            f"would call eks:UpdateNodegroupVersion clusterName={progress['eks']} nodegroupName={group} "
            + (f"version={progress['version']} " if progress["version"] else "")
            + f"force={'true' if progress['force'] else 'false'} clientRequestToken=(the run's and the job's ids)"
        )
        lines = [
            *_interrupted(progress),
            call,
            *(
                [
                    f":warning: node group {group} is already on {progress['target']}: the call only moves it to "
                    f"the newest AMI release of {progress['target']} (it is on {now.get('releaseVersion', '?')}), "
                    "and EKS replaces every node of it again. Reject the gate if it was upgraded by hand"
                ]
                if _already(now, progress)
                else []
            ),
            f"DescribeNodegroup now: version {now.get('version', '?')}, release {now.get('releaseVersion', '?')}, "
            f"status {now.get('status', '?')}, {(now.get('scalingConfig') or {}).get('desiredSize', '?')} desired",
            f"its nodes now: {counts['total']}, of which {counts['on_target']} Ready on {progress['target']}",
        ]
        control = str(aws_call("DescribeCluster", eks.control_plane).get("version", ""))
        ahead, under = parse_version(progress["target"]), parse_version(control)
        if ahead is not None and under is not None and ahead[:2] > under[:2]:
            lines.insert(
                len(_interrupted(progress)) + 1,
                f":warning: the control plane is on {control}: EKS refuses a node group newer than it "
                "(InvalidParameterException); update the control plane first",
            )
        lines += _subnets_line(eks, now)
        lines += budgets_line(
            cluster,
            nodes,
            "with force=true EKS deletes such pods after 15 minutes"
            if progress["force"]
            else "EKS retries their eviction for 15 minutes, then the update fails (PodEvictionFailure) and the bot asks people",
        )
        lines.append(
            f"then eks:DescribeUpdate every {POLL_SECONDS:g} s while EKS launches new nodes and drains the old ones "
            f"(up to {timeout_span(progress)})"
        )
        return lines

    def _updated_outside(self, found: Mapping[str, Any], progress: Progress, group: str) -> Tick | None:
        """Done, nothing called, when the group (`found`, read now) was updated outside the bot (in the
        console, by hand) after the step began, since a call would roll every node of it again. A group
        already on the target when the step began is the plan's AMI refresh (the call moves it to the
        newest release of its version); its gate says so. None: call."""
        if progress.get(INTENT) or progress["tries"] or minor(progress["from"]) == minor(progress["target"]):
            return None
        if not _updated_outside(found, progress):
            return None
        return self._nothing_to_do(
            progress,
            f"node group {group} is already on {progress['target']} (it was on {progress['from']} when the step "
            "began: updated outside the bot): nothing to update, UpdateNodegroupVersion not called",
        )

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """The answer to the question after a PodEvictionFailure: stop, or update again with force."""
        if decision.option == STOP:
            # EKS's reason and where the group stands stay with the step's failure.
            failed = str(progress.get("failed") or "EKS failed the update")
            seen = progress.get("seen") or {}
            stands = (
                f"; {seen.get('on_target', 0)}/{seen.get('total', 0)} node(s) Ready on {progress['target']}, "
                f"the others still on {progress['from']}"
                if isinstance(seen, Mapping) and seen.get("total")
                else ""
            )
            text = f"{what}: {failed}; stopped by {decision.by} (not forced){stands}"
            return Tick(progress=progress, card=(text,), done=True, ok=False, detail=text, wait=0.0)
        if decision.option == FORCE:
            # People chose force: a NEW update, its own token (stored before it is called: the rule).
            new = {
                **progress,
                "force": True,
                "update": "",
                "status": "",
                "tries": int(progress["tries"]) + 1,
                "started": iso(now),
            }
            text = f"{what}: {decision.by} chose to update again with force ({decision.reason or 'no reason given'})"
            return Tick(
                progress=new,
                posts=(
                    Post(
                        key=f"forced:{progress['nodegroup']}:{new['tries']}", text=text, people=(decision.by,)
                    ),
                ),
                audit=(("force chosen", text),),
                card=(text,),
                wait=0.0,
            )
        return None

    def _call(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        group = progress["nodegroup"]
        # Read before the call: a group removed since the step began is said by name.
        found = self._pool_named(eks, group)
        outside = self._updated_outside(found, progress, group)
        if outside is not None:
            return outside
        tok = token(progress, f"-{progress['tries']}" if progress["tries"] else "")
        return self._call_once(
            eks, progress, now=now, call="UpdateNodegroupVersion", tok=tok,
            match=("VersionUpdate", "Version", minor(progress["target"])),
            which={"node_pool": group}, what=what,
            busy=lambda: found.get("status") == "UPDATING",
            send=lambda: aws_call(
                "UpdateNodegroupVersion", eks.update_node_pool, pool=group, version=progress["version"],
                strategy=PoolStrategy(kind="surge", force=bool(progress["force"])), token=tok,
            ),
            audit=f"{progress['eks']}/{group} → {progress['target']} force={progress['force']}",
            said=" with force" if progress["force"] else "",
            then="; EKS launches new nodes, then drains the old ones",
        )  # fmt: skip

    def _follow(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        group = progress["nodegroup"]
        update = aws_call("DescribeUpdate", eks.operation, operation_id=progress["update"], node_pool=group)
        status = update.status
        nodes = self._nodes(cluster, group)
        counts = group_counts(nodes, progress["target"])
        new = {**progress, "status": status, "seen": counts}
        posts: list[Post] = []
        blocked = list(progress.get("blocked") or [])
        if status == "InProgress":
            for b in blocking_budgets(cluster, nodes, only_cordoned=True):
                key = f"{b['pdb']}:{b['node']}"
                if key in blocked:
                    continue
                blocked.append(key)
                posts.append(
                    Post(
                        key=f"pdb-blocked:{progress['update']}:{key}",
                        text=f"{what}: disruption budget {b['pdb']} allows no disruption and holds {b['pod']} on "
                        f"old node {b['node']}; EKS retries the eviction"
                        + (
                            " and, with force, deletes the pod after 15 minutes"
                            if progress["force"]
                            else " for 15 minutes, then fails the update (PodEvictionFailure)"
                        ),
                    )
                )
            new["blocked"] = blocked
        card = [self._head(progress, status, what, now), pool_bar(counts, progress["target"])]
        if blocked and status == "InProgress":
            card.append(f"evictions blocked by {len(blocked)} budget(s): see the thread")
        if status == "Successful":
            text = f"{what}: EKS update {progress['update']} Successful — {counts['on_target']}/{counts['total']} node(s) Ready on {progress['target']}"
            return self._end(new, text, ok=True, key=f"update-done:{progress['update']}", posts=posts)
        if status in ("Failed", "Cancelled"):
            why = update_errors(update.errors)
            if "PodEvictionFailure" in why and not progress["force"]:
                choice = Choice(
                    key=f"force:{progress['update']}",
                    question=(
                        f"{what}: EKS failed update {progress['update']}: {clip(why, 300)}. Update again with "
                        "force? EKS then deletes the pods their disruption budgets protect, after 15 minutes."
                    ),
                    options=(
                        ChoiceOption(id=FORCE, label="Update again with force", needs_reason=True),
                        STOP_OPTION,
                    ),
                )
                text = f"{what}: EKS update {progress['update']} Failed — {why}"
                return Tick(
                    progress={**new, "failed": f"EKS update {progress['update']} Failed — {clip(why, 300)}"},
                    # Not broadcast: the question that follows at once is.
                    posts=(*posts, Post(key=f"update-failed:{progress['update']}", text=text)),
                    card=(
                        text,
                        pool_bar(counts, progress["target"]),
                        "waiting for people: force or stop (see the thread)",
                    ),
                    choice=choice,
                    wait=POLL_SECONDS,
                )
            return self._failed(new, update, what)
        if self._timed_out(progress, now):
            return self._gave_up(new, what)
        return Tick(progress=new, posts=tuple(posts), card=tuple(card), wait=POLL_SECONDS)


class EksUpdateAddonJob(_EksJob):
    """`eks-update-addon`: see the module docstring."""

    kind = "eks-update-addon"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        addon = addon_arg(args)
        version = addon_version_arg(args)
        policy = conflicts_arg(args)
        timeout = duration_arg(args, "timeout", ADDON_TIMEOUT)
        eks = self.client(cluster)
        found = aws_call("DescribeAddon", eks.addon, name=addon)
        return {
            "what": "addon",
            "eks": eks.name,
            "addon": addon,
            "version": version,
            "from": str(found.get("addonVersion", "")),
            "resolve_conflicts": policy,
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "update": "",
            "status": "",
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        eks = self.client(cluster)
        if progress.get("update"):
            return self._following(eks, progress)
        now = aws_call("DescribeAddon", eks.addon, name=progress["addon"])
        policy = progress["resolve_conflicts"]
        lines = [
            *_interrupted(progress),
            f"would call eks:UpdateAddon clusterName={progress['eks']} addonName={progress['addon']} "
            f"addonVersion={progress['version']} resolveConflicts={policy} clientRequestToken=(the run's and the job's ids)",
            f"conflict policy {policy}: {CONFLICT_POLICIES[policy]}",
            f"DescribeAddon now: {now.get('addonVersion', '?')}, status {now.get('status', '?')}"
            + (f", health: {clip(update_errors(_issues(now)), 200)}" if _issues(now) else ""),
            f"then eks:DescribeUpdate every {POLL_SECONDS:g} s until the add-on is on {progress['version']} "
            f"(up to {timeout_span(progress)})",
        ]
        if now.get("addonVersion") == progress["version"]:
            lines.insert(1, f"{progress['addon']} is already on {progress['version']}: nothing to update")
        return lines

    def _what(self, progress: Progress) -> str:
        return f"add-on {progress['addon']} {progress['from']} → {progress['version']}"

    def _call(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        addon, version = progress["addon"], progress["version"]
        if progress["from"] == version:
            return self._nothing_to_do(progress, f"add-on {addon} is already on {version}: nothing to update")
        tries = int(progress.get("tries", 0))
        tok = token(progress, f"-{tries}" if tries else "")
        return self._call_once(
            eks, progress, now=now, call="UpdateAddon", tok=tok,
            match=("AddonUpdate", "AddonVersion", version), which={"addon": addon}, what=what,
            send=lambda: aws_call(
                "UpdateAddon", eks.update_addon_version, addon=addon, version=version,
                conflicts=progress["resolve_conflicts"], token=tok,
            ),
            audit=f"{progress['eks']}/{addon} → {version} resolveConflicts={progress['resolve_conflicts']}",
            said=f" (conflicts: {progress['resolve_conflicts']})",
        )  # fmt: skip

    def _follow(
        self, cluster: JobCluster, eks: EksActs, progress: Progress, *, now: datetime, what: str
    ) -> Tick:
        addon, version = progress["addon"], progress["version"]
        update = aws_call("DescribeUpdate", eks.operation, operation_id=progress["update"], addon=addon)
        status = update.status
        new = {**progress, "status": status}
        if status == "Failed" and any(e.code == "ConfigurationConflict" for e in update.errors):
            asked = self._conflict(new, update, what)
            if asked is not None:
                return asked
        if status in ("Failed", "Cancelled"):
            return self._failed(new, update, what)
        if status == "Successful":
            found = aws_call("DescribeAddon", eks.addon, name=addon)
            if found.get("addonVersion") == version:
                text = (
                    f"{what}: EKS update {progress['update']} Successful, add-on {found.get('status', '?')}"
                )
                return self._end(new, text, ok=True, key=f"update-done:{progress['update']}")
        if self._timed_out(progress, now):
            return self._gave_up(new, what)
        card = (self._head(progress, status, what, now),)
        return Tick(progress=new, card=card, wait=POLL_SECONDS)

    def _conflict(self, progress: Progress, update: Operation, what: str) -> Tick | None:
        """EKS failed the update on a conflict with changes made by hand: ask people which policy
        to update again with (those not yet tried), or to stop. None when none is left."""
        tried = progress["resolve_conflicts"]
        offered = [(option, policy) for option, policy in RETRY_WITH.items() if policy != tried]
        if tried == "OVERWRITE" or not offered:
            return None
        why = update_errors(update.errors)
        meaning = "".join(f"\n• Retry with {policy}: {CONFLICT_POLICIES[policy]}." for _, policy in offered)
        choice = Choice(
            key=f"{CONFLICT}:{progress['update']}",
            question=(
                f"{what}: EKS failed update {progress['update']} with resolveConflicts={tried}: "
                f"{clip(why, 300).rstrip('.')}. "
                f"Someone changed the add-on's objects outside EKS. Update again with another policy, or stop?"
                f"{meaning}"
            ),
            options=(
                *(
                    ChoiceOption(id=option, label=f"Retry with {policy}", needs_reason=True)
                    for option, policy in offered
                ),
                STOP_OPTION,
            ),
        )
        text = f"{what}: EKS update {progress['update']} {update.status} — {why}"
        return Tick(
            progress={**progress, "conflict": text},
            # Not broadcast: the question that follows at once is.
            posts=(Post(key=f"update-failed:{progress['update']}", text=text),),
            card=(text, "waiting for people: retry with another conflict policy, or stop (see the thread)"),
            choice=choice,
            wait=POLL_SECONDS,
        )

    def _answered(self, progress: Progress, decision: Decision, what: str, *, now: datetime) -> Tick | None:
        """People answered the conflict: a new update with the policy they chose (its own token,
        stored before it is called: the rule), or the step fails with EKS's reason."""
        if not decision.choice_key.startswith(f"{CONFLICT}:"):
            return None
        failed = str(progress.get("conflict") or f"{what}: EKS update {progress['update']} Failed")
        policy = RETRY_WITH.get(decision.option)
        if policy is None:
            tried = str(progress.get("resolve_conflicts") or "NONE")
            text = f"{failed.rstrip('.')}; stopped by {decision.by}, " + (
                f"after the update with {tried} failed too"
                if tried != "NONE"
                else "neither OVERWRITE nor PRESERVE chosen"
            )
            return self._stopped(progress, text)
        tries = int(progress.get("tries", 0)) + 1
        new = {
            **progress,
            "resolve_conflicts": policy,
            "update": "",
            "status": "",
            "tries": tries,
            "started": iso(now),
        }
        text = (
            f"{what}: {decision.by} chose to update again with resolveConflicts={policy} "
            f"({decision.reason or 'no reason given'}): {CONFLICT_POLICIES[policy]}"
        )
        return Tick(
            progress=new,
            posts=(
                Post(key=f"conflict-policy:{progress['addon']}:{tries}", text=text, people=(decision.by,)),
            ),
            audit=(("conflict policy chosen", text),),
            card=(text,),
            wait=0.0,
        )


def _issues(addon: Mapping[str, Any]) -> list[OperationError]:
    return [
        OperationError(code=str(i.get("code", "?")), message=str(i.get("message", "")))
        for i in (addon.get("health") or {}).get("issues") or []
    ]
