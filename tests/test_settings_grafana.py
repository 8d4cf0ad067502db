"""`grafana:`: the step annotations' Grafana, validated like every other key (short reason, file,
line and dotted key); the token is read from its file at load and never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.records import GrafanaConfig
from bot.settings import parse_settings

TOKEN = "glsa_secret-for-settings-tests"


def test_grafana_is_read_with_its_token_tags_and_timeout(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(f"{TOKEN}\n")
    text = (
        "grafana: {url: 'https://grafana.example/g/', token_file: token, tags: [infra, eks], timeout: 2s}\n"
    )
    settings = parse_settings(text, source=tmp_path / "cfg.yaml", env={})
    assert settings.grafana == GrafanaConfig(
        url="https://grafana.example/g",
        token_file=tmp_path / "token",
        token=TOKEN,
        tags=("infra", "eks"),
        timeout=2.0,
    )
    # A settings object in a log line or a traceback does not carry the token.
    assert TOKEN not in repr(settings)


def test_without_grafana_there_are_no_annotations() -> None:
    assert parse_settings("", source=Path("cfg.yaml"), env={}).grafana is None


def test_grafana_without_a_token_file_posts_without_one() -> None:
    grafana = parse_settings("grafana: {url: 'http://g:3000'}\n", source=Path("cfg.yaml"), env={}).grafana
    assert grafana == GrafanaConfig(url="http://g:3000")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("grafana: {}\n", "cfg.yaml:1: grafana.url: missing key"),
        ("grafana: {url: 'grafana:3000'}\n", "cfg.yaml:1: grafana.url: 'grafana:3000' is not an http(s) URL"),
        (
            "grafana: {url: 'http://g', token_file: /nonexistent/token}\n",
            "grafana.token_file: no such file: /nonexistent/token",
        ),
        ("grafana: {url: 'http://g', tags: infra}\n", "grafana.tags: expected a list of strings"),
        ("grafana: {url: 'http://g', timeout: 0}\n", "grafana.timeout: must be more than 0 and at most 60s"),
        ("grafana: {url: 'http://g', timeout: 2m}\n", "grafana.timeout: must be more than 0 and at most 60s"),
        ("grafana: {url: 'http://g', token: x}\n", "grafana.token: unknown key"),
    ],
)
def test_a_bad_grafana_is_named_with_its_file_line_and_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, source=Path("cfg.yaml"), env={})
    assert expected in caught.value.user_message


def test_a_token_file_that_is_empty_or_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "dir").mkdir()
    for name, reason in (("empty", "is empty"), ("dir", "not a regular file (a directory)")):
        with pytest.raises(ConfigError) as caught:
            parse_settings(
                f"grafana: {{url: 'http://g', token_file: {name}}}\n", source=tmp_path / "cfg.yaml", env={}
            )
        assert f"grafana.token_file: {tmp_path / name}" in caught.value.user_message
        assert reason in caught.value.user_message


def test_a_token_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigError, match=r"grafana\.token_file: .*fifo: not a regular file \(a FIFO\)"):
        parse_settings("grafana: {url: 'http://g', token_file: fifo}\n", source=tmp_path / "cfg.yaml", env={})
