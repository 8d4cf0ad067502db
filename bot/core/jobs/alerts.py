"""The `alerts` job: "no new alerts" (`alerts: {settle: 10m, ignore: REGEX, timeout: 30m}`), judged
by `bot.core.evidence.judge.judge_alerts` against the cluster's Alertmanager. It writes nothing.

The baseline is what the run's snapshot recorded (`bot.core.evidence.baseline`), or else what fires
when the job is planned (fingerprint, labels, startsAt); it is stored in the job's progress, so a
resumed job compares against the same set. A new alert — a fingerprint not in the
baseline that started after the step began, silenced or not — that is critical fails the step at
once; the step passes after `settle` with nothing new and fails at `timeout` while new ones fire.

No data never passes: when Alertmanager gives no trustworthy answer the job stops and asks people
(`Choice` keyed `evidence_inconclusive:…`, the distinct pause kind): Wait (check again), Waive
(with a reason), or Abort (the step fails).

Progress (JSON):

    {"started": "2026-11-29T14:02:00Z", "settle": 600, "timeout": 1800, "ignore": "",
     "baseline": {"4a0f…": {"labels": {...}, "startsAt": "…"}}, "quiet_since": null,
     "inconclusive": 0, "seen": {"new": 0, "pre_existing": 3, "silenced_by_run": 0},
     "new": [{"fingerprint": "…", "labels": {...}, "startsAt": "…", "silenced_by_run": false}]}

`new` keeps the first `view.KEPT_ALERTS` new alerts for the gate (`bot.core.evidence.view`); the
card's live lines are its Now line ("Waiting on evidence: alerts settle 4m12s left · 0 new"), the
summary line and the first new alerts with their labels.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.evidence.judge import AlertBaseline, Outcome, judge_alerts
from bot.core.evidence.ports import AlertSource, MetricSource
from bot.core.evidence.view import (
    KEPT_ALERTS,
    WAIVED_BY,
    EvidenceView,
    alert_lines,
    alerts_view,
    at_time,
    now_line,
)
from bot.core.jobs.base import Choice, ChoiceOption, Decision, Post, Progress, Tick
from bot.core.jobs.common import duration_arg, iso, timer_start
from bot.core.jobs.nosource import NoSource, person_check, unmeasured
from bot.core.kube.objects import parse_iso
from bot.errors import EvidenceUnavailable, UserError, clip
from bot.records import AlertMatcher

DEFAULT_SETTLE = timedelta(minutes=10)
DEFAULT_TIMEOUT = timedelta(minutes=30)
#: Seconds between polls of Alertmanager.
POLL = 15.0
#: The pause kind the paused card shows (pluggable reasons: see docs/evidence-gate.md).
PAUSE_KIND = "evidence_inconclusive"
#: The answers to evidence that has no trustworthy answer (no data never passes).
NO_DATA_OPTIONS = (
    ChoiceOption(id="wait", label="Wait"),
    ChoiceOption(id="waive", label="Waive", needs_reason=True),
    ChoiceOption(id="abort", label="Abort"),
)


def no_data_choice(name: str, n: int, question: str) -> Choice:
    """The `n`th question of the evidence step `name` that had no trustworthy answer."""
    return Choice(key=f"{PAUSE_KIND}:{name}:{n}", question=question, options=NO_DATA_OPTIONS)


def answered(name: str, progress: Progress, decision: Decision | None, *, aborted: str) -> Tick | None:
    """The tick that ends the evidence step `name` on people's Waive or Abort of its no-data
    question (`aborted` says why, on Abort); None for Wait, or for no answer to that question."""
    if decision is None or not decision.choice_key.startswith(f"{PAUSE_KIND}:{name}:"):
        return None
    if decision.option == "waive":
        return waived(name, progress, decision)
    if decision.option == "abort":
        return Tick(progress=progress, done=True, ok=False, detail=clip(f"{name}: {aborted}", 300), wait=0.0)
    return None


def waived(name: str, progress: Progress, decision: Decision) -> Tick:
    """The tick that ends an evidence step people waived (with their reason), posted and audited."""
    text = f"{name}: {WAIVED_BY}{waived_by(decision)}"
    return Tick(progress=progress, posts=(waived_post(decision, text),),
                done=True, ok=True, detail=text, audit=(("evidence:waived", text),), wait=0.0)  # fmt: skip


#: How the run hands the job a waiver's voters, as its reason: "<@U1>: why; <@U2>: why"
#: (`RunService.answer_evidence`).
_VOTER = re.compile(r"(?:^|; )<@([UW][A-Z0-9]+)>: ")


def _voters(decision: Decision) -> list[tuple[str, str]]:
    """Who waived and why, each: the voters the run named in the reason, else the one who answered."""
    parts = _VOTER.split(decision.reason)
    if len(parts) < 3 or parts[0]:
        return [(decision.by, decision.reason)]
    return [(user, why.strip()) for user, why in zip(parts[1::2], parts[2::2], strict=True)]


def waived_by(decision: Decision) -> str:
    """ "<@U1> (why) and <@U2> (why)": the card's words for evidence waived (`runs.chosen`)."""
    return " and ".join(f"<@{user}> ({why})" if why else f"<@{user}>" for user, why in _voters(decision))


def waived_post(decision: Decision, text: str) -> Post:
    """The thread's line of a waiver: its voters named as mentions — the one who answered and each
    whose vote the run wrote into the reason; the rest of it inert."""
    voters = [user for user, _ in _voters(decision)]
    return Post(
        key=decision.choice_key + ":waived", text=text, people=tuple(dict.fromkeys((decision.by, *voters)))
    )


class Evidence:
    """Cluster name → its Alertmanager (and the matchers scoping alerts to it) and its Prometheus;
    `NoSource` when the cluster names none (an evidence step then asks people: `bot.core.jobs.nosource`)."""

    def __init__(
        self,
        alertmanagers: Mapping[str, tuple[AlertSource, Sequence[AlertMatcher]]] | None = None,
        prometheuses: Mapping[str, MetricSource] | None = None,
    ) -> None:
        self._alertmanagers = dict(alertmanagers or {})
        self._prometheuses = dict(prometheuses or {})

    def metrics(self, cluster: str) -> MetricSource:
        found = self._prometheuses.get(cluster)
        if found is None:
            raise NoSource("Prometheus", cluster, "Confirm by eye that it stays near its baseline")
        return found

    def alerts(self, cluster: str) -> tuple[AlertSource, tuple[AlertMatcher, ...]]:
        found = self._alertmanagers.get(cluster)
        if found is None:
            raise NoSource("Alertmanager", cluster, "Confirm no new alerts by eye")
        return found[0], tuple(found[1])


def check_args(args: Mapping[str, str]) -> None:
    duration_arg(args, "settle", DEFAULT_SETTLE)
    duration_arg(args, "timeout", DEFAULT_TIMEOUT)
    ignore = str(args.get("ignore", "")).strip()
    if ignore:
        try:
            re.compile(ignore)
        except re.error as exc:
            raise UserError(f"ignore: {clip(ignore, 60)!r} is not a regular expression ({exc})") from None


def _baseline(progress: Mapping[str, Any]) -> AlertBaseline:
    raw = progress.get("baseline") or {}
    alerts = {
        fp: (dict(v.get("labels") or {}), parse_iso(v.get("startsAt")) or datetime.min)
        for fp, v in raw.items()
    }
    return AlertBaseline(alerts=alerts, taken_at=parse_iso(progress["started"]) or datetime.min)


class AlertsJob:
    """`alerts`: see the module docstring."""

    kind = "alerts"
    #: The job service hands `plan` the run's recorded baseline (`BASELINE_ARG`).
    uses_baseline = True

    def __init__(self, evidence: Callable[[], Evidence]) -> None:
        self._evidence = evidence

    def _source(self, cluster: Any) -> tuple[AlertSource, tuple[AlertMatcher, ...]]:
        return self._evidence().alerts(str(getattr(cluster, "name", "")))

    def plan(self, cluster: Any, args: Mapping[str, str], *, now: datetime) -> Progress:
        check_args(args)
        progress: Progress = {
            "started": iso(now),
            "settle": duration_arg(args, "settle", DEFAULT_SETTLE).total_seconds(),
            "timeout": duration_arg(args, "timeout", DEFAULT_TIMEOUT).total_seconds(),
            "ignore": str(args.get("ignore", "")).strip(),
            "baseline": None,
            "quiet_since": None,
            "inconclusive": 0,
            "seen": {},
        }
        try:
            source, matchers = self._source(cluster)
        except NoSource as exc:
            return unmeasured(progress, exc)
        recorded = json.loads(str(args.get(BASELINE_ARG) or "{}")).get("alerts")
        if recorded is not None:
            # What the run's snapshot recorded: a resumed or late step compares against that set.
            progress["baseline"] = dict(recorded)
            progress["baseline_from"] = "snapshot"
            return progress
        # Without an answer now there is no baseline yet: the first tick takes it (or asks people
        # while there is no answer).
        with contextlib.suppress(EvidenceUnavailable):
            progress["baseline"] = {
                a.fingerprint: {"labels": dict(a.labels), "startsAt": iso(a.starts_at)}
                for a in source.alerts(matchers)
            }
        return progress

    def dry_run(self, cluster: Any, progress: Progress) -> list[str]:
        if progress.get("no_source"):
            return [f"would measure nothing and ask people instead: {progress['no_source']}"]
        return [
            f"would watch Alertmanager (writing nothing) for {int(progress['settle'] // 60)}m with no new alert, "
            f"failing at {int(progress['timeout'] // 60)}m while new alerts fire or at once on a critical one"
        ]

    def _ask(self, progress: Progress, reason: str, now: datetime) -> Tick:
        n = int(progress.get("inconclusive", 0)) + 1
        # Kept for the gate and the card: why the evidence is Inconclusive now.
        new = {**progress, "inconclusive": n, "unavailable": reason}
        question = (
            f"Alerts are Inconclusive: {reason}. No data never passes: wait and check again, waive, or abort?"
        )
        return Tick(
            progress=new,
            card=(now_line(EvidenceView(alerts=alerts_view(new, unavailable=reason)), now, markup=False),),
            choice=no_data_choice("alerts", n, question),
        )

    def tick(
        self, cluster: Any, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        ended = answered(
            "alerts", progress, decision, aborted="aborted with no trustworthy answer from Alertmanager"
        )
        if ended is not None:
            return ended
        if progress.get("no_source"):
            return person_check("alerts", progress, decision)
        source, matchers = self._source(cluster)
        try:
            alerts = source.alerts(matchers)
        except EvidenceUnavailable as exc:
            return self._ask(progress, exc.reason, now)
        if progress.get("baseline") is None:
            progress = {
                **progress,
                "baseline": {
                    a.fingerprint: {"labels": dict(a.labels), "startsAt": iso(a.starts_at)} for a in alerts
                },
            }
        started = parse_iso(progress["started"]) or now
        ignore = re.compile(progress["ignore"]) if progress.get("ignore") else None
        # Settle counts from the step's start (or its resume), or from the moment the last new
        # alert was seen gone.
        if progress.get("quiet_since"):
            quiet: datetime | None = timer_start(progress, progress["quiet_since"], now)
        elif progress.get("saw_new"):
            quiet = now
        else:
            quiet = timer_start(progress, progress["started"], now)
        # The ids of the silences this run holds (the silence lease records them; none until then).
        run_silences = frozenset(progress.get("run_silences") or ())
        verdict = judge_alerts(
            alerts,
            baseline=_baseline(progress),
            step_started=started,
            now=now,
            settle=timedelta(seconds=float(progress["settle"])),
            timeout=timedelta(seconds=float(progress["timeout"])),
            ignore=ignore,
            quiet_since=quiet,
            run_silences=run_silences,
        )
        seen = {
            "new": len(verdict.new),
            "pre_existing": verdict.pre_existing,
            "silenced_by_run": verdict.silenced_by_run,
        }
        new: Progress = {
            **progress,
            "seen": seen,
            "unavailable": "",
            "quiet_since": iso(verdict.quiet_since) if verdict.quiet_since else None,
            "saw_new": bool(progress.get("saw_new")) or bool(verdict.new),
            # The gate lists each new alert with its labels: the first few are kept, the count whole.
            "new": [
                {
                    "fingerprint": a.fingerprint,
                    "labels": dict(a.labels),
                    "startsAt": iso(a.starts_at),
                    "silenced_by_run": bool(a.silenced_by) and set(a.silenced_by) <= run_silences,
                }
                for a in verdict.new[:KEPT_ALERTS]
            ],
        }
        # Every new alert the step saw, gone or not (the report's alert timeline): the first few.
        history = dict(progress.get("history") or {})
        for a in new["new"]:
            if a["fingerprint"] not in history and len(history) < KEPT_ALERTS:
                history[a["fingerprint"]] = {k: v for k, v in a.items() if k != "fingerprint"}
        new["history"] = history
        new["history_count"] = len(
            set(progress.get("history_fps") or ()) | {a.fingerprint for a in verdict.new}
        )
        new["history_fps"] = sorted(
            set(progress.get("history_fps") or ()) | {a.fingerprint for a in verdict.new}
        )[:500]
        view = alerts_view(new, outcome=verdict.outcome.value)
        summary = summary_line(seen, started)
        if verdict.outcome is Outcome.FAILED:
            text = "\n".join([f"alerts: {verdict.reason}", summary, *alert_lines(view, markup=False)])
            key = "alerts-failed:" + ",".join(sorted(a.fingerprint for a in verdict.new))
            return Tick(progress=new, posts=(Post(key=key, text=text),), card=(summary,), done=True, ok=False,
                        detail=f"alerts: {verdict.reason}", wait=0.0)  # fmt: skip
        if verdict.outcome is Outcome.SUCCESSFUL:
            text = f"alerts: no new alert for {int(float(progress['settle']) // 60)}m ({summary})"
            return Tick(progress=new, posts=(Post(key=f"alerts-settled:{progress['started']}", text=text),),
                        card=(summary,), done=True, ok=True, detail=text, wait=0.0)  # fmt: skip
        # The card's Now line (run cards, from the stored progress) says how long it settles.
        card = (summary, *alert_lines(view, limit=5, markup=False))
        return Tick(progress=new, card=card, wait=POLL)


def summary_line(seen: Mapping[str, int], since: datetime) -> str:
    """The job's summary line: "Alerts: 0 new since 14:02 UTC · 3 pre-existing · 5 silenced by this run"."""
    return (
        f"Alerts: {seen.get('new', 0)} new since {at_time(since)} · {seen.get('pre_existing', 0)} pre-existing"
        f" · {seen.get('silenced_by_run', 0)} silenced by this run"
    )
