"""`upgrade-bot templates check [DIR]`, run as a real process the way a team's CI runs it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.bot_process import bot_command
from tests.support.hostile_templates import CASES, Hostile


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "templates", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_builtin_templates_pass(tmp_path: Path) -> None:
    result = check(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "every announcement renders (built-in templates)" in result.stdout


def test_good_overrides_pass(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    (tmp_path / "announcements" / "reminder.txt.j2").write_text("Heads up: {{ plan.cluster }}\n")
    result = check(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"overrides from {tmp_path}" in result.stdout


def test_a_broken_override_fails_naming_the_file_line_and_variable(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    broken = tmp_path / "announcements" / "starting.txt.j2"
    broken.write_text("Starting {{ plan.cluster }}\nat {{ plan.windw.start }}\n")
    result = check(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{broken}:2: " in result.stderr
    assert "'windw'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_syntax_error_in_blocks_fails_with_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "completed.blocks.json.j2"
    broken.write_text('{"blocks": [\n  {% for %}\n]}\n')
    result = check(str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{broken}:2: " in result.stderr


def test_without_dir_it_uses_the_configured_templates_dir(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "scheduled.txt.j2").write_text("{{ nope }}")
    config = write_config(f"templates_dir: {team}\n")
    result = check("--config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{team / 'scheduled.txt.j2'}:1: 'nope' is undefined" in result.stderr


def test_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = check(str(tmp_path / "nowhere"), cwd=tmp_path)
    assert result.returncode == 2
    assert "not a directory" in result.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_override_fails_the_check_in_bounded_time_with_file_line_and_reason(
    tmp_path: Path, case: Hostile
) -> None:
    team = tmp_path / "team"
    blamed = case.write(team)
    started = time.monotonic()
    result = check(str(team), cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    assert elapsed < 20
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if not line.startswith("upgrade-bot:")]
    assert problems, result.stderr
    # One line per problem, compiler style, so CI can point at the file.
    assert all(line.startswith(f"{team}/") for line in problems), problems
    assert any(line.startswith(f"{blamed}:{case.line}: ") and case.reason in line for line in problems), (
        problems
    )
