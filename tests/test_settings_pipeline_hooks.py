"""`pipeline_hooks:`: each source's signing secret, read from its file at load, never shown; a
wrong path, a short secret or a bad source name is one line naming the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.settings import parse_settings

SECRET = "concourse-secret-for-settings-tests-0123"


def test_each_source_gets_its_secret_and_the_settings_never_show_it(tmp_path: Path) -> None:
    (tmp_path / "concourse.secret").write_text(f"{SECRET}\n")
    (tmp_path / "gha.secret").write_text("g" * 40)
    text = "pipeline_hooks:\n  concourse: {secret_file: concourse.secret}\n  github-actions: {secret_file: gha.secret}\n"
    settings = parse_settings(text, source=tmp_path / "cfg.yaml", env={})
    assert settings.pipeline_hooks == {"concourse": SECRET.encode(), "github-actions": b"g" * 40}
    assert SECRET not in repr(settings)


def test_without_pipeline_hooks_there_are_none() -> None:
    assert parse_settings("", source=Path("cfg.yaml"), env={}).pipeline_hooks == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("pipeline_hooks:\n  ci: {secret_file: short.secret}\n", "pipeline_hooks.ci.secret_file: "),
        ("pipeline_hooks:\n  ci: {secret_file: missing.secret}\n", "no such file"),
        ("pipeline_hooks:\n  ci: {}\n", "pipeline_hooks.ci.secret_file: missing key"),
        ("pipeline_hooks:\n  CI!: {secret_file: short.secret}\n", "source names are lower-case"),
        ("pipeline_hooks: [ci]\n", "pipeline_hooks: expected a mapping"),
    ],
)
def test_a_wrong_source_is_refused_with_its_key(tmp_path: Path, text: str, reason: str) -> None:
    (tmp_path / "short.secret").write_text("too-short")
    with pytest.raises(ConfigError) as raised:
        parse_settings(text, source=tmp_path / "cfg.yaml", env={})
    assert reason in str(raised.value)
    assert "too-short" not in str(raised.value)
