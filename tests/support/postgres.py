"""A real PostgreSQL server for the store's tests, started by the test set-up itself.

Uses the Debian postgresql package's binaries (installed by scripts/setup). initdb refuses to run
as root, so when the tests run as root the server runs as the `postgres` system user. Without the
binaries the tests are skipped locally, but fail under CI, where a missing service is a defect.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), reverse=True)
    return candidates[0].parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_db_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    bin_dir = _pg_bin()
    if bin_dir is None:
        reason = "PostgreSQL binaries not found (scripts/setup installs Debian's postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with running_postgres(bin_dir) as url:
        yield url


@contextlib.contextmanager
def running_postgres(bin_dir: Path | None = None) -> Iterator[str]:
    """A fresh PostgreSQL server on loopback for as long as the block runs (benchmarks use it too)."""
    bin_dir = bin_dir or _pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL binaries not found (scripts/setup installs Debian's postgresql)")
    base = Path(tempfile.mkdtemp(prefix="upgrade-bot-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    port = _free_port()
    log_file = base / "server.log"
    subprocess.run(
        _as_db_user([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"]),
        check=True,
        capture_output=True,
    )
    start = _as_db_user(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log_file),
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {base} -F",
            "start",
        ]
    )
    result = subprocess.run(start, capture_output=True, text=True)
    if result.returncode != 0:
        tail = log_file.read_text()[-2000:] if log_file.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {result.stderr}\n{tail}")
    try:
        subprocess.run(
            _as_db_user(
                [
                    str(bin_dir / "createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "upgrade_bot",
                ]
            ),
            check=True,
            capture_output=True,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/upgrade_bot"
    finally:
        subprocess.run(
            _as_db_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def drop_every_table(url: str) -> None:
    """Leave the session's one PostgreSQL server empty for the next test (every table, any schema
    version), so a test that migrates from scratch always starts from nothing."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for table in sa.inspect(conn).get_table_names():
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))
    finally:
        engine.dispose()
