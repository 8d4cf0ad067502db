"""The Alertmanager and Prometheus adapters against the simulator's facades: every failure mode
(unreachable, 401, a malformed answer, an empty result, a query Prometheus refuses, an unreadable
token file) is `EvidenceUnavailable` with a reason a person can act on, never an empty answer."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.matchers import parse_matcher
from bot.errors import EvidenceUnavailable
from bot.records import SignalSource
from bot.sim.cluster import SimCluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _am(sim: SimCluster) -> Alertmanager:
    return Alertmanager(SignalSource(url=f"{sim.url}/alertmanager"))


def _prom(sim: SimCluster) -> Prometheus:
    return Prometheus(SignalSource(url=f"{sim.url}/prometheus"))


def test_alerts_are_read_with_fingerprint_labels_start_and_state(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    started = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
    fp = ev.fire(
        {"alertname": "KubeAPIErrorsHigh", "cluster": "prod", "severity": "warning"}, started.timestamp()
    )
    ev.fire({"alertname": "Watchdog", "cluster": "staging"})
    alerts = _am(sim_small).alerts([parse_matcher('cluster="prod"')])
    assert [(a.fingerprint, a.name, a.severity, a.starts_at, a.state) for a in alerts] == [
        (fp, "KubeAPIErrorsHigh", "warning", started, "active")
    ]
    assert len(_am(sim_small).alerts()) == 2


def test_a_silence_suppresses_its_alerts_keeps_its_id_when_extended_and_expires(
    sim_small: SimCluster,
) -> None:
    assert sim_small.sim is not None
    sim_small.sim.evidence.fire({"alertname": "NodeNotReady", "cluster": "prod"})
    am = _am(sim_small)
    now = datetime.fromtimestamp(sim_small.sim.clock.now(), UTC)
    matchers = [parse_matcher('alertname="NodeNotReady"')]
    sid = am.put_silence(
        matchers=matchers,
        starts_at=now,
        ends_at=now + timedelta(minutes=25),
        created_by="upgrade-bot/r1/s2",
        comment="x",
    )
    [alert] = am.alerts()
    assert (alert.state, alert.silenced_by) == ("suppressed", (sid,))
    again = am.put_silence(
        matchers=matchers,
        starts_at=now,
        ends_at=now + timedelta(minutes=50),
        created_by="upgrade-bot/r1/s2",
        comment="x",
        silence_id=sid,
    )
    assert again == sid
    [silence] = am.silences()
    assert (silence.id, silence.state, silence.created_by, silence.ends_at) == (
        sid,
        "active",
        "upgrade-bot/r1/s2",
        (now + timedelta(minutes=50)).replace(microsecond=(now.microsecond // 1000) * 1000),
    )
    am.expire_silence(sid)
    assert [s.state for s in am.silences()] == ["expired"]
    assert am.alerts()[0].state == "active"


def test_a_query_answers_its_samples(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    q = 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
    sim_small.sim.evidence.set_query(q, 1.25)
    [sample] = _prom(sim_small).query(q)
    assert (sample.value, dict(sample.labels)) == (1.25, {})


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ({"prometheus": "down"}, "Prometheus answered HTTP 503: service unavailable"),
        ({"prometheus": "401"}, "Prometheus refused the bot's credentials (HTTP 401)"),
        ({"prometheus": "malformed"}, "Prometheus answered GET /api/v1/query with something not JSON"),
        ({}, "no data: the query returned an empty result"),
    ],
)
def test_prometheus_failures_are_inconclusive(
    sim_small: SimCluster, setup: dict[str, str], reason: str
) -> None:
    assert sim_small.sim is not None
    for k, v in setup.items():
        setattr(sim_small.sim.evidence, f"{k}_mode", v)
    with pytest.raises(EvidenceUnavailable) as caught:
        _prom(sim_small).query("up")
    assert caught.value.reason == reason


def test_a_query_prometheus_refuses_is_inconclusive_with_its_error(sim_small: SimCluster) -> None:
    with pytest.raises(EvidenceUnavailable) as caught:
        _prom(sim_small).query("sum(rate(x[5m])")
    assert caught.value.reason.startswith("Prometheus answered HTTP 400: 1:1: parse error")


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("down", "Alertmanager answered HTTP 503: service unavailable"),
        ("401", "Alertmanager refused the bot's credentials (HTTP 401)"),
        ("malformed", "Alertmanager answered GET /api/v2/alerts with something not JSON"),
    ],
)
def test_alertmanager_failures_are_inconclusive(sim_small: SimCluster, mode: str, reason: str) -> None:
    assert sim_small.sim is not None
    sim_small.sim.evidence.alertmanager_mode = mode
    with pytest.raises(EvidenceUnavailable) as caught:
        _am(sim_small).alerts()
    assert caught.value.reason == reason


def test_an_unreachable_server_is_inconclusive() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(EvidenceUnavailable, match=r"^Alertmanager is unreachable"):
        Alertmanager(SignalSource(url=url), timeout=1).alerts()
    with pytest.raises(EvidenceUnavailable, match=r"^Prometheus is unreachable"):
        Prometheus(SignalSource(url=url), timeout=1).query("up")


def test_a_server_that_takes_the_request_and_never_answers_is_said_so() -> None:
    """It was "unreachable (ReadTimeoutError)", as if the connection had been refused."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts (the kernel does), never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(EvidenceUnavailable) as caught:
            Alertmanager(SignalSource(url=url), timeout=0.5).alerts()
    assert caught.value.reason == "Alertmanager did not answer in time (ReadTimeoutError)"


def test_an_unreadable_token_file_is_inconclusive(tmp_path: Path) -> None:
    source = SignalSource(url="http://127.0.0.1:9", bearer_token_file=tmp_path / "gone")
    with pytest.raises(EvidenceUnavailable, match="cannot read its bearer token file"):
        Prometheus(source).query("up")
