"""`background: [...]` on a disruptive step (drain, restart, eks-update-nodegroup): evidence checked
while the step works, between its nodes, that pauses the step at the first failure — before the
next node — and says why (issue 39 item 3).

A plan writes it on the step:

    - id: drain-ng-1
      actions: [{drain: {nodegroup: ng-1}}]
      background:
        - alerts: {ignore: '^Watchdog$'}
        - analysis: {query: 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))',
                     success: 'result < 1.2 * baseline + 5'}

The plan loader hands the list to the step's job as one JSON argument (`BACKGROUND_ARG`), and
`Backgrounded` wraps the job: it plans each check next to the job's own progress (under the
`background` key), polls the checks that are due on each tick, and lets the job go on. Once a
check failed — a new alert (any, in the background, not only a critical one), an analysis past
its `failure_limit`, or no data (Inconclusive: no data never passes) — the job's next tick that
would begin another node (or end the job) is dropped, which the job contract allows (a tick may
always be lost and run again: writes follow only from stored progress), and people are asked
with a `Choice` keyed `evidence_inconclusive:background:N`: Wait (check again), Waive (this check
no longer pauses this step; a reason is required and audited) or Abort (the step fails).

Which kinds may run in the background is this module's `BackgroundCheck` registry, generic over
evidence kinds: `alerts` and `analysis` here; `app-health` registers the same way. A job kind says
when its next tick may begin disruptive work (`ready`: a drain's next node, a restart's stamps);
every check is asked again just before, and a failure pauses the step there. Without it the step
pauses at once (an EKS node-group update: AWS keeps replacing nodes, and the question says so). A
restart stamps all its workloads in one tick, so a failure after that pauses it when it would end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from bot.core.evidence import leases
from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.evidence.judge import Outcome, judge_alerts
from bot.core.evidence.view import WAITING_ON_EVIDENCE, WAIVED_BY
from bot.core.jobs import alerts as alerts_job
from bot.core.jobs import trail as tr
from bot.core.jobs.alerts import PAUSE_KIND, Evidence, no_data_choice, waived_by, waived_post
from bot.core.jobs.analysis import AnalysisJob
from bot.core.jobs.base import Decision, Job, Post, Progress, Tick
from bot.core.jobs.common import iso
from bot.core.kube.objects import parse_iso
from bot.errors import EvidenceUnavailable, UserError, clip

#: The disruptive job's argument that carries its step's `background:` list (JSON), set by the
#: plan loader from the step's key, never written as an argument by hand.
BACKGROUND_ARG = "background"
#: Likewise its step's `silence: {matchers, max}` (JSON): the lease (bot.core.evidence.leases).
SILENCE_ARG = "silence"
#: Where the checks' state lives in the wrapped job's progress.
KEY = "background"
#: The job kinds a step may give a `background:`.
DISRUPTIVE = ("drain", "restart", "eks-update-nodegroup")
#: The evidence kinds a `background:` may name (each also a plan action of its own).
EVIDENCE_KINDS = ("alerts", "analysis", "app-health")


@dataclass(frozen=True, kw_only=True)
class Poll:
    """One poll of one check: its new state, and "ok", "failed" or "inconclusive" with why."""

    state: dict[str, Any]
    verdict: str
    reason: str = ""
    line: str = ""
    #: This reading itself passed (an analysis' measurement was Successful): what lets a node
    #: begin — a reading with no data never does, even within `inconclusive_limit`.
    passes: bool = True


class BackgroundCheck(Protocol):
    """One evidence kind in the background of a step."""

    def check_args(self, args: Mapping[str, str]) -> None:
        """Refuse bad arguments (UserError), as the plan loader does for actions."""
        ...

    def start(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> dict[str, Any]:
        """The check's initial state (JSON), its baseline taken or read from `BASELINE_ARG`."""
        ...

    def poll(self, cluster: Any, state: dict[str, Any], *, now: datetime) -> Poll: ...


class AlertsCheck:
    """`alerts` in the background: any new alert (not in the baseline, started after the step
    began) fails at once, silenced or not; no answer from Alertmanager is Inconclusive."""

    def __init__(self, evidence: Callable[[], Evidence]) -> None:
        self._job = alerts_job.AlertsJob(evidence)
        self._evidence = evidence

    def check_args(self, args: Mapping[str, str]) -> None:
        alerts_job.check_args(args)

    def start(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> dict[str, Any]:
        state = self._job.plan(cluster, args, now=now)
        state["next_at"] = iso(now)
        return state

    def poll(self, cluster: Any, state: dict[str, Any], *, now: datetime) -> Poll:
        if state.get("no_source"):
            return unmeasured_poll("alerts", state)
        source, matchers = self._evidence().alerts(str(getattr(cluster, "name", "")))
        nxt = {
            **state,
            "next_at": iso(now + timedelta(seconds=alerts_job.POLL)),
            "polls": int(state.get("polls", 0)) + 1,
        }
        try:
            found = source.alerts(matchers)
        except EvidenceUnavailable as exc:
            return Poll(
                state=nxt,
                verdict="inconclusive",
                reason=f"alerts: {exc.reason}",
                line=f"alerts: {exc.reason}",
            )
        if nxt.get("baseline") is None:
            nxt["baseline"] = {
                a.fingerprint: {"labels": dict(a.labels), "startsAt": iso(a.starts_at)} for a in found
            }
        started = parse_iso(nxt["started"]) or now
        verdict = judge_alerts(
            found,
            baseline=alerts_job._baseline(nxt),
            step_started=started,
            now=now,
            settle=timedelta(days=365),
            timeout=timedelta(days=365),
            ignore=re.compile(nxt["ignore"]) if nxt.get("ignore") else None,
            run_silences=frozenset(nxt.get("run_silences") or ()),
            background=True,
        )
        seen = {
            "new": len(verdict.new),
            "pre_existing": verdict.pre_existing,
            "silenced_by_run": verdict.silenced_by_run,
        }
        nxt["seen"] = seen
        line = alerts_job.summary_line(seen, started)
        if verdict.outcome is Outcome.FAILED:
            labels = "; ".join(_labels(a.labels) for a in verdict.new[:3])
            return Poll(state=nxt, verdict="failed", reason=f"alerts: {verdict.reason} ({labels})", line=line)
        return Poll(state=nxt, verdict="ok", line=line)


def unmeasured_poll(name: str, state: dict[str, Any]) -> Poll:
    """A check whose cluster names no source: it measures nothing and pauses nothing (the thread
    says so once: `Backgrounded.tick`); "ok" here is not a pass, and the line says so."""
    return Poll(state=state, verdict="ok", line=f"{name}: {NOT_MEASURED_LINE}")


#: The card's line of a background check with no source.
NOT_MEASURED_LINE = "not measured: no source"


def _labels(labels: Mapping[str, str]) -> str:
    """An alert's labels whole, in the pause's question (each value clipped)."""
    return "{" + ", ".join(f'{k}="{clip(v, 60)}"' for k, v in sorted(labels.items())) + "}"


class AnalysisCheck:
    """`analysis` in the background: measured every `interval` for as long as the step runs; a
    round that reaches `count` starts another, so it never passes the step by itself. Failed past
    `failure_limit` fails; Inconclusive or Error pauses."""

    def __init__(self, evidence: Callable[[], Evidence]) -> None:
        self._job = AnalysisJob(evidence)

    def check_args(self, args: Mapping[str, str]) -> None:
        from bot.core.jobs.analysis import check_args

        check_args(args)

    def start(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> dict[str, Any]:
        return self._job.plan(cluster, args, now=now)

    def poll(self, cluster: Any, state: dict[str, Any], *, now: datetime) -> Poll:
        if state.get("no_source"):
            return unmeasured_poll("analysis", state)
        new, outcome, m = self._job.measure(cluster, state, now=now)
        shown = "none" if m.value is None else (m.value if isinstance(m.value, list) else f"{m.value:.4g}")
        line = f"analysis `{clip(new['query'], 60)}`: {shown} (baseline {new.get('baseline')})"
        passes = m.phase is Outcome.SUCCESSFUL
        last = f"analysis: the last measurement was {m.phase}" + (f": {m.message}" if m.message else "")
        if outcome.outcome is Outcome.SUCCESSFUL:
            new = {**new, "round": int(new.get("round", 0)) + 1, "outcome": str(Outcome.RUNNING)}
            return Poll(state=new, verdict="ok", line=line, passes=passes, reason=last)
        if outcome.outcome is Outcome.FAILED:
            return Poll(state=new, verdict="failed", reason=f"analysis: {outcome.reason}", line=line)
        if outcome.outcome in (Outcome.INCONCLUSIVE, Outcome.ERROR):
            return Poll(
                state=new,
                verdict="inconclusive",
                reason=f"analysis {outcome.outcome}: {outcome.reason}",
                line=line,
            )
        return Poll(state=new, verdict="ok", line=line, passes=passes, reason=last)


class AppHealthCheck:
    """`app-health` in the background: an Argo CD Application going Degraded or Missing, or a Flux
    object going not Ready, that was not so at the baseline fails at once; apps rolling out while
    the drain moves their pods (Progressing, reconciling) do not — the step's own `app-health`
    after it waits for those. No answer from the API server is Inconclusive."""

    def __init__(self) -> None:
        from bot.core.jobs.apphealth import AppHealthJob

        self._job = AppHealthJob()

    def check_args(self, args: Mapping[str, str]) -> None:
        from bot.core.jobs.apphealth import check_args

        check_args(args)

    def start(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> dict[str, Any]:
        state = dict(self._job.plan(cluster, args, now=now))
        state["next_at"] = iso(now)
        return state

    def poll(self, cluster: Any, state: dict[str, Any], *, now: datetime) -> Poll:
        from bot.core.jobs import apphealth

        nxt = {**state, "next_at": iso(now + timedelta(seconds=apphealth.POLL))}
        try:
            apps = apphealth.read_apps(
                cluster, list(state.get("namespaces") or []), str(state.get("selector") or "")
            )
        except apphealth.Unreadable as exc:
            return Poll(state=nxt, verdict="inconclusive", reason=f"app-health: {exc.reason}",
                        line=f"app-health: {exc.reason}")  # fmt: skip
        if nxt.get("baseline") is None:
            nxt["baseline"] = apphealth.baseline_of(apps)
        baseline = apphealth.in_view(nxt["baseline"], apps)
        failed = [a for a in apps if a.key not in baseline and a.state == apphealth.FAILED]
        seen = apphealth.seen_of(apps, baseline)
        nxt["seen"] = seen
        line = apphealth.summary_of(seen)
        if failed:
            named = "; ".join(f"{a.key}: {a.says}" for a in failed[:3])
            more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
            return Poll(state=nxt, verdict="failed", reason=f"app-health: {named}{more}", line=line)
        return Poll(state=nxt, verdict="ok", line=line)


def default_checks(evidence: Callable[[], Evidence]) -> dict[str, BackgroundCheck]:
    """The evidence kinds that can run in the background (`EVIDENCE_KINDS`)."""
    return {
        "alerts": AlertsCheck(evidence),
        "analysis": AnalysisCheck(evidence),
        "app-health": AppHealthCheck(),
    }


def parse_background(text: str) -> list[tuple[str, dict[str, str]]]:
    """`BACKGROUND_ARG`'s JSON → [(kind, args)]; UserError when it is not that shape."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise UserError("background: not a list of evidence checks") from None
    if not isinstance(raw, list) or not all(
        isinstance(i, dict) and isinstance(i.get("name"), str) and isinstance(i.get("args", {}), dict)
        for i in raw
    ):
        raise UserError("background: not a list of evidence checks")
    return [(i["name"], {str(k): str(v) for k, v in i.get("args", {}).items()}) for i in raw]


def check_background(text: str, checks: Mapping[str, BackgroundCheck]) -> None:
    for name, args in parse_background(text):
        check = checks.get(name)
        if check is None:
            raise UserError(f"background: {name!r} is not evidence (one of: {', '.join(sorted(checks))})")
        check.check_args(args)


class Backgrounded:
    """A disruptive job with its step's `background:` checks (see the module docstring). Without
    a `background` argument it is the job itself, tick for tick."""

    def __init__(
        self,
        inner: Job,
        checks: Mapping[str, BackgroundCheck],
        ready: Callable[[Progress], bool] | None = None,
        *,
        evidence: Callable[[], Evidence] = Evidence,
    ) -> None:
        self.evidence = evidence
        self.inner = inner
        self.kind = inner.kind
        self.checks = dict(checks)
        self.ready = ready
        #: The job service hands `plan` the run's recorded baseline (`BASELINE_ARG`).
        self.uses_baseline = True

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        own = {k: v for k, v in args.items() if k not in (BACKGROUND_ARG, BASELINE_ARG, SILENCE_ARG)}
        progress = self.inner.plan(cluster, own, now=now)
        text = str(args.get(BACKGROUND_ARG, "")).strip()
        if not text:
            return progress
        check_background(text, self.checks)
        recorded = {BASELINE_ARG: str(args[BASELINE_ARG])} if args.get(BASELINE_ARG) else {}
        progress[KEY] = {
            "checks": [
                {"name": name, "args": cargs, "state": self.checks[name].start(cluster, {**cargs, **recorded}, now=now),
                 "waived": False, "last": ""}
                for name, cargs in parse_background(text)
            ],
            "failure": None,
            "asked": 0,
            "healthy": False,
        }  # fmt: skip
        if args.get(SILENCE_ARG):
            progress[KEY]["silence"] = leases.lease_of(json.loads(str(args[SILENCE_ARG])))
        return progress

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        inner = {k: v for k, v in progress.items() if k != KEY}
        lines = self.inner.dry_run(cluster, inner)
        bg = progress.get(KEY)
        if bg:
            names = ", ".join(c["name"] for c in bg["checks"])
            lines.append(
                f"would check {names} in the background, pausing before the next node at the first failure"
            )
        return lines

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        bg = progress.get(KEY)
        if bg is None:
            return self.inner.tick(cluster, progress, now=now, decision=decision)
        bg = json.loads(json.dumps(bg))
        inner = {k: v for k, v in progress.items() if k != KEY}
        posts: list[Post] = []
        audit: list[tuple[str, str]] = []
        prefix = f"{PAUSE_KIND}:background:"
        if decision is not None and decision.choice_key.startswith(prefix):
            failure = bg.get("failure") or {}
            if decision.option == "abort":
                text = f"{self.kind}: aborted by <@{decision.by}> after a background check: {failure.get('reason', '')}"
                self._release(cluster, bg, now)
                return Tick(
                    progress={**inner, KEY: bg}, done=True, ok=False, detail=clip(text, 300), wait=0.0
                )
            if decision.option == "waive":
                index = int(failure.get("check", -1))
                if 0 <= index < len(bg["checks"]):
                    bg["checks"][index]["waived"] = True
                text = f"background {failure.get('name', '')}: {WAIVED_BY}{waived_by(decision)}"
                posts.append(waived_post(decision, text))
                audit.append(("evidence:waived", text))
            else:
                # Wait: check again now; the pause stays while the check still fails.
                for c in bg["checks"]:
                    c["state"]["next_at"] = iso(now)
            bg["failure"] = None
            decision = None
        for index, c in enumerate(bg["checks"]):
            if c["state"].get("no_source") and not c.get("told"):
                # Said once in the thread; the card's live section keeps the line.
                c["told"], c["last"] = True, f"{c['name']}: {NOT_MEASURED_LINE}"
                posts.append(Post(key=f"background-no-source:{index}", text=(
                    f"background {c['name']}: {NOT_MEASURED_LINE} — {c['state']['no_source']}. "
                    "It does not pause this step.")))  # fmt: skip
        # Before a tick that may begin disruptive work (a drain's next node, a restart's stamps)
        # every check is asked again, due or not: no node begins on a stale reading.
        ready = self.ready is not None and self.ready(inner)
        if bg.get("failure") is None:
            bg["failure"] = self._poll(cluster, bg, now, force=ready)
            polled = all(c.get("last") for c in bg["checks"] if not c.get("waived"))
            bg["healthy"] = bool(bg.get("healthy")) or (bg["failure"] is None and polled)
        failure = bg.get("failure")
        if failure is not None and (self.ready is None or ready):
            # Paused before the next node (at once where the job cannot be held between nodes).
            self._release(cluster, bg, now)
            lines = _readings(bg)
            return self._ask({**inner, KEY: bg}, failure, posts, audit, lines)
        tick = self.inner.tick(cluster, inner, now=now, decision=decision)
        if bg.get("silence") is not None:
            if failure is None and not tick.done:
                self._hold(cluster, bg, now, {**inner, **tick.progress})
            else:
                # The step ends, or is about to pause and ask: the lease keeps only its tail.
                self._release(cluster, bg, now)
        lines = _readings(bg)
        if failure is not None:
            if tick.done or tick.choice is not None:
                # Dropped: this tick would end the step (or ask its own question) while a check
                # fails. The job runs it again, from the progress stored before it, once people
                # have answered (a tick may always be lost and run again: the job contract).
                return self._ask({**inner, KEY: bg}, failure, posts, audit, lines)
            note = f"Background check failed: {clip(failure['reason'], 120)} — pausing before the next node"
            return Tick(
                progress={**tick.progress, KEY: bg}, posts=(*posts, *tick.posts), audit=(*audit, *tick.audit),
                card=(*tick.card, note), wait=0.0 if tick.wait > 1.0 else tick.wait, counts=tick.counts,
            )  # fmt: skip
        return Tick(
            progress={**tick.progress, KEY: bg}, posts=(*posts, *tick.posts), audit=(*audit, *tick.audit),
            card=(*tick.card, *(f"Background: {line}" for line in lines[:3])), done=tick.done, ok=tick.ok,
            detail=tick.detail, choice=tick.choice, wait=min(tick.wait, self._until_due(bg, now)), counts=tick.counts,
        )  # fmt: skip

    def _alerts(self, cluster: Any) -> Any:
        return self.evidence().alerts(str(getattr(cluster, "name", "")))[0]

    def _hold(self, cluster: Any, bg: dict[str, Any], now: datetime, progress: Progress) -> None:
        created_by = _created_by(progress)
        try:
            source = self._alerts(cluster)
        except UserError as exc:
            bg["silence"] = {**bg["silence"], "error": exc.user_message}
            return
        bg["silence"] = leases.hold(
            source, bg["silence"], now=now, healthy=bool(bg.get("healthy")), created_by=created_by
        )
        held = [bg["silence"]["id"]] if bg["silence"].get("id") else []
        for c in bg["checks"]:
            if c["name"] == "alerts":
                c["state"]["run_silences"] = held

    def _release(self, cluster: Any, bg: dict[str, Any], now: datetime, *, created_by: str = "") -> None:
        """Cut the lease to its tail. With `created_by` (a job interrupted from its stored
        progress), a lease stored without an id is looked for in Alertmanager first."""
        if bg.get("silence") is None or (bg["silence"].get("id") is None and not created_by):
            return
        try:
            source = self._alerts(cluster)
        except UserError:
            return
        bg["silence"] = leases.release(source, bg["silence"], now=now, created_by=created_by)

    def release(self, cluster: Any, progress: Progress, *, now: datetime) -> Progress:
        """The job stops without a tick of its own (interrupted: a restart, the run paused or
        aborted; ended by the service): its silence keeps only its tail. The new progress."""
        bg = progress.get(KEY)
        if not bg or bg.get("silence") is None:
            return progress
        bg = json.loads(json.dumps(bg))
        # A trail names the run and step (the job service adds it when the job is planned).
        named = bool((progress.get(tr.TRAIL) or {}).get("run"))
        self._release(cluster, bg, now, created_by=_created_by(progress) if named else "")
        return {**progress, KEY: bg}

    def _poll(
        self, cluster: Any, bg: dict[str, Any], now: datetime, *, force: bool = False
    ) -> dict[str, Any] | None:
        for index, c in enumerate(bg["checks"]):
            if c.get("waived") or c["state"].get("no_source"):
                continue
            due = parse_iso(c["state"].get("next_at")) or now
            if now < due and not force:
                continue
            poll = self.checks[c["name"]].poll(cluster, c["state"], now=now)
            c["state"], c["last"] = poll.state, poll.line
            if poll.verdict != "ok":
                return {"check": index, "name": c["name"], "verdict": poll.verdict, "reason": poll.reason}
            if force and not poll.passes:
                # Before a node begins, the reading must pass now: no data never passes.
                return {"check": index, "name": c["name"], "verdict": "inconclusive", "reason": poll.reason}
        return None

    def _until_due(self, bg: Mapping[str, Any], now: datetime) -> float:
        waits = [
            ((parse_iso(c["state"].get("next_at")) or now) - now).total_seconds()
            for c in bg["checks"]
            if not c.get("waived") and not c["state"].get("no_source")
        ]
        return max(0.0, min(waits)) if waits else 3600.0

    def _ask(
        self,
        progress: Progress,
        failure: Mapping[str, Any],
        posts: list[Post],
        audit: list[tuple[str, str]],
        lines: list[str],
    ) -> Tick:
        bg = progress[KEY]
        n = int(bg.get("asked", 0)) + 1
        bg["asked"] = n
        what = "failed" if failure["verdict"] == "failed" else "is Inconclusive"
        question = (
            f"The {self.kind} paused before its next node: background {failure['name']} {what} — "
            f"{clip(failure['reason'], 300)}. Wait (check again), waive this check for the rest of the step "
            "(with a reason), or abort the step?"
        )
        if self.ready is None:
            question += " (EKS keeps replacing this group's nodes while the step waits.)"
        return Tick(
            progress=progress,
            posts=tuple(posts),
            audit=tuple(audit),
            card=(
                f"{WAITING_ON_EVIDENCE}background {failure['name']} {what} — {clip(failure['reason'], 100)}",
                *lines[:3],
            ),
            choice=no_data_choice("background", n, question),
            wait=0.0,
        )


def _readings(bg: Mapping[str, Any]) -> list[str]:
    """What the background checks read last, and the silence's lease while there is one."""
    lines = [c["last"] for c in bg["checks"] if c.get("last")]
    if bg.get("silence") is not None:
        lines.append(leases.line(bg["silence"]))
    return lines


def next_node(progress: Progress) -> bool:
    """Drain: the next tick may cordon the nodes or begin a node's evictions (none is draining,
    one is still waiting)."""
    states = [n.get("state") for n in (progress.get("nodes") or {}).values()]
    return "draining" not in states and any(s in ("pending", "cordoned") for s in states)


def next_workloads(progress: Progress) -> bool:
    """Restart: the next tick stamps the workloads still pending (all of them at once)."""
    return any(w.get("state") == "pending" for w in progress.get("workloads") or [])


def _created_by(progress: Progress) -> str:
    """The `createdBy` of the step's silence: `upgrade-bot/RUN/STEP`, from the job's trail."""
    trail = progress.get(tr.TRAIL) or {}
    return f"upgrade-bot/{trail.get('run', '')}/{trail.get('step', '')}"
