"""Alertmanager API v2 (`/api/v2/alerts`, `/api/v2/silences`, `/api/v2/silence/{id}`), the
evidence gate's `AlertSource`. Answers are checked field by field against the v2 OpenAPI's
`gettableAlert` / `gettableSilence`: anything missing or of the wrong type is a malformed answer,
which is Inconclusive (`EvidenceUnavailable`), never an empty list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from bot.adapters.evidence_http import JsonHttp
from bot.errors import EvidenceUnavailable
from bot.records import Alert, AlertMatcher, SignalSource, Silence


class Alertmanager:
    def __init__(self, source: SignalSource, *, timeout: float = 5.0) -> None:
        self._http = JsonHttp(source, what="Alertmanager", timeout=timeout)

    def alerts(self, matchers: Sequence[AlertMatcher] = ()) -> list[Alert]:
        fields = [("active", "true"), ("silenced", "true"), ("inhibited", "true"), ("unprocessed", "true")]
        fields += [("filter", str(m)) for m in matchers]
        _, data = self._http.request("GET", "/api/v2/alerts", fields=fields)
        if not isinstance(data, list):
            raise _malformed("alerts", "not a list")
        return [_alert(item) for item in data]

    def silences(self) -> list[Silence]:
        _, data = self._http.request("GET", "/api/v2/silences")
        if not isinstance(data, list):
            raise _malformed("silences", "not a list")
        return [_silence(item) for item in data]

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
        body: dict[str, Any] = {
            "matchers": [
                {"name": m.name, "value": m.value, "isRegex": m.is_regex, "isEqual": m.is_equal}
                for m in matchers
            ],
            "startsAt": _iso(starts_at),
            "endsAt": _iso(ends_at),
            "createdBy": created_by,
            "comment": comment,
        }
        if silence_id:
            body["id"] = silence_id
        _, data = self._http.request("POST", "/api/v2/silences", body=body)
        if not isinstance(data, dict) or not isinstance(data.get("silenceID"), str) or not data["silenceID"]:
            raise _malformed("the new silence", "no silenceID")
        return str(data["silenceID"])

    def expire_silence(self, silence_id: str) -> None:
        self._http.request("DELETE", f"/api/v2/silence/{quote(silence_id, safe='')}")


def _malformed(what: str, why: str) -> EvidenceUnavailable:
    return EvidenceUnavailable(f"Alertmanager's answer for {what} is malformed ({why})")


def _labels(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _malformed(what, "labels are not a string map")
    return dict(value)


def _time(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise _malformed(what, "a time is missing")
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _malformed(what, f"{value[:40]!r} is not a time") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _ids(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _malformed(what, "ids are not a list of strings")
    return tuple(value)


def _alert(item: Any) -> Alert:
    if not isinstance(item, dict):
        raise _malformed("alerts", "an alert is not an object")
    fingerprint = item.get("fingerprint")
    status = item.get("status")
    if not isinstance(fingerprint, str) or not fingerprint:
        raise _malformed("alerts", "an alert has no fingerprint")
    if not isinstance(status, dict) or status.get("state") not in ("active", "suppressed", "unprocessed"):
        raise _malformed("alerts", f"alert {fingerprint} has no status.state")
    annotations = item.get("annotations") or {}
    return Alert(
        fingerprint=fingerprint,
        labels=_labels(item.get("labels"), "alerts"),
        starts_at=_time(item.get("startsAt"), "alerts"),
        state=str(status["state"]),
        silenced_by=_ids(status.get("silencedBy"), "alerts"),
        inhibited_by=_ids(status.get("inhibitedBy"), "alerts"),
        annotations=_labels(annotations, "alerts") if isinstance(annotations, Mapping) else {},
    )


def _silence(item: Any) -> Silence:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise _malformed("silences", "a silence has no id")
    status = item.get("status")
    if not isinstance(status, dict) or status.get("state") not in ("active", "pending", "expired"):
        raise _malformed("silences", f"silence {item['id']} has no status.state")
    raw = item.get("matchers")
    if not isinstance(raw, list):
        raise _malformed("silences", f"silence {item['id']} has no matchers")
    matchers: list[AlertMatcher] = []
    for m in raw:
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("name"), str)
            or not isinstance(m.get("value"), str)
        ):
            raise _malformed("silences", f"silence {item['id']} has a malformed matcher")
        matchers.append(
            AlertMatcher(
                name=m["name"],
                value=m["value"],
                is_regex=bool(m.get("isRegex", False)),
                # isEqual defaults to true in the v2 OpenAPI.
                is_equal=bool(m.get("isEqual", True)),
            )
        )
    return Silence(
        id=item["id"],
        matchers=tuple(matchers),
        starts_at=_time(item.get("startsAt"), "silences"),
        ends_at=_time(item.get("endsAt"), "silences"),
        created_by=str(item.get("createdBy", "")),
        comment=str(item.get("comment", "")),
        state=str(status["state"]),
    )


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
