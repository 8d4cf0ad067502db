"""Prometheus' HTTP API (`GET /api/v1/query`), the evidence gate's `MetricSource`.

An instant query's answer becomes `Sample`s. What Prometheus refuses (a bad query: HTTP 400
`bad_data`; a failed evaluation: 422; overload: 503) comes back with its `error` as the reason,
and an empty vector or a NaN value is "no data": all of them Inconclusive (`EvidenceUnavailable`),
never a pass."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from bot.adapters.evidence_http import JsonHttp
from bot.errors import EvidenceUnavailable
from bot.records import Sample, SignalSource


class Prometheus:
    def __init__(self, source: SignalSource, *, timeout: float = 5.0) -> None:
        self._http = JsonHttp(source, what="Prometheus", timeout=timeout)

    def query(self, promql: str, at: datetime | None = None) -> list[Sample]:
        fields = [("query", promql)]
        if at is not None:
            fields.append(("time", f"{at.timestamp():.3f}"))
        _, data = self._http.request("GET", "/api/v1/query", fields=fields)
        if (
            not isinstance(data, dict)
            or data.get("status") != "success"
            or not isinstance(data.get("data"), dict)
        ):
            raise _malformed("no status success with data")
        body = data["data"]
        kind = body.get("resultType")
        result = body.get("result")
        samples: list[Sample]
        if kind == "vector" and isinstance(result, list):
            samples = [
                _sample(item.get("metric") if isinstance(item, dict) else None, item) for item in result
            ]
        elif kind == "scalar":
            samples = [_sample({}, {"value": result})]
        else:
            # A range vector or a string is not a figure a condition can judge.
            raise EvidenceUnavailable(
                f"Prometheus answered a {kind or 'missing'} result, not a number (use an instant vector)"
            )
        if not samples:
            raise EvidenceUnavailable("no data: the query returned an empty result")
        if any(math.isnan(s.value) for s in samples):
            raise EvidenceUnavailable("no data: the query returned NaN")
        return samples


def _malformed(why: str) -> EvidenceUnavailable:
    return EvidenceUnavailable(f"Prometheus' answer is malformed ({why})")


def _sample(metric: Any, item: Any) -> Sample:
    if not isinstance(metric, dict) or not isinstance(item, dict):
        raise _malformed("a sample has no metric")
    value = item.get("value")
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        raise _malformed("a sample has no [time, value]")
    try:
        number = float(value[1])
        at = datetime.fromtimestamp(float(value[0]), UTC)
    except (TypeError, ValueError, OverflowError):
        raise _malformed(f"{str(value[1])[:20]!r} is not a number") from None
    return Sample(labels={str(k): str(v) for k, v in metric.items()}, value=number, at=at)
