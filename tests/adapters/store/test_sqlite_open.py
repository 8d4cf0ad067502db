"""A fresh SQLite database opened by two connections at once: switching it to WAL takes a lock
SQLite does not wait for (its busy timeout is not consulted), so the second opening failed with
"database is locked" — `check --fleet`, whose clusters' threads each opened the store, lost a
cluster to it now and then. The switch now waits for the lock as every other statement does."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from bot.adapters.store import Store


def test_a_store_opened_while_another_connection_holds_a_fresh_files_lock_waits_for_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bot.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE held (x)")
    holder.execute("BEGIN IMMEDIATE")  # a writer, before the file is in WAL mode
    holder.execute("INSERT INTO held VALUES (1)")
    # As SQLite does it: the switch to WAL under another's lock fails at once, without waiting.
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite3.connect(path, timeout=5).execute("PRAGMA journal_mode=WAL")
    assert time.monotonic() - started < 1

    threading.Timer(0.5, lambda: holder.execute("COMMIT")).start()
    store = Store.open(f"sqlite:///{path}")  # waited for the commit, then connected and migrated
    try:
        assert store.schema_version() is not None
        assert time.monotonic() - started >= 0.5
    finally:
        store.close()
        holder.close()


def test_a_short_password_is_masked_where_it_stands_not_in_every_word_that_holds_its_letters() -> None:
    from bot.adapters.store.engine import _reason

    said = _reason(
        Exception('connection to server at "127.0.0.1", port 1 failed; dsn postgresql://u:p@127.0.0.1:1/x'),
        "postgresql://u:p@127.0.0.1:1/x",
    )
    assert said == 'connection to server at "127.0.0.1", port 1 failed; dsn postgresql://u:***@127.0.0.1:1/x'
