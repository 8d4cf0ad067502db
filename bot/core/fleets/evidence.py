"""The soak's evidence: `alerts` judged on each cluster of the stage, all along the soak.

A soak passes while no alert has started firing on a cluster since the soak began (silenced or
not: the bot holds no silence during a soak). Pre-existing alerts do not count. When
Alertmanager gives no trustworthy answer the soak fails, with the reason: no data never passes.
A fleet plan that asks a soak for `analysis` or `app-health` is refused when it is validated; a
fleet stored before that was refused still fails its soak saying so, rather than passing unjudged.
"""

from __future__ import annotations

from datetime import datetime

from bot.core.evidence.judge import AlertBaseline, Outcome, judge_alerts
from bot.core.jobs.alerts import Evidence
from bot.errors import EvidenceUnavailable, UserError


class AlertsSoak:
    """`SoakJudge` over the clusters' Alertmanagers (`clusters.NAME.alertmanager`)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence

    def judge(self, kind: str, cluster: str, *, since: datetime, now: datetime) -> str:
        if kind != "alerts":
            return f"`{kind}` evidence has no source in this bot yet"
        try:
            source, matchers = self.evidence.alerts(cluster)
            alerts = source.alerts(matchers)
        except UserError as exc:
            return exc.user_message
        except EvidenceUnavailable as exc:
            return f"Alertmanager gave no answer ({exc.reason})"
        verdict = judge_alerts(
            alerts,
            baseline=AlertBaseline(alerts={}, taken_at=since),
            step_started=since,
            now=now,
            settle=now - since,
            timeout=now - since,
            # Any new alert fails a soak at once: the evidence must pass all along.
            background=True,
        )
        return verdict.reason if verdict.outcome is Outcome.FAILED else ""
