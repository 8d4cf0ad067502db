"""The `app-health` job (issue 39 item 3): `app-health: {namespaces?, selector?, timeout}` — every
Argo CD Application must be Healthy and Synced, every Flux Kustomization and HelmRelease Ready.
Read through the cluster's own API (the read role's get/list on the three resources); it writes
nothing.

- The baseline is what was unhealthy when the run's snapshot was taken (recorded with it:
  `bot.core.evidence.baseline`, `app_scope`), else when the job was planned; stored in its
  progress so a resumed job compares against the same set: those apps are reported, never
  blocking. An app broken by an earlier step of the run is therefore not excused by a later
  step's own reading. An app still Progressing (or a Flux object still reconciling) then is not
  in it: it must end healthy.
- An app that turns Degraded or Missing (Argo CD) or `Ready=False` (Flux) fails the step at once;
  one still Progressing, OutOfSync or `Ready=Unknown` at `timeout` fails it then. Each failure
  names the app and its own message.
- The step passes on the first reading where every app outside the baseline is healthy.
- No data never passes: an API server that does not answer, or refuses the read (401/403), or
  serves none of the three kinds, or a selection that matches no app at all, is Inconclusive: the
  job stops and asks people with the alerts job's pause (`evidence_inconclusive:app-health:N`):
  Wait (read again), Waive (with a reason), or Abort (the step fails).

Progress (JSON):

    {"started": "…", "timeout": 600, "namespaces": ["shop"], "selector": "",
     "baseline": {"Application argocd/legacy": "Degraded/Synced — Deployment legacy/batch: …"},
     "baseline_from": "2026-11-29T13:55:00Z",
     "inconclusive": 0, "seen": {"apps": 4, "healthy": 3, "baseline": 1}}
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.evidence.view import WAITING_ON_EVIDENCE
from bot.core.jobs.alerts import answered, no_data_choice
from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    MAX_SELECTOR,
    JobCluster,
    duration_arg,
    few,
    iso,
    names_arg,
    namespace_name,
    timer_start,
)
from bot.errors import ClusterError, EvidenceUnavailable, UserError, clip
from bot.records import ActionCall

DEFAULT_TIMEOUT = timedelta(minutes=10)
#: Seconds between readings.
POLL = 15.0
#: How many unhealthy apps a post or the card names before "+N more" (Slack's limits).
NAMED = 10

#: (kind as people say it, API path under /apis, resource) of what is read.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("Application", "argoproj.io/v1alpha1", "applications"),
    ("Kustomization", "kustomize.toolkit.fluxcd.io/v1", "kustomizations"),
    ("HelmRelease", "helm.toolkit.fluxcd.io/v2", "helmreleases"),
)

HEALTHY, WAITING, FAILED = "healthy", "waiting", "failed"
#: How an Unreadable reading that found no app at all begins.
NO_APP = "no Argo CD Application nor Flux object"


class Unreadable(Exception):
    """The apps could not be read: the reason is Inconclusive's."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class AppState:
    """One app as read now: `key` ("Application argocd/shop"), its state (HEALTHY, WAITING or
    FAILED) and what it says ("Degraded/Synced — Deployment shop/web: Progress deadline exceeded")."""

    key: str
    state: str
    says: str
    #: Still being rolled out or reconciled (Argo CD Progressing, Flux Ready=Unknown or an older
    #: observedGeneration): never part of the baseline, so it must still end healthy.
    progressing: bool = False


def check_args(args: Mapping[str, str]) -> None:
    duration_arg(args, "timeout", DEFAULT_TIMEOUT)
    for name in names_arg(args, "namespaces"):
        namespace_name("namespaces", name)
    if len(str(args.get("selector", ""))) > MAX_SELECTOR:
        raise UserError(f"selector: at most {MAX_SELECTOR} characters")


def judge(obj: Mapping[str, Any], kind: str) -> AppState:
    """An app's state from its status, as Argo CD and Flux write it."""
    meta = obj.get("metadata") or {}
    key = f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"
    status = obj.get("status") or {}
    if kind == "Application":
        health = str((status.get("health") or {}).get("status") or "Unknown")
        sync = str((status.get("sync") or {}).get("status") or "Unknown")
        message = str((status.get("health") or {}).get("message") or "")
        conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        if not message and conditions:
            message = str(conditions[0].get("message") or "")
        says = f"{health}/{sync}" + (f" — {clip(message, 200)}" if message else "")
        if health == "Healthy" and sync == "Synced":
            return AppState(key=key, state=HEALTHY, says=says)
        return AppState(
            key=key,
            state=FAILED if health in ("Degraded", "Missing") else WAITING,
            says=says,
            progressing=health == "Progressing",
        )
    ready = next(
        (c for c in status.get("conditions") or [] if isinstance(c, Mapping) and c.get("type") == "Ready"),
        None,
    )
    if (obj.get("spec") or {}).get("suspend"):
        # Suspended on purpose (flux-suspend): its Ready condition is stale, not a failure.
        return AppState(key=key, state=HEALTHY, says="suspended")
    if ready is None:
        return AppState(key=key, state=WAITING, says="no Ready condition yet", progressing=True)
    says = f"Ready={ready.get('status')} {ready.get('reason') or ''}".rstrip()
    if ready.get("message"):
        says += f" — {clip(str(ready['message']), 200)}"
    generation = int(meta.get("generation") or 0)
    observed = int(status.get("observedGeneration") or ready.get("observedGeneration") or 0)
    if ready.get("status") == "True" and (not generation or not observed or observed >= generation):
        return AppState(key=key, state=HEALTHY, says=says)
    if ready.get("status") == "False":
        return AppState(key=key, state=FAILED, says=says)
    return AppState(key=key, state=WAITING, says=says, progressing=True)


def read_apps(cluster: JobCluster, namespaces: list[str], selector: str) -> list[AppState]:
    """Every app the selection names, or Unreadable with the reason."""
    query = {"labelSelector": selector} if selector else None
    found: list[AppState] = []
    served = 0
    for kind, group_version, resource in KINDS:
        paths = (
            [f"/apis/{group_version}/namespaces/{ns}/{resource}" for ns in namespaces]
            if namespaces
            else [f"/apis/{group_version}/{resource}"]
        )
        try:
            for path in paths:
                for page in cluster.list_pages(path, query):
                    found.extend(judge(item, kind) for item in page.items)
            served += 1
        except ClusterError as exc:
            if exc.status == 404:
                continue  # that controller's CRD is not installed on this cluster
            raise Unreadable(f"{resource}.{group_version.split('/')[0]}: {exc.user_message}") from None
    if not served:
        raise Unreadable("the cluster serves no Argo CD Application nor Flux Kustomization/HelmRelease")
    if not found:
        where = f" in {', '.join(namespaces)}" if namespaces else ""
        raise Unreadable(f"{NO_APP}{where}" + (f" matches {selector}" if selector else ""))
    return sorted(found, key=lambda a: a.key)


def app_scope(calls: Iterable[ActionCall]) -> list[str] | None:
    """The namespaces a run's baseline of apps reads for the `app-health` checks among `calls` (a
    plan's step actions and their `background:`): None when there is none, [] when one reads every
    namespace. Selectors are not narrowed: a wider baseline only names apps no check judges."""
    scope: dict[str, None] = {}
    found = False
    for call in calls:
        if call.name != AppHealthJob.kind:
            continue
        found = True
        names = names_arg(call.args, "namespaces")
        if not names:
            return []
        scope.update(dict.fromkeys(names))
    return list(scope) if found else None


def unhealthy_now(cluster: JobCluster, namespaces: list[str]) -> dict[str, str]:
    """The run's baseline of apps (`take_baseline`'s `apps`): those unhealthy and settled now in
    `namespaces` (every one when empty). None at all is an empty baseline, not a failure; a
    cluster that cannot be read raises EvidenceUnavailable (the jobs then take their own)."""
    try:
        return baseline_of(read_apps(cluster, namespaces, ""))
    except Unreadable as exc:
        if exc.reason.startswith(NO_APP):
            return {}
        raise EvidenceUnavailable(exc.reason) from None


class AppHealthJob:
    """`app-health`: see the module docstring."""

    kind = "app-health"
    #: The job service hands `plan` the run's recorded baseline (`BASELINE_ARG`).
    uses_baseline = True

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        check_args(args)
        progress: Progress = {
            "started": iso(now),
            "timeout": duration_arg(args, "timeout", DEFAULT_TIMEOUT).total_seconds(),
            "namespaces": list(names_arg(args, "namespaces")),
            "selector": str(args.get("selector", "")).strip(),
            "baseline": None,
            "inconclusive": 0,
            "seen": {},
        }
        recorded = json.loads(str(args.get(BASELINE_ARG) or "{}"))
        if recorded.get("apps") is not None:
            # What the run's snapshot recorded: an app an earlier step broke is not excused.
            progress["baseline"] = dict(recorded["apps"])
            progress["baseline_from"] = str(recorded.get("taken_at") or "")
            return progress
        # Without an answer now there is no baseline yet: the first tick takes it (or asks).
        with contextlib.suppress(Unreadable):
            progress["baseline"] = baseline_of(
                read_apps(cluster, progress["namespaces"], progress["selector"])
            )
        return progress

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        where = ", ".join(progress.get("namespaces") or []) or "every namespace"
        return [
            f"would read Argo CD Applications and Flux Kustomizations/HelmReleases in {where} (writing "
            f"nothing) until all are healthy, failing on a Degraded or not-Ready one or at "
            f"{int(float(progress['timeout']) // 60)}m"
        ]

    def _ask(self, progress: Progress, reason: str) -> Tick:
        n = int(progress.get("inconclusive", 0)) + 1
        return Tick(
            progress={**progress, "inconclusive": n},
            card=(f"{WAITING_ON_EVIDENCE}app health — {reason}",),
            choice=no_data_choice(
                "app-health",
                n,
                f"App health is Inconclusive: {reason}. No data never passes: wait and read again, waive, or abort?",
            ),
        )

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        ended = answered(
            "app-health", progress, decision, aborted="aborted with no trustworthy reading of the apps"
        )
        if ended is not None:
            return ended
        try:
            apps = read_apps(
                cluster, list(progress.get("namespaces") or []), str(progress.get("selector") or "")
            )
        except Unreadable as exc:
            return self._ask(progress, exc.reason)
        posts: list[Post] = []
        if progress.get("baseline") is None:
            progress = {**progress, "baseline": baseline_of(apps)}
        baseline = in_view(progress["baseline"], apps)
        if baseline:
            lines = [f"• {key}: {says}" for key, says in sorted(baseline.items())]
            posts.append(Post(key=f"app-health-baseline:{progress['started']}",
                              text=f"app-health: already unhealthy at the baseline ({baseline_when(progress)}; "
                              "reported, not blocking):\n" + "\n".join(_fit(lines))))  # fmt: skip
        judged = [a for a in apps if a.key not in baseline]
        failed = [a for a in judged if a.state == FAILED]
        waiting = [a for a in judged if a.state == WAITING]
        seen = seen_of(apps, baseline)
        new = {**progress, "seen": seen}
        summary = summary_of(seen)
        started = timer_start(progress, progress["started"], now)
        timed_out = now - started >= timedelta(seconds=float(progress["timeout"]))
        if failed or (waiting and timed_out):
            bad = failed + (waiting if timed_out else [])
            why = (
                f"{len(bad)} app(s) unhealthy"
                + ("" if failed else f" after {int(float(progress['timeout']) // 60)}m")
                + ": "
                + few([a.key for a in bad], 3)
            )
            text = "\n".join([f"app-health: {why}", *_fit([f"• {a.key}: {a.says}" for a in bad])])
            key = "app-health-failed:" + ",".join(a.key for a in bad)
            return Tick(progress=new, posts=(*posts, Post(key=key, text=text)), card=(summary,), done=True,
                        ok=False, detail=f"app-health: {why}", wait=0.0)  # fmt: skip
        if not waiting:
            text = f"app-health: {summary}"
            return Tick(progress=new, posts=(*posts, Post(key=f"app-health-ok:{progress['started']}", text=text)),
                        card=(summary,), done=True, ok=True, detail=text, wait=0.0)  # fmt: skip
        return Tick(
            progress=new,
            posts=tuple(posts),
            card=(f"{WAITING_ON_EVIDENCE}{summary}", "waiting for " + few([a.key for a in waiting], 3)),
            wait=POLL,
        )


def in_view(baseline: Mapping[str, str], apps: list[AppState]) -> dict[str, str]:
    """The baseline's apps among those read now (the run's baseline may name apps outside this
    check's namespaces or selector)."""
    keys = {a.key for a in apps}
    return {key: says for key, says in baseline.items() if key in keys}


def baseline_when(progress: Mapping[str, Any]) -> str:
    """ "the run's snapshot at 13:55 UTC" or "when this check began"."""
    when = str(progress.get("baseline_from") or "")
    if not when:
        return "when this check began"
    try:
        at = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return "the run's snapshot"
    return f"the run's snapshot at {at:%H:%M} UTC"


def baseline_of(apps: list[AppState]) -> dict[str, str]:
    """What was unhealthy and settled so when the job was planned (Degraded, OutOfSync, not
    Ready): reported, never blocking. An app still rolling out then is not in it: it must end
    healthy like the others."""
    return {a.key: a.says for a in apps if a.state != HEALTHY and not a.progressing}


def seen_of(apps: list[AppState], baseline: Mapping[str, str]) -> dict[str, int]:
    """What a reading counts: apps, healthy ones, and those unhealthy at the baseline."""
    return {
        "apps": len(apps),
        "healthy": sum(1 for a in apps if a.state == HEALTHY),
        "baseline": len(baseline),
    }


def summary_of(seen: Mapping[str, int]) -> str:
    """ "Apps: 3/4 healthy · 1 unhealthy at the baseline"."""
    return f"Apps: {seen.get('healthy', 0)}/{seen.get('apps', 0)} healthy · {seen.get('baseline', 0)} unhealthy at the baseline"


def _fit(lines: list[str]) -> list[str]:
    return lines[:NAMED] + ([f"…and {len(lines) - NAMED} more"] if len(lines) > NAMED else [])
