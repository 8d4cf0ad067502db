"""The evidence gate's ports: what the jobs read from Alertmanager and Prometheus, as plain
records (bot/records.py), and the one way either can fail — `EvidenceUnavailable` (bot/errors.py), whose reason the gate shows as
Inconclusive. "No data never passes": an adapter that cannot give a clear answer (unreachable,
401/403, a malformed answer, an empty result, a refused query) raises it; it never returns an
empty list that a caller could read as "all quiet"."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bot.errors import EvidenceUnavailable
from bot.records import Alert, AlertMatcher, Sample, Silence

__all__ = ["Alert", "AlertSource", "EvidenceUnavailable", "MetricSource", "Sample", "Silence"]


class AlertSource(Protocol):
    """Alertmanager API v2."""

    def alerts(self, matchers: Sequence[AlertMatcher] = ()) -> list[Alert]:
        """Every alert, active, silenced and inhibited alike, that all `matchers` select."""
        ...

    def silences(self) -> list[Silence]: ...

    def put_silence(
        self,
        *,
        matchers: Sequence[AlertMatcher],
        starts_at: datetime,
        ends_at: datetime,
        created_by: str,
        comment: str,
        silence_id: str | None = None,
    ) -> str:
        """Create a silence, or update `silence_id`'s; returns the id Alertmanager gives it (the
        same one while `starts_at` and the matchers are unchanged)."""
        ...

    def expire_silence(self, silence_id: str) -> None: ...


class MetricSource(Protocol):
    """Prometheus' HTTP API."""

    def query(self, promql: str, at: datetime | None = None) -> list[Sample]:
        """An instant query's samples; never empty (an empty result raises EvidenceUnavailable)."""
        ...
