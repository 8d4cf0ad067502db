"""Engines: SQLite (WAL, busy timeout) or PostgreSQL (psycopg, connect timeout), errors as config errors."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from bot.errors import ConfigError


def _masked(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"^([^:/]+://[^:/@]*):[^@]*@", r"\1:***@", url)


def _reason(error: BaseException | None, url: str) -> str:
    """The driver's first line (psycopg adds hints on further lines), with no password in it."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    try:
        password = sa.engine.make_url(url).password
    except (ArgumentError, ValueError):
        password = None
    if not password:
        return text
    # The password where it stands alone (a DSN the driver echoes), not every run of its letters:
    # "p" masked in "port 1 failed" read "***ort 1 failed".
    return re.sub(rf"(?<![\w%]){re.escape(str(password))}(?![\w%])", "***", text)


#: How long a SQLite connection waits for another's lock (its busy timeout, and the WAL switch's).
SQLITE_BUSY_SECONDS = 30.0


def _wal(cursor: Any) -> None:
    """`PRAGMA journal_mode=WAL`. Switching a fresh file to WAL takes a lock that SQLite does not
    wait for (the busy timeout is not consulted), so two connections opening a new database at
    once (a fleet's clusters checked together) could fail with "database is locked": tried again
    until the busy timeout has passed, as every other statement waits."""
    deadline = time.monotonic() + SQLITE_BUSY_SECONDS
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _engine_or_config_error(url: str) -> Engine:
    try:
        return create_engine(url)
    except NoSuchModuleError:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"database_url: SQLAlchemy has no dialect or driver {scheme!r}") from None
    except ImportError as exc:
        # A known dialect whose DBAPI module is missing (psycopg without the `postgres` extra).
        raise ConfigError(
            f"database_url: the database driver {exc.name or 'module'} is not installed "
            "(postgresql://… uses psycopg, which the `postgres` extra installs)"
        ) from None
    except (ArgumentError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"database_url: {_masked(url)} does not parse: {reason[:200]}") from None
    except OSError as exc:
        # The SQLite file's directory could not be created (a file in the way, no permission).
        why = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror
        raise ConfigError(
            f"database_url: cannot create the SQLite file's directory {exc.filename}: {why}"
        ) from None


#: libpq waits for a TCP connection indefinitely by default; a start-up must not hang on a
#: black-holed address. A `connect_timeout` in the URL wins.
CONNECT_TIMEOUT_SECONDS = 10
#: A transaction left open and idle this long is ended by PostgreSQL itself. The bot's
#: transactions wait on nothing but the database (none leaves the store package), so only a
#: process stopped in the middle of one (a replica paused, its VM frozen) leaves one open so long:
#: its row locks — the lease's, a fenced write's share lock on it — would hold another replica's
#: takeover back for as long as it stays stopped. Its write never lands: the transaction is gone.
IDLE_TRANSACTION_SECONDS = 10


def create_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get their directory, WAL and a busy timeout."""
    if url.startswith("sqlite"):
        db_path = sa.engine.make_url(url).database
        if db_path and db_path != ":memory:":
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        # Worker threads share the engine; SQLite's own locking serialises writers, and the busy
        # timeout makes a writer wait for the lock instead of failing at once.
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_SECONDS}
        )

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            _wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if url.startswith("postgresql://"):
        # psycopg 3 is the driver we ship in the `postgres` extra.
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    parsed = sa.engine.make_url(url)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        # Added to the URL's own `options` (libpq's), which connect_args would replace.
        options = parsed.query.get("options") or ""
        idle = f"-c idle_in_transaction_session_timeout={IDLE_TRANSACTION_SECONDS * 1000}"
        connect_args["options"] = (
            f"{options if isinstance(options, str) else ' '.join(options)} {idle}".strip()
        )
    return sa.create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
