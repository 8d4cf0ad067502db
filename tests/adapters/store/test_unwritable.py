"""A database that answers but cannot write is said as what it is (its disk full, its file
read-only), not "busy or unreachable", with SQLite's own errors from real files; and a request's
first write waits for a locked database only as long as Slack waits for its answer."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bot.adapters.store import Store
from bot.adapters.store.base import _wrap_errors, driver_words
from bot.errors import DatabaseUnwritable, TemporaryError


def _write(engine: sa.Engine, rows: int = 1) -> None:
    with _wrap_errors(), engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS t (x BLOB)"))
        for _ in range(rows):
            conn.execute(sa.text("INSERT INTO t VALUES (randomblob(4096))"))


def test_a_full_database_is_said_full_and_the_drivers_words_are_kept_for_the_log(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'full.db'}")

    @sa.event.listens_for(engine, "connect")
    def small(dbapi: Any, _record: Any) -> None:
        dbapi.execute("PRAGMA max_page_count = 8")  # SQLite's own limit: SQLITE_FULL past it

    with pytest.raises(DatabaseUnwritable) as full:
        _write(engine, rows=50)
    assert full.value.user_message == "the database's disk is full"
    assert driver_words(full.value) == "database or disk is full"
    engine.dispose()


def test_a_read_only_database_is_said_read_only(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    _write(sa.create_engine(f"sqlite:///{path}"))
    engine = sa.create_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    with pytest.raises(DatabaseUnwritable) as read_only:
        _write(engine)
    assert read_only.value.user_message == "the database is read-only (its file or folder cannot be written)"
    engine.dispose()


def test_a_locked_database_is_still_busy(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    _write(sa.create_engine(f"sqlite:///{path}"))
    holder = sa.create_engine(f"sqlite:///{path}")
    waiter = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.1})
    with holder.connect() as held:
        held.execute(sa.text("BEGIN EXCLUSIVE"))
        with pytest.raises(TemporaryError) as busy:
            _write(waiter)
        held.execute(sa.text("ROLLBACK"))
    assert not isinstance(busy.value, DatabaseUnwritable)
    assert busy.value.user_message == "the database is busy or unreachable"
    assert driver_words(busy.value) == "database is locked"


def test_a_requests_first_write_waits_briefly_for_a_locked_database_then_says_busy(tmp_path: Path) -> None:
    """The Slack door's claim waited the engine's 30 s for a lock: its "nothing was done" reached
    Slack after the 3 s Slack waits, and the person saw Slack's own timeout instead."""
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    holder = sqlite3.connect(tmp_path / "bot.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        began = time.monotonic()
        with pytest.raises(TemporaryError) as busy:
            store.claim_delivery("k1", datetime(2026, 12, 1, tzinfo=UTC), wait=0.3)
        assert time.monotonic() - began < 3
        assert busy.value.user_message == "the database is busy or unreachable"
        holder.execute("ROLLBACK")
        assert store.claim_delivery("k1", datetime(2026, 12, 1, tzinfo=UTC), wait=0.3)
        with store.engine.connect() as conn:  # the pooled connection waits its usual 30 s again
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        holder.close()
        store.close()
