"""The baseline: what the evidence sources said when the run's snapshot was taken — the firing
alerts (fingerprint, labels, startsAt), the current value of every `analysis` query the plan
names and, when the plan has an `app-health` check, the Argo CD and Flux apps unhealthy then —
recorded with the snapshot (`Store.save_evidence_baseline`) so that a resumed run, or a
job planned hours later, compares against the same set.

No data never passes, and none is invented either: a source that gives no answer is recorded as
null with its reason under `errors`, and the jobs then take their own baseline when planned.

The body (JSON, stored as it is, read by the jobs and the gate panels):

    {"taken_at": "2026-11-29T13:55:00Z",
     "alerts": {"4a0f…": {"labels": {"alertname": "Watchdog", …}, "startsAt": "…"}} | null,
     "analysis": {"sum(rate(apiserver_request_total{code=~\\"4..\\"}[5m]))": 12.5 | [1.0, 2.0] | null},
     "apps": {"Application argocd/legacy": "Degraded/Synced — …"} | null,
     "errors": {"alertmanager": "Alertmanager is unreachable (…)", "analysis:QUERY": "no data: …",
                "apps": "applications.argoproj.io: forbidden …"}}

`apps` is there only when the plan has an `app-health` check: an app already unhealthy when the run
began is reported by each `app-health` step, never blocking it; one broken by the upgrade's
earlier steps is not excused by a later step's own reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.core.evidence.judge import value_of
from bot.core.evidence.ports import AlertSource, MetricSource
from bot.errors import EvidenceUnavailable
from bot.records import ActionCall, AlertMatcher

#: The action whose `query` the baseline records.
ANALYSIS = "analysis"
#: The reserved argument through which the job service hands a job that `uses_baseline` its run's
#: recorded baseline (this body, as JSON) when the job is planned; never written by a plan.
BASELINE_ARG = "_baseline"


def analysis_queries(calls: Iterable[ActionCall]) -> list[str]:
    """Every `analysis` query among `calls` (a plan's step actions and their `background:`), once,
    in plan order."""
    seen: dict[str, None] = {}
    for call in calls:
        if call.name == ANALYSIS and str(call.args.get("query", "")).strip():
            seen.setdefault(str(call.args["query"]).strip(), None)
    return list(seen)


def take_baseline(
    *,
    alerts: tuple[AlertSource, Sequence[AlertMatcher]] | None,
    metrics: MetricSource | None,
    queries: Sequence[str],
    now: datetime,
    apps: Callable[[], Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """Read each source once; see the module docstring for the shape. Prometheus is asked for
    its own now (no `time`), as the analysis measures: the bot's clock may be a rehearsal's.
    `apps` reads the apps unhealthy now (key → what it says), raising EvidenceUnavailable."""
    body: dict[str, Any] = {"taken_at": iso(now), "alerts": None, "analysis": {}, "errors": {}}
    if apps is not None:
        body["apps"] = None
        try:
            body["apps"] = dict(apps())
        except EvidenceUnavailable as exc:
            body["errors"]["apps"] = exc.reason
    if alerts is not None:
        source, matchers = alerts
        try:
            body["alerts"] = {
                a.fingerprint: {"labels": dict(a.labels), "startsAt": iso(a.starts_at)}
                for a in source.alerts(matchers)
            }
        except EvidenceUnavailable as exc:
            body["errors"]["alertmanager"] = exc.reason
    for query in queries:
        if metrics is None:
            body["analysis"][query] = None
            body["errors"][f"analysis:{query}"] = "the cluster names no prometheus"
            continue
        try:
            body["analysis"][query] = value_of(metrics.query(query))
        except EvidenceUnavailable as exc:
            body["analysis"][query] = None
            body["errors"][f"analysis:{query}"] = exc.reason
    return body


def summary(body: dict[str, Any]) -> str:
    """One line for the snapshot's thread post: what the baseline holds."""
    parts = []
    if body.get("alerts") is not None:
        parts.append(f"{len(body['alerts'])} firing alert(s)")
    elif "alertmanager" in body.get("errors", {}):
        parts.append("no alerts (Alertmanager gave no answer)")
    values = body.get("analysis") or {}
    if values:
        known = sum(1 for v in values.values() if v is not None)
        parts.append(f"{known} of {len(values)} analysis value(s)")
    if body.get("apps") is not None:
        parts.append(f"{len(body['apps'])} app(s) unhealthy")
    elif "apps" in body.get("errors", {}):
        parts.append("no apps (they could not be read)")
    return "baseline: " + ", ".join(parts) if parts else ""


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
