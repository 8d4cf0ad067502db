"""Small facades of Alertmanager API v2 and Prometheus' query API, served by the simulator so that
`rehearse`, `scripts/demo` and most tests need no Go binaries. The real servers are built by
scripts/observability/build; tests/test_evidence_contract.py runs the same calls against both and
compares the answers' shapes and fields.

    GET    /alertmanager/api/v2/alerts     ?active ?silenced ?inhibited ?unprocessed ?filter=… (repeatable)
    GET    /alertmanager/api/v2/silences
    POST   /alertmanager/api/v2/silences   postableSilence (with `id`: update, as Alertmanager)
    DELETE /alertmanager/api/v2/silence/ID
    GET    /prometheus/api/v1/query        ?query=PROMQL ?time=

What the facades answer is the world's `Evidence` state, which scenarios, faults and tests change
through the control routes:

    POST   /evidence/alerts   {"labels": {...}, "startsAt"?: RFC 3339}   an alert starts firing
    DELETE /evidence/alerts   {"labels": {...}}                          it resolves
    POST   /evidence/queries  {"query": PROMQL, "value": 1.5 | null}     a query's answer (null: none)
    POST   /evidence/outage   {"alertmanager": "down"|"401"|"malformed"|"up", "prometheus": …}
    POST   /evidence/requests {"code": 403, "count": 50, "verb"?: "list", "resource"?: "pods"}
                              counted in the sim's /metrics `apiserver_request_total`, which the
                              real Prometheus scrapes: a 4xx spike its rules alert on

The Prometheus facade evaluates no PromQL: it answers each query from that table and, like
Prometheus for a series that does not exist, an empty vector for any other. Fingerprints are
Alertmanager's own (FNV-1a 64 over the sorted labels), so a baseline taken here reads the same way.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.sim.apiserver.metrics import Metrics
from bot.sim.apiserver.server import Raw, SimHTTPServer

Obj = dict[str, Any]


@dataclass(frozen=True)
class AlertMatcher:
    """A silence's or a filter's matcher. The simulator imports nothing of the bot, so this is
    its own (the bot's is bot.records.AlertMatcher, parsed by bot.core.evidence.matchers)."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True


_MATCHER = re.compile(
    r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|([^"\s,{}]*))\s*$'
)


def parse_matcher(text: str) -> AlertMatcher:
    """Alertmanager's `filter` syntax: `name="value"`, `!=`, `=~`, `!~`; ValueError otherwise."""
    m = _MATCHER.match(text)
    if not m:
        raise ValueError(f"bad matcher format: {text}")
    name, op, quoted, bare = m.groups()
    value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
    return AlertMatcher(name, value, op in ("=~", "!~"), op in ("=", "=~"))


def matches(m: AlertMatcher, labels: dict[str, str]) -> bool:
    value = labels.get(m.name, "")
    hit = re.fullmatch(m.value, value) is not None if m.is_regex else value == m.value
    return hit if m.is_equal else not hit


def fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's (Prometheus common/model) LabelSet fingerprint: FNV-1a 64 over each sorted
    name and value, each followed by the 0xff separator byte."""
    h = 0xCBF29CE484222325
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode() + b"\xff":
                h ^= byte
                h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class _Silence:
    id: str
    matchers: list[AlertMatcher]
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    updated_at: float


@dataclass
class Evidence:
    """The facades' state; every method is safe from the server's threads."""

    now: Callable[[], float]
    alerts: dict[str, tuple[dict[str, str], float]] = field(default_factory=dict)
    silences: dict[str, _Silence] = field(default_factory=dict)
    queries: dict[str, float | None] = field(default_factory=dict)
    #: "up", "down" (connection refused is out of reach here: 503), "401" or "malformed".
    alertmanager_mode: str = "up"
    prometheus_mode: str = "up"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fire(self, labels: dict[str, str], starts_at: float | None = None) -> str:
        fp = fingerprint(labels)
        with self.lock:
            self.alerts[fp] = (dict(labels), self.now() if starts_at is None else starts_at)
        return fp

    def resolve(self, labels: dict[str, str]) -> None:
        with self.lock:
            self.alerts.pop(fingerprint(labels), None)

    def set_query(self, query: str, value: float | None) -> None:
        with self.lock:
            self.queries[query] = value

    def _state(self, s: _Silence, now: float) -> str:
        if now >= s.ends_at:
            return "expired"
        return "pending" if now < s.starts_at else "active"

    def gettable_alerts(self, flags: dict[str, bool], filters: list[AlertMatcher]) -> list[Obj]:
        now = self.now()
        out: list[Obj] = []
        with self.lock:
            for fp, (labels, starts) in sorted(self.alerts.items()):
                if not all(matches(m, labels) for m in filters):
                    continue
                silenced = sorted(
                    s.id
                    for s in self.silences.values()
                    if self._state(s, now) == "active" and all(matches(m, labels) for m in s.matchers)
                )
                state = "suppressed" if silenced else "active"
                if (silenced and not flags["silenced"]) or (state == "active" and not flags["active"]):
                    continue
                out.append(
                    {
                        "annotations": {},
                        "endsAt": _rfc3339(now + 240),
                        "fingerprint": fp,
                        "receivers": [{"name": "default"}],
                        "startsAt": _rfc3339(starts),
                        "status": {"inhibitedBy": [], "mutedBy": [], "silencedBy": silenced, "state": state},
                        "updatedAt": _rfc3339(now),
                        "labels": dict(labels),
                    }
                )
        return out

    def gettable_silences(self) -> list[Obj]:
        now = self.now()
        with self.lock:
            return [
                {
                    "id": s.id,
                    "status": {"state": self._state(s, now)},
                    "updatedAt": _rfc3339(s.updated_at),
                    "matchers": [
                        {"name": m.name, "value": m.value, "isRegex": m.is_regex, "isEqual": m.is_equal}
                        for m in s.matchers
                    ],
                    "startsAt": _rfc3339(s.starts_at),
                    "endsAt": _rfc3339(s.ends_at),
                    "createdBy": s.created_by,
                    "comment": s.comment,
                }
                for s in self.silences.values()
            ]

    def post_silence(self, body: Obj) -> tuple[int, Any]:
        """Alertmanager's rules: an update keeps the id while the silence is not expired and its
        matchers and (once active) its start are unchanged; otherwise the old one is expired and a
        new id is given."""
        try:
            matchers = [
                AlertMatcher(
                    name=str(m["name"]),
                    value=str(m["value"]),
                    is_regex=bool(m.get("isRegex", False)),
                    is_equal=bool(m.get("isEqual", True)),
                )
                for m in body["matchers"]
            ]
            starts, ends = _parse_time(body["startsAt"]), _parse_time(body["endsAt"])
            created_by, comment = str(body["createdBy"]), str(body["comment"])
        except (KeyError, TypeError, ValueError) as exc:
            return 400, f"invalid silence: {exc}"
        if not matchers:
            return 400, "silence invalid: at least one matcher required"
        if ends <= starts:
            return 400, "silence invalid: end time must not be before start time"
        now = self.now()
        with self.lock:
            new_id = str(uuid.uuid4())
            old = self.silences.get(str(body.get("id") or ""))
            if body.get("id") and old is None:
                return 404, f"silence {body['id']} not found"
            if old is not None:
                state = self._state(old, now)
                same = old.matchers == matchers and (state == "pending" or old.starts_at == starts)
                if state != "expired" and same:
                    new_id = old.id
                elif state != "expired":
                    old.ends_at = now
                    old.updated_at = now
            self.silences[new_id] = _Silence(new_id, matchers, starts, ends, created_by, comment, now)
        return 200, {"silenceID": new_id}

    def expire(self, silence_id: str) -> tuple[int, Any]:
        now = self.now()
        with self.lock:
            s = self.silences.get(silence_id)
            if s is None:
                return 404, f"silence {silence_id} not found"
            # Alertmanager 0.35 answers 200 for a silence already expired, and leaves it be.
            if self._state(s, now) == "expired":
                return 200, None
            s.ends_at = now
            s.updated_at = now
        return 200, None

    def query(self, promql: str, at: float | None) -> tuple[int, Any]:
        if not promql.strip():
            return 400, {
                "status": "error",
                "errorType": "bad_data",
                "error": 'invalid parameter "query": empty',
            }
        if promql.count("(") != promql.count(")") or promql.count("{") != promql.count("}"):
            return 400, {
                "status": "error",
                "errorType": "bad_data",
                "error": f"1:1: parse error: unbalanced in {promql!r}",
            }
        t = self.now() if at is None else at
        with self.lock:
            value = self.queries.get(promql)
        result = [] if value is None else [{"metric": {}, "value": [round(t, 3), _number(value)]}]
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


def _number(v: float) -> str:
    return repr(float(v)) if v != int(v) else str(int(v))


def _flags(query: dict[str, str]) -> dict[str, bool]:
    return {
        k: query.get(k, "true").lower() != "false" for k in ("active", "silenced", "inhibited", "unprocessed")
    }


def _outage(mode: str) -> tuple[int, Any] | None:
    if mode == "down":
        return 503, "service unavailable"
    if mode == "401":
        return 401, "unauthorized"
    if mode == "malformed":
        return 200, Raw(b"<html>gateway says hello</html>", "text/html")
    return None


def handle_alertmanager(
    ev: Evidence, method: str, path: str, query: dict[str, str], body: bytes
) -> tuple[int, Any]:
    if (broken := _outage(ev.alertmanager_mode)) is not None:
        return broken
    rest = path.removeprefix("/alertmanager").strip("/")
    if method == "GET" and rest == "api/v2/alerts":
        try:
            filters = [parse_matcher(f) for f in _all(query, "filter")]
        except ValueError as exc:
            return 400, str(exc)
        return 200, ev.gettable_alerts(_flags(query), filters)
    if method == "GET" and rest == "api/v2/silences":
        return 200, ev.gettable_silences()
    if method == "POST" and rest == "api/v2/silences":
        try:
            data = json.loads(body)
        except ValueError:
            return 400, "body is not JSON"
        return ev.post_silence(data) if isinstance(data, dict) else (400, "body is not an object")
    if method == "DELETE" and (m := re.fullmatch(r"api/v2/silence/([^/]+)", rest)):
        return ev.expire(urllib.parse.unquote(m.group(1)))
    if method == "GET" and rest == "-/ready":
        return 200, Raw(b"OK", "text/plain")
    return 404, "not found"


def handle_prometheus(
    ev: Evidence, method: str, path: str, query: dict[str, str], body: bytes
) -> tuple[int, Any]:
    if (broken := _outage(ev.prometheus_mode)) is not None:
        return broken
    rest = path.removeprefix("/prometheus").strip("/")
    if method in ("GET", "POST") and rest == "api/v1/query":
        at = query.get("time")
        try:
            t = float(at) if at else None
        except ValueError:
            return 400, {
                "status": "error",
                "errorType": "bad_data",
                "error": f'invalid parameter "time": {at!r}',
            }
        return ev.query(query.get("query", ""), t)
    if method == "GET" and rest == "-/ready":
        return 200, Raw(b"Prometheus Server is Ready.\n", "text/plain")
    return 404, {"status": "error", "errorType": "not_found", "error": "not found"}


def handle_control(
    ev: Evidence, metrics: Metrics, method: str, path: str, query: dict[str, str], body: bytes
) -> tuple[int, Any]:
    rest = path.removeprefix("/evidence").strip("/")
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return 400, {"error": "body is not JSON"}
    if not isinstance(data, dict):
        return 400, {"error": "body must be a JSON object"}
    try:
        if rest == "alerts" and method == "POST":
            starts = _parse_time(data["startsAt"]) if data.get("startsAt") else None
            return 200, {"fingerprint": ev.fire({str(k): str(v) for k, v in data["labels"].items()}, starts)}
        if rest == "alerts" and method == "DELETE":
            ev.resolve({str(k): str(v) for k, v in data["labels"].items()})
            return 200, {}
        if rest == "queries" and method == "POST":
            value = data.get("value")
            ev.set_query(str(data["query"]), None if value is None else float(value))
            return 200, {}
        if rest == "requests" and method == "POST":
            count = int(data.get("count", 1))
            if not 0 < count <= 100_000:
                return 400, {"error": "count: from 1 to 100000"}
            for _ in range(count):
                metrics.request(
                    verb=str(data.get("verb", "list")),
                    group=str(data.get("group", "")),
                    version=str(data.get("version", "v1")),
                    resource=str(data.get("resource", "pods")),
                    subresource="",
                    scope=str(data.get("scope", "cluster")),
                    code=int(data["code"]),
                )
            return 200, {}
        if rest == "outage" and method == "POST":
            modes = ("up", "down", "401", "malformed")
            for name in ("alertmanager", "prometheus"):
                if name in data:
                    if data[name] not in modes:
                        return 400, {"error": f"{name}: one of {', '.join(modes)}"}
                    setattr(ev, f"{name}_mode", data[name])
            return 200, {"alertmanager": ev.alertmanager_mode, "prometheus": ev.prometheus_mode}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return 400, {"error": f"bad request: {exc}"}
    return 404, {"error": "not found"}


def _all(query: dict[str, str], name: str) -> list[str]:
    """Every value of a repeated parameter (the server passes the raw query string under "?")."""
    raw = query.get("?")
    if raw is None:
        return [query[name]] if name in query else []
    return [v for k, v in urllib.parse.parse_qsl(raw, keep_blank_values=True) if k == name]


def register(server: SimHTTPServer, evidence: Evidence) -> None:
    server.add_route("/alertmanager", lambda m, p, q, b: handle_alertmanager(evidence, m, p, q, b))
    server.add_route("/prometheus", lambda m, p, q, b: handle_prometheus(evidence, m, p, q, b))
    server.add_route("/evidence", lambda m, p, q, b: handle_control(evidence, server.metrics, m, p, q, b))
