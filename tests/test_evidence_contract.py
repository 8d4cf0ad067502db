"""The simulator's Alertmanager and Prometheus facades answer as the real servers do: the same
calls, through the bot's adapters and as raw JSON, against both, with the answers' shapes and
fields compared. The real half uses the binaries scripts/observability/build makes."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.matchers import parse_matcher
from bot.errors import EvidenceUnavailable
from bot.records import SignalSource
from bot.sim.cluster import SimCluster
from bot.sim.world.evidence import fingerprint
from tests.support.observability import Observability


@dataclass
class Backend:
    name: str
    alertmanager: str
    prometheus: str
    #: Makes an alert fire with these labels, starting at that time.
    fire: Callable[[dict[str, str], datetime], None]
    #: Makes `query` answer `value` (the real Prometheus answers a constant query by itself).
    answer: Callable[[str, float], None]


def _http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, raw.decode(errors="replace")


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@pytest.fixture(params=["sim", "real"])
def backend(request: pytest.FixtureRequest, sim_small: SimCluster) -> Iterator[Backend]:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    if request.param == "sim":

        def fire_sim(labels: dict[str, str], at: datetime) -> None:
            ev.fire(labels, at.timestamp())

        yield Backend(
            "sim", f"{sim_small.url}/alertmanager", f"{sim_small.url}/prometheus", fire_sim, ev.set_query
        )
        return
    # Asked for here, not as a parameter, so the sim half runs without the binaries.
    start: Callable[..., Observability] = request.getfixturevalue("observability")
    obs = start()

    def fire(labels: dict[str, str], at: datetime) -> None:
        status, _ = _http(
            "POST",
            f"{obs.alertmanager.url}/api/v2/alerts",
            [{"labels": labels, "startsAt": _iso(at), "endsAt": _iso(at + timedelta(hours=1))}],
        )
        assert status == 200

    yield Backend("real", obs.alertmanager.url, obs.prometheus.url, fire, lambda q, v: None)


def _shape(value: Any) -> Any:
    """Keys and types, recursively: what the contract compares (values differ by design)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        # A list of objects: the first one's shape; Prometheus' [time, "value"] pair: each one's.
        if value and isinstance(value[0], dict):
            return [_shape(value[0])]
        return [_shape(v) for v in value]
    return type(value).__name__


def test_alerts_filters_silences_and_queries_answer_alike(backend: Backend) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    labels = {"alertname": "KubeAPIErrorsHigh", "cluster": "prod", "severity": "warning"}
    backend.fire(labels, now - timedelta(minutes=3))
    backend.fire({"alertname": "Other", "cluster": "staging"}, now - timedelta(minutes=1))
    am = Alertmanager(SignalSource(url=backend.alertmanager))

    def prod_alerts() -> list[Any]:
        return am.alerts([parse_matcher('cluster="prod"')])

    alerts = _until(prod_alerts, lambda a: len(a) == 1 and a[0].state == "active")
    [alert] = alerts
    assert (alert.fingerprint, dict(alert.labels), alert.starts_at) == (
        fingerprint(labels),
        labels,
        now - timedelta(minutes=3),
    )
    status, raw = _http("GET", f"{backend.alertmanager}/api/v2/alerts?filter=cluster%3D%22prod%22")
    assert status == 200
    assert _shape(raw[0]) == EXPECTED_ALERT_SHAPE

    sid = am.put_silence(
        matchers=[parse_matcher('alertname="KubeAPIErrorsHigh"')],
        starts_at=now,
        ends_at=now + timedelta(minutes=25),
        created_by="upgrade-bot/r1/s1",
        comment="upgrade-bot: drain of ng-1",
    )
    silenced = _until(prod_alerts, lambda a: bool(a) and a[0].state == "suppressed")
    assert silenced[0].silenced_by == (sid,)
    # Alertmanager moves a new silence's startsAt that is already past to its own now (a second or
    # more later on a busy machine): an update repeats the stored startsAt to keep the id, as the
    # bot's leases do (`bot.core.evidence.leases._put`).
    [stored] = [s for s in am.silences() if s.id == sid]
    assert now <= stored.starts_at <= datetime.now(UTC)
    assert (
        am.put_silence(
            matchers=[parse_matcher('alertname="KubeAPIErrorsHigh"')],
            starts_at=stored.starts_at,
            ends_at=now + timedelta(minutes=50),
            created_by="upgrade-bot/r1/s1",
            comment="upgrade-bot: drain of ng-1",
            silence_id=sid,
        )
        == sid
    )
    [silence] = [s for s in am.silences() if s.id == sid]
    assert (silence.state, silence.ends_at, silence.created_by) == (
        "active",
        now + timedelta(minutes=50),
        "upgrade-bot/r1/s1",
    )
    status, raw = _http("GET", f"{backend.alertmanager}/api/v2/silences")
    assert status == 200
    assert _shape(raw[0]) == EXPECTED_SILENCE_SHAPE
    am.expire_silence(sid)
    assert [s.state for s in am.silences() if s.id == sid] == ["expired"]
    status, _ = _http("DELETE", f"{backend.alertmanager}/api/v2/silence/{sid}")
    assert status == 200
    status, _ = _http("DELETE", f"{backend.alertmanager}/api/v2/silence/00000000-0000-0000-0000-000000000000")
    assert status == 404

    prom = Prometheus(SignalSource(url=backend.prometheus))
    backend.answer("vector(2.5)", 2.5)
    [sample] = prom.query("vector(2.5)")
    assert (sample.value, dict(sample.labels)) == (2.5, {})
    status, raw = _http("GET", f"{backend.prometheus}/api/v1/query?query=vector(2.5)")
    assert status == 200
    assert _shape(raw) == {
        "data": {"result": [{"metric": {}, "value": ["float", "str"]}], "resultType": "str"},
        "status": "str",
    }
    with pytest.raises(EvidenceUnavailable, match=r"^no data: the query returned an empty result$"):
        prom.query('up{job="none"}')
    with pytest.raises(EvidenceUnavailable, match=r"^Prometheus answered HTTP 400: .*parse error"):
        prom.query("sum(rate(up[5m])")
    status, raw = _http("GET", f"{backend.prometheus}/api/v1/query?query=sum(rate(up%5B5m%5D)")
    assert (status, raw["status"], raw["errorType"]) == (400, "error", "bad_data")


EXPECTED_ALERT_SHAPE = {
    "annotations": {},
    "endsAt": "str",
    "fingerprint": "str",
    "labels": {"alertname": "str", "cluster": "str", "severity": "str"},
    "receivers": [{"name": "str"}],
    "startsAt": "str",
    "status": {"inhibitedBy": [], "mutedBy": [], "silencedBy": [], "state": "str"},
    "updatedAt": "str",
}
EXPECTED_SILENCE_SHAPE = {
    "comment": "str",
    "createdBy": "str",
    "endsAt": "str",
    "id": "str",
    "matchers": [{"isEqual": "bool", "isRegex": "bool", "name": "str", "value": "str"}],
    "startsAt": "str",
    "status": {"state": "str"},
    "updatedAt": "str",
}


def _until(read: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    """Poll until `ok` (Alertmanager applies a new silence to its alerts within a moment)."""
    deadline = time.monotonic() + timeout
    value = read()
    while not ok(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {value!r}")
        time.sleep(0.1)
        value = read()
    return value
