"""`clusters.NAME.alertmanager`, `.prometheus` and `.alert_matchers`: the evidence gate's sources,
validated like every other key (short reason, file, line and dotted key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.records import AlertMatcher, SignalSource
from bot.settings import parse_settings

BASE = "clusters:\n  prod:\n    kubeconfig: kc\n"


def test_sources_and_matchers_are_read(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    text = (
        BASE
        + "    alertmanager: {url: 'http://127.0.0.1:9093/', bearer_token_file: token}\n"
        + "    prometheus: {url: 'https://prom.example:9090/prom', ca_file: ca.pem}\n"
        + "    alert_matchers: ['cluster=\"prod\"', 'team=~\"infra|sre\"', 'env!=dev']\n"
    )
    cluster = parse_settings(text, source=tmp_path / "cfg.yaml", env={}).clusters["prod"]
    assert cluster.alertmanager == SignalSource(
        url="http://127.0.0.1:9093", bearer_token_file=tmp_path / "token"
    )
    assert cluster.prometheus == SignalSource(
        url="https://prom.example:9090/prom", ca_file=tmp_path / "ca.pem"
    )
    assert cluster.alert_matchers == (
        AlertMatcher(name="cluster", value="prod"),
        AlertMatcher(name="team", value="infra|sre", is_regex=True),
        AlertMatcher(name="env", value="dev", is_equal=False),
    )
    assert [str(m) for m in cluster.alert_matchers] == ['cluster="prod"', 'team=~"infra|sre"', 'env!="dev"']


def test_a_cluster_without_sources_has_none() -> None:
    cluster = parse_settings(BASE, source=Path("cfg.yaml"), env={}).clusters["prod"]
    assert (cluster.alertmanager, cluster.prometheus, cluster.alert_matchers) == (None, None, ())


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    alertmanager: {}\n", "cfg.yaml:4: clusters.prod.alertmanager.url: missing key"),
        (
            "    alertmanager: {url: localhost:9093}\n",
            "clusters.prod.alertmanager.url: 'localhost:9093' is not an http(s) URL",
        ),
        ("    prometheus: {url: 'http://p:9090', token: x}\n", "clusters.prod.prometheus.token: unknown key"),
        (
            "    prometheus: {url: 'http://p:9090', bearer_token_file: /nonexistent/token}\n",
            "clusters.prod.prometheus.bearer_token_file: no such file: /nonexistent/token",
        ),
        (
            "    alert_matchers: 'cluster=\"prod\"'\n",
            "clusters.prod.alert_matchers: expected a list of matchers",
        ),
        (
            "    alert_matchers: ['cluster==\"prod\"']\n",
            'cfg.yaml:4: clusters.prod.alert_matchers[0]: \'cluster=="prod"\' is not a matcher like cluster="prod"',
        ),
        (
            "    alert_matchers: ['team=~\"(infra\"']\n",
            "clusters.prod.alert_matchers[0]: 'team=~\"(infra\"': the regular expression does not compile",
        ),
        (
            "    alertmanagr: {url: 'http://a'}\n",
            "clusters.prod.alertmanagr: unknown key (did you mean 'alertmanager'?)",
        ),
    ],
)
def test_a_bad_source_is_named_with_its_file_line_and_key(extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(BASE + extra, source=Path("cfg.yaml"), env={})
    assert expected in caught.value.user_message
