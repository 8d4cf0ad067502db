"""The `restart` job: `kubectl rollout restart` for Deployments, DaemonSets and StatefulSets, then
wait for each rollout's verdict — and stop early when the new pods crash-loop or cannot pull their
image, which `kubectl rollout status` never does (it waits for the progress deadline).

Arguments: `workloads` (comma-separated `deployment/NS/NAME`, `daemonset/NS/NAME`,
`statefulset/NS/NAME`), or `namespace` / `namespaces` (comma-separated) with optional `selector`
(a label selector) and `kinds` (comma-separated, default all three); `timeout` (default 15m),
`crashloop_after` and `imagepull_after` (default 5m each, as a watch's StopRules).

`namespaces=from-check:ISTIO001` takes the namespaces from the check instead of a fixed list: when
the job is planned (the gate's dry run, then the approved run) it reads the cluster as the
pre-flight check does and restarts every namespace whose pods run an istio-proxy that differs from
istiod's — exactly those ISTIO001 flags (`bot.core.checks.preflight.stale_sidecar_namespaces`). The
resolved namespaces are kept in the progress (`"resolved"`), so the dry run, the thread and a
resumed job name the same ones.

Progress (JSON):

    {"started": "2026-11-24T07:00:00Z", "timeout": 900, "crashloop_after": 300, "imagepull_after": 300,
     "resolved": {"from": "ISTIO001", "namespaces": ["checkout", "payments"]},   # namespaces=from-check:…
     "workloads": [{"kind": "deployment", "namespace": "shop", "name": "web",
                    "stamp": "2026-11-24T07:00:00Z",          # chosen at plan, BEFORE the patch
                    "state": "pending|rolling|done|failed|refused",
                    "generation": 7,                           # the patched generation
                    "verdict": "1 of 2 new replicas have been updated",
                    "bad": {"CrashLoopBackOff": "2026-11-24T07:01:00Z"}}]}   # first seen, per class

Never twice: the stamp is in the stored progress before any patch; a pending workload whose
template already carries `kubectl.kubernetes.io/restartedAt` = stamp was patched (by a run that
crashed before storing) and is not patched again. A paused Deployment is refused (kubectl refuses
it too), with a line; the others go on, and the job ends not ok.

The job is done when every workload's rollout verdict is "done" (ok) or one is failed, refused,
crash-looping / image-pull failing longer than the limit, or past the timeout (not ok).

Why it failed: with the known-issue rules given (`rules=`), a failing workload's pods (and the
Warning events about them) are matched against them (`bot.core.jobs.explain`), and its failure line
names each matching rule with its remedy — "rollout failed: deployment "payments-worker" exceeded
its progress deadline — KI004 Vault-injected pod …: kubectl … logs POD -c vault-agent …"; the job's
detail names the rule too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    JobCluster,
    bar,
    duration_arg,
    few,
    iso,
    names_arg,
    selector_query,
    timer_start,
)
from bot.core.jobs.explain import explain, named, warning_events
from bot.core.kube.objects import (
    CRASHLOOP,
    CRASHLOOP_FAILS_AFTER,
    IMAGEPULL,
    IMAGEPULL_FAILS_AFTER,
    classify,
    parse_iso,
    workload_of,
)
from bot.core.kube.wire import WPod
from bot.core.rollout import DONE, FAILED, verdict
from bot.core.rules import Rule, RuleHit
from bot.decoders import convert
from bot.errors import ClusterError, RolloutRefused, UserError

DEFAULT_TIMEOUT = timedelta(minutes=15)
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
KINDS = {"deployment": "Deployment", "daemonset": "DaemonSet", "statefulset": "StatefulSet"}
RESOURCES = {"deployment": "deployments", "daemonset": "daemonsets", "statefulset": "statefulsets"}
_FINAL = frozenset({"done", "failed", "refused"})
#: `namespaces=from-check:ID`: the findings whose namespaces a restart can take.
FROM_CHECK = "from-check:"
CHECK_SOURCES = ("ISTIO001",)


def check_scope(args: Mapping[str, str]) -> None:
    """Exactly one of workloads, namespace, namespaces; a `from-check:` source this job knows."""
    given = [k for k in ("workloads", "namespace", "namespaces") if str(args.get(k, "")).strip()]
    if len(given) != 1:
        raise UserError(
            "name the workloads: either workloads (kind/namespace/name, …), namespace or namespaces"
        )
    source = str(args.get("namespaces", "")).strip()
    if source.startswith(FROM_CHECK) and source[len(FROM_CHECK) :].strip() not in CHECK_SOURCES:
        raise UserError(
            f"namespaces: {source[:40]!r} — the check's namespaces come from {', '.join(FROM_CHECK + c for c in CHECK_SOURCES)}"
        )


def check_namespaces(cluster: JobCluster, finding: str) -> list[str]:
    """The namespaces `finding` flags now, read as the pre-flight check reads them."""
    from bot.core.checks.gather import CheckReader, read_facts
    from bot.core.checks.preflight import stale_sidecar_namespaces

    assert finding == "ISTIO001"
    facts = read_facts(cast(CheckReader, cluster)).facts
    if not facts.istiod:
        raise UserError("namespaces from ISTIO001: no istiod Deployment found, so no sidecar can lag it")
    return stale_sidecar_namespaces(facts)


def workload_path(kind: str, namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/{RESOURCES[kind]}/{name}"


def wkey(entry: Mapping[str, Any]) -> str:
    return f"{entry['kind']}/{entry['namespace']}/{entry['name']}"


class RestartJob:
    """`restart`: see the module docstring."""

    kind = "restart"
    #: How the card and the step's detail say a workload was acted on.
    done_word = "restarted"

    def __init__(self, rules: Sequence[Rule] = ()) -> None:
        self.rules = tuple(rules)

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        timeout = duration_arg(args, "timeout", DEFAULT_TIMEOUT)
        crash = duration_arg(args, "crashloop_after", CRASHLOOP_FAILS_AFTER)
        pull = duration_arg(args, "imagepull_after", IMAGEPULL_FAILS_AFTER)
        check_scope(args)
        named = names_arg(args, "workloads")
        namespaces = (
            [str(args.get("namespace", "")).strip()] if str(args.get("namespace", "")).strip() else []
        )
        source = str(args.get("namespaces", "")).strip()
        resolved: dict[str, Any] | None = None
        if source.startswith(FROM_CHECK):
            finding = source[len(FROM_CHECK) :].strip()
            namespaces = check_namespaces(cluster, finding)
            if not namespaces:
                raise UserError(
                    f"{finding} flags no namespace now (no sidecar lags istiod): nothing to restart"
                )
            resolved = {"from": finding, "namespaces": namespaces}
        elif source:
            namespaces = list(dict.fromkeys(names_arg(args, "namespaces")))
        found: list[tuple[str, str, str]] = []
        if named:
            for text in named:
                parts = text.split("/")
                if len(parts) != 3 or parts[0].lower() not in KINDS or not all(parts):
                    raise UserError(
                        f"workloads: {text[:60]!r} is not like deployment/NS/NAME, daemonset/NS/NAME or statefulset/NS/NAME"
                    )
                kind, ns, name = parts[0].lower(), parts[1], parts[2]
                try:
                    cluster.get_json(workload_path(kind, ns, name))
                except ClusterError as exc:
                    if exc.status == 404:
                        raise UserError(f"no such workload: {kind}/{ns}/{name}") from None
                    raise
                found.append((kind, ns, name))
        else:
            kinds = [k.lower() for k in names_arg(args, "kinds")] or list(KINDS)
            unknown = [k for k in kinds if k not in KINDS]
            if unknown:
                raise UserError(f"kinds: {', '.join(unknown)} — expected deployment, daemonset, statefulset")
            query = (
                {"labelSelector": str(args["selector"]).strip()}
                if str(args.get("selector", "")).strip()
                else None
            )
            for namespace in namespaces:
                before = len(found)
                for kind in kinds:
                    listed = cluster.get_json(
                        f"/apis/apps/v1/namespaces/{namespace}/{RESOURCES[kind]}", query
                    )
                    for item in sorted(listed.get("items") or [], key=lambda i: str(i["metadata"]["name"])):
                        found.append((kind, namespace, str(item["metadata"]["name"])))
                if len(found) == before:
                    raise UserError(
                        f"no {'/'.join(kinds)} in namespace {namespace} matches: nothing to restart"
                    )
        stamp = iso(now)
        extra: dict[str, Any] = {"resolved": resolved} if resolved else {}
        return {
            **extra,
            "started": stamp,
            "timeout": timeout.total_seconds(),
            "crashloop_after": crash.total_seconds(),
            "imagepull_after": pull.total_seconds(),
            "workloads": [
                {"kind": k, "namespace": ns, "name": n, "stamp": stamp, "state": "pending",
                 "generation": 0, "verdict": "", "bad": {}}
                for k, ns, n in found
            ],
        }  # fmt: skip

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        lines = []
        resolved = progress.get("resolved")
        if resolved:
            lines.append(f"namespaces from {resolved['from']}: {', '.join(resolved['namespaces'])}")
        for entry in progress["workloads"]:
            key = wkey(entry)
            # Read first: a rollout this step would follow needs no dry-run patch.
            live = live_workload(cluster, dict(entry), [])
            hand = _by_hand(live, entry) if live is not None else None
            if hand:
                lines.append(
                    f"would NOT restart {key}: restarted at {hand}, not by this step, and its rollout is "
                    "recent; that rollout is followed instead"
                )
                continue
            try:
                cluster.restart_workload(
                    entry["kind"], entry["namespace"], entry["name"], at=_at(entry["stamp"]), dry_run=True
                )
            except RolloutRefused:
                lines.append(f"would REFUSE to restart {key}: the deployment is paused")
                continue
            lines.append(
                f"would restart {key}: pod template restartedAt = {entry['stamp']}, every pod replaced"
            )
        return lines

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        workloads = [{**w, "bad": dict(w.get("bad") or {})} for w in progress["workloads"]]
        posts: list[Post] = []
        audit: list[tuple[str, str]] = []
        started = timer_start(progress, progress["started"], now)
        limits = {
            CRASHLOOP: timedelta(seconds=float(progress["crashloop_after"])),
            IMAGEPULL: timedelta(seconds=float(progress["imagepull_after"])),
        }
        for entry in workloads:
            if entry["state"] == "pending":
                self._stamp(cluster, entry, posts, audit)
            elif entry["state"] == "rolling":
                self._follow(cluster, entry, now, limits, posts)
        timed_out = now - started >= timedelta(seconds=float(progress["timeout"]))
        if timed_out:
            for entry in workloads:
                if entry["state"] not in _FINAL:
                    key = wkey(entry)
                    entry["state"] = "failed"
                    hits = self._explain(cluster, entry, None)
                    last = entry["verdict"] or "not rolled out"
                    entry["verdict"] = f"timeout: {last}{named(hits, remedy=False)}"
                    posts.append(
                        Post(
                            key=f"rollout-failed:{key}",
                            text=f"{key}: not rolled out within the timeout ({last}){named(hits)}",
                        )
                    )
        new: Progress = {**progress, "workloads": workloads}
        done = all(w["state"] in _FINAL for w in workloads)
        # One failing workload stops the job: people decide; the rest keep their stamp.
        failed = [w for w in workloads if w["state"] in ("failed", "refused")]
        if failed:
            for entry in workloads:
                if entry["state"] not in _FINAL:
                    entry["state"] = "failed"
                    entry["verdict"] = f"stopped: {wkey(failed[0])} failed"
            done = True
        finished = sum(1 for w in workloads if w["state"] == "done")
        card = [bar(finished, len(workloads), f"workloads {self.done_word}")]
        rolling = [w for w in workloads if w["state"] == "rolling"]
        for entry in rolling[:3]:
            card.append(f"{wkey(entry)}: {entry['verdict'] or 'restarting'}")
        if len(rolling) > 3:
            card.append(f"+{len(rolling) - 3} more rolling")
        if failed:
            card.append("failed: " + few([wkey(w) for w in failed]))
        detail = ""
        if done:
            detail = (
                f"{len(failed)} workload(s) failed: "
                + "; ".join(f"{wkey(w)} ({w['verdict']})" for w in failed[:3])
                if failed
                else f"{finished} workload(s) {self.done_word} and rolled out"
            )
        return Tick(progress=new, posts=tuple(posts), audit=tuple(audit), card=tuple(card), done=done,
                    ok=not failed, detail=detail, wait=2.0)  # fmt: skip

    def _stamp(
        self, cluster: JobCluster, entry: dict[str, Any], posts: list[Post], audit: list[tuple[str, str]]
    ) -> None:
        key = wkey(entry)
        current = live_workload(cluster, entry, posts)
        if current is None:
            return
        annotations = ((current.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
            "annotations"
        ) or {}
        before = annotations.get(RESTARTED_AT)
        if before == entry["stamp"]:
            # Stamped by an earlier run of this tick that crashed before its progress was stored.
            entry["generation"] = int((current.get("metadata") or {}).get("generation") or 0)
        elif _by_hand(current, entry):
            # Someone restarted it (`kubectl rollout restart`) since this step began, or just before
            # and its rollout still runs: it replaces every pod already; a second restart would
            # replace them all again.
            entry["generation"] = int((current.get("metadata") or {}).get("generation") or 0)
            entry["state"] = "rolling"
            text = (
                f"{key} was restarted at {before}, not by this step, and its rollout is recent: following "
                "that rollout, not restarting it again"
            )
            audit.append(("restart", f"{key}: not restarted: restarted at {before}, not by this step"))
            posts.append(Post(key=f"restarted:{key}", text=text))
            return
        else:
            try:
                patched = cluster.restart_workload(
                    entry["kind"], entry["namespace"], entry["name"], at=_at(entry["stamp"])
                )
            except RolloutRefused:
                entry["state"] = "refused"
                entry["verdict"] = "paused: resume it before restarting"
                posts.append(
                    Post(
                        key=f"restart-refused:{key}", text=f"{key} is paused: not restarted (resume it first)"
                    )
                )
                return
            entry["generation"] = int((patched.get("metadata") or {}).get("generation") or 0)
            audit.append(("restart", f"{key}: restartedAt {before or 'unset'} → {entry['stamp']}"))
        entry["state"] = "rolling"
        posts.append(Post(key=f"restarted:{key}", text=f"{key} restarted (restartedAt {entry['stamp']})"))

    def _follow(
        self,
        cluster: JobCluster,
        entry: dict[str, Any],
        now: datetime,
        limits: Mapping[str, timedelta],
        posts: list[Post],
    ) -> None:
        key = wkey(entry)
        obj = live_workload(cluster, entry, posts)
        if obj is None:
            return
        observed = int((obj.get("status") or {}).get("observedGeneration") or 0)
        state, message = verdict(KINDS[entry["kind"]], obj)
        if observed < int(entry["generation"]) and state != FAILED:
            state, message = "waiting", "waiting for the restart to be observed"
        entry["verdict"] = message
        if state == DONE:
            entry["state"] = "done"
            entry["bad"] = {}
            posts.append(Post(key=f"rollout-done:{key}", text=f"{key}: {message}"))
            return
        if state == FAILED:
            entry["state"] = "failed"
            hits = self._explain(cluster, entry, obj)
            entry["verdict"] = message + named(hits, remedy=False)
            posts.append(
                Post(key=f"rollout-failed:{key}", text=f"{key}: rollout failed: {message}{named(hits)}")
            )
            return
        pods = self._pods(cluster, entry, obj)
        seen = _bad_classes(pods)
        bad: dict[str, str] = {}
        for cls, count in seen.items():
            since = parse_iso(entry["bad"].get(cls)) or now
            bad[cls] = iso(since)
            if now - since > limits[cls]:
                entry["state"] = "failed"
                word = "CrashLoopBackOff" if cls == CRASHLOOP else "ImagePullBackOff/ErrImagePull"
                stopped = f"{count} pod(s) in {word} for more than {int(limits[cls].total_seconds())} s"
                hits = self._explain(cluster, entry, obj, pods)
                entry["verdict"] = stopped + named(hits, remedy=False)
                posts.append(
                    Post(key=f"rollout-failed:{key}", text=f"{key}: stopped: {stopped}{named(hits)}")
                )
        entry["bad"] = bad

    def _pods(self, cluster: JobCluster, entry: Mapping[str, Any], obj: Mapping[str, Any]) -> list[WPod]:
        """The workload's pods (by its selector, then by owner)."""
        selector = (obj.get("spec") or {}).get("selector") or {}
        query = {"labelSelector": selector_query(selector)} if selector else None
        want = (KINDS[entry["kind"]], entry["name"])
        out = []
        for page in cluster.list_pages(f"/api/v1/namespaces/{entry['namespace']}/pods", query):
            for raw in page.items:
                pod = convert(raw, WPod)
                if workload_of(pod) == want:
                    out.append(pod)
        return out

    def _explain(
        self,
        cluster: JobCluster,
        entry: Mapping[str, Any],
        obj: Mapping[str, Any] | None,
        pods: list[WPod] | None = None,
    ) -> list[RuleHit]:
        """The known-issue rules that match the failing workload's pods and their Warning events."""
        if not self.rules:
            return []
        try:
            if obj is None:
                obj = cluster.get_json(workload_path(entry["kind"], entry["namespace"], entry["name"]))
            if pods is None:
                pods = self._pods(cluster, entry, obj)
        except ClusterError:
            return []  # the failure stands on its own; the rules are an explanation, not a condition
        events = warning_events(cluster, entry["namespace"], (p.metadata.name for p in pods))
        return explain(self.rules, pods, events)


def _bad_classes(pods: list[WPod]) -> dict[str, int]:
    """Pods of the workload crash-looping or failing to pull, counted per class."""
    counts: dict[str, int] = {}
    for pod in pods:
        found = classify(pod)
        if found is not None and found[0] in (CRASHLOOP, IMAGEPULL):
            counts[found[0]] = counts.get(found[0], 0) + 1
    return counts


def live_workload(
    cluster: JobCluster, entry: dict[str, Any], posts: list[Post], *, during: str = "while restarting"
) -> dict[str, Any] | None:
    """The live workload; None (and the workload failed, with a line: "… was deleted `during`")
    when it was deleted."""
    try:
        return cluster.get_json(workload_path(entry["kind"], entry["namespace"], entry["name"]))
    except ClusterError as exc:
        if exc.status != 404:
            raise
    entry["state"] = "failed"
    entry["verdict"] = f"deleted {during}"
    posts.append(Post(key=f"rollout-failed:{wkey(entry)}", text=f"{wkey(entry)} was deleted {during}"))
    return None


#: A restart by someone else this long before our stamp, whose rollout still runs, is followed
#: rather than repeated (people restart by hand at the gate, before approving).
RECENT_BY_HAND = timedelta(minutes=15)


def _by_hand(live: Mapping[str, Any], entry: Mapping[str, Any]) -> str | None:
    """The `restartedAt` of a restart this job did not make (by hand, or an earlier step's) that it
    follows instead of restarting again: one after our stamp (chosen when the job was planned), or
    one shortly before it whose rollout has not finished. None otherwise, and for a paused
    Deployment (which rolls nothing out)."""
    if (live.get("spec") or {}).get("paused"):
        return None  # a paused Deployment rolls nothing out: the restart refuses it, saying so
    annotations = ((live.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
        "annotations"
    ) or {}
    found = annotations.get(RESTARTED_AT)
    moment = parse_iso(found) if found and found != entry["stamp"] else None
    if moment is None:
        return None
    stamp = _at(entry["stamp"])
    if moment > stamp:
        return str(found)
    rolling = verdict(KINDS[entry["kind"]], live)[0] != DONE
    return str(found) if rolling and stamp - moment <= RECENT_BY_HAND else None


def _at(stamp: str) -> datetime:
    moment = parse_iso(stamp)
    if moment is None:  # pragma: no cover - the stamp is ours, written by `iso`
        raise ValueError(f"bad stamp {stamp!r}")
    return moment
