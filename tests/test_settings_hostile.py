"""Hostile configuration files, through the real `upgrade-bot` process: each is exit 2 and one line
naming the file (and the line and key where there is one), never a traceback, never a hang."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.bot_process import bot_command
from tests.support.secrets import ROSTER_YAML

#: Generous for a Python start-up on two shared cores; a FIFO that blocks would exceed it.
PROCESS_TIMEOUT = 60


def run_exec_help(config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
    return subprocess.run(
        [*bot_command(), "exec", "help", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=PROCESS_TIMEOUT,
    )


def the_one_line(result: subprocess.CompletedProcess[str], status: int = 2) -> str:
    """Exit `status` (2 unless told), exactly one line on stderr, nothing that looks like a
    traceback anywhere."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == status, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def config_with(tmp_path: Path, extra: str, *, data_dir: bool = True) -> Path:
    path = tmp_path / "upgrade-bot.yaml"
    head = f"data_dir: {tmp_path / 'data'}\n" if data_dir else ""
    path.write_text(head + ROSTER_YAML + extra, encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if needle in text)


@pytest.mark.parametrize(
    ("extra", "needle", "expected"),
    [
        (
            "channels:\n  operations: #ops\n",
            "operations:",
            "channels.operations: missing value ('#ops' is a YAML comment; quote it)",
        ),
        ("timezone:\n", "timezone:", "timezone: missing value"),
        ("workers: " + "9" * 5000 + "\n", "workers:", "workers: a number of 5000 characters"),
        (
            "freezes:\n  - {from: 2026-12-25, to: 9999-12-31, reason: forever}\n",
            "9999-12-31",
            "freezes[0].to: 9999-12-31 is not between 2000 and 2099",
        ),
        (
            "database_url: not a url at all\n",
            "database_url:",
            "database_url: 'not a url at all' is not a URL",
        ),
        ("database_url: postgresql://bot@db:99x/upgrade\n", "database_url:", "database_url: port '99x'"),
        ("clusters:\n  prod: {kubeconfig: [\n", "clusters:", "invalid YAML"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_line_and_key(
    tmp_path: Path, extra: str, needle: str, expected: str
) -> None:
    config = config_with(tmp_path, extra)
    line = the_one_line(run_exec_help(config))
    assert f"{config}:" in line
    assert expected in line, line
    if "invalid YAML" not in expected:
        assert f"{config}:{line_of(config, needle)}:" in line


def test_a_config_nested_three_thousand_levels_deep_is_refused_by_depth(tmp_path: Path) -> None:
    config = config_with(tmp_path, "snapshot: " + "[" * 3000 + "]" * 3000 + "\n")
    line = the_one_line(run_exec_help(config))
    assert f"{config}:{line_of(config, 'snapshot:')}: snapshot" in line
    assert "nested deeper than 50 levels" in line


def test_a_python_tag_is_refused_by_name_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    config = config_with(tmp_path, f'timezone: !!python/object/apply:os.system ["touch {marker}"]\n')
    line = the_one_line(run_exec_help(config))
    assert (
        f"{config}:{line_of(config, 'timezone:')}: timezone: unknown tag !!python/object/apply:os.system"
        in line
    )
    assert not marker.exists()


def test_a_file_that_is_not_utf8_names_the_line_and_byte(tmp_path: Path) -> None:
    config = config_with(tmp_path, "")
    data = config.read_bytes()
    config.write_bytes(data + b"timezone: caf\xe9\n")
    line = the_one_line(run_exec_help(config))
    lineno = data.count(b"\n") + 1
    assert f"{config}:{lineno}: the configuration file is not UTF-8 text (byte {len(data) + 13})" in line


def test_a_nul_byte_is_invalid_yaml_on_its_line(tmp_path: Path) -> None:
    config = config_with(tmp_path, "timezone: UTC\x00\n")
    line = the_one_line(run_exec_help(config))
    assert f"{config}:{line_of(config, 'timezone:')}:14: invalid YAML: unacceptable character #x0000" in line


def test_a_fifo_as_the_config_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    line = the_one_line(run_exec_help(fifo))
    assert line == f"upgrade-bot: {fifo}: the configuration file must be a regular file, not a FIFO"


def test_dev_zero_as_the_config_is_refused_as_a_device() -> None:
    line = the_one_line(run_exec_help(Path("/dev/zero")))
    assert line == "upgrade-bot: /dev/zero: the configuration file must be a regular file, not a device"


def test_a_directory_as_the_config_is_refused(tmp_path: Path) -> None:
    line = the_one_line(run_exec_help(tmp_path))
    assert line == f"upgrade-bot: {tmp_path}: the configuration file must be a regular file, not a directory"


def test_a_config_over_one_mebibyte_is_refused_by_size(tmp_path: Path) -> None:
    config = config_with(tmp_path, "# padding\n" * 110_000)
    line = the_one_line(run_exec_help(config))
    assert f"{config}: the configuration file is larger than 1024 KiB" in line


def test_a_data_dir_that_is_a_file_names_the_key(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a directory\n")
    config = config_with(tmp_path, "")
    line = the_one_line(run_exec_help(config))
    assert f"{config}:1: data_dir: {blocker} is a file, not a directory" in line


def test_a_data_dir_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x\n")
    config = config_with(tmp_path, f"data_dir: {blocker / 'data'}\n", data_dir=False)
    line = the_one_line(run_exec_help(config))
    assert f"data_dir: {blocker / 'data'} cannot be created: {blocker} is a file" in line


def test_postgres_spelled_the_heroku_way_gets_the_sqlalchemy_name(tmp_path: Path) -> None:
    config = config_with(tmp_path, "database_url: postgres://bot@db/upgrade\n")
    line = the_one_line(run_exec_help(config))
    assert "database_url: write postgresql://…, not postgres://…" in line


def _missing_driver() -> str:
    """A PostgreSQL driver SQLAlchemy knows that this environment does not have installed."""
    for dialect, module in (("psycopg2", "psycopg2"), ("pg8000", "pg8000")):
        if importlib.util.find_spec(module) is None:
            return dialect
    raise AssertionError("every candidate driver is installed; add one that is not")


def test_a_driver_that_is_not_installed_names_it(tmp_path: Path) -> None:
    driver = _missing_driver()
    config = config_with(tmp_path, f"database_url: postgresql+{driver}://bot:hunter2@127.0.0.1/upgrade\n")
    line = the_one_line(run_exec_help(config))
    assert f"database_url: the database driver {driver} is not installed" in line
    assert "hunter2" not in line


def test_an_unknown_driver_names_the_scheme(tmp_path: Path) -> None:
    config = config_with(tmp_path, "database_url: postgresql+nosuchdriver://bot@127.0.0.1/upgrade\n")
    line = the_one_line(run_exec_help(config))
    assert "database_url: SQLAlchemy has no dialect or driver 'postgresql+nosuchdriver'" in line


def test_a_postgresql_that_is_down_is_one_line_without_the_password(tmp_path: Path) -> None:
    # A loopback port nobody listens on: the connection is refused at once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = config_with(tmp_path, f"database_url: postgresql://bot:hunter2@127.0.0.1:{port}/upgrade\n")
    result = run_exec_help(config)
    line = the_one_line(result, status=1)  # a server that is down: could not do it, not usage
    assert f"database_url: cannot connect to postgresql://bot:***@127.0.0.1:{port}/upgrade" in line
    assert "refused" in line.lower()
    assert "hunter2" not in result.stdout + result.stderr
