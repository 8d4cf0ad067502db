"""Migrations: Alembic's `upgrade head`, run by the store at start-up with the revisions shipped in
`migrations/versions/` (no alembic.ini at run time).

A database made before Alembic recorded its hand-numbered version in `schema_migrations`; it is
stamped at the revision of the same number first, then upgraded in place. That table stays as it
was (a release before this one, started on the database by a rollback, finds its own version).

Several replicas may start at once: the whole upgrade is one transaction (SQLite and PostgreSQL
both have transactional DDL) that first takes the migration lock — `BEGIN IMMEDIATE` on SQLite,
a transaction-scoped advisory lock on PostgreSQL — so the second replica waits, then finds the
database at head and applies nothing.

An empty SQLite database opened after the first one this process migrated gets that one's schema
and rows replayed (`_FRESH_SQLITE`) rather than the revisions through Alembic again.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from bot.errors import PermanentError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

log = logging.getLogger(__name__)

SCRIPT_LOCATION = Path(__file__).with_name("migrations")

#: The key of PostgreSQL's advisory lock that serialises replicas migrating at once.
MIGRATION_LOCK_KEY = 0x75_70_67_72_61_64_65  # "upgrade"


# Alembic is imported when the store migrates, not by every module that names the store's type
# (a third of a second at start-up otherwise, for commands that never open the database).


def script_directory() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(SCRIPT_LOCATION))


def current_revision(engine: Engine) -> str | None:
    """The database's Alembic revision (None before the first migration)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


#: A revision file's own id and the one it follows, as Alembic's template writes them.
_REVISION = re.compile(r"""^revision(?:\s*:[^=]*)?\s*=\s*["']([^"']+)["']""", re.M)
_DOWN_REVISION = re.compile(r"""^down_revision(?:\s*:[^=]*)?\s*=\s*["']([^"']+)["']""", re.M)


@cache
def shipped_head() -> str | None:
    """The head of the revisions shipped in `migrations/versions/`, read from each file's
    `revision` and `down_revision` lines, without importing Alembic or the revisions; None unless
    that gives exactly one head (a merge's tuple of parents does not parse: Alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (SCRIPT_LOCATION / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        own = _REVISION.search(text)
        if own is None:
            continue
        revisions.add(own.group(1))
        parent = _DOWN_REVISION.search(text)
        if parent is not None:
            parents.add(parent.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def at_head(engine: Engine) -> bool:
    """Is the database at the shipped head already? One query, no Alembic: every command and every
    start opens the store, and Alembic with the revisions it imports to walk them was a third of a
    second of CPU each time (beside a snapshot's list helpers on a two-core machine) to apply
    nothing. A database a replica is migrating reads at its old revision until that commits, so
    the caller goes on to `upgrade` and waits on the migration lock as before."""
    head = shipped_head()
    if head is None:
        return False
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return False
        current = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    return current == [head]


def upgrade(engine: Engine, target: str = "head") -> list[str]:
    """Bring the database to `target` (normally head); return the revisions applied, in order."""
    if target == "head" and at_head(engine):
        return []
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    # The revision scripts are read before the migration lock is taken, as they always were: read
    # under it (Alembic's import and the scripts, most of a second on a busy machine), they kept a
    # second store opening in the same process (`check --fleet` opens one per cluster) waiting
    # past SQLite's busy timeout ("database is locked"). Not read when a replay will do.
    script = None if target == "head" and _FRESH_SQLITE else script_directory()
    with engine.connect() as conn:
        _lock(conn)
        fresh = target == "head" and _empty_sqlite(conn)
        if fresh and _FRESH_SQLITE:
            _replay(conn, _FRESH_SQLITE[0])
            conn.commit()
            log.info("fresh database: schema at head as this process migrated it before")
            return list(_FRESH_SQLITE[0].revisions)
        script = script or script_directory()
        _stamp_legacy(conn, script)
        current = MigrationContext.configure(conn).get_current_revision()
        try:
            pending = list(script.iterate_revisions(target, current))
        except (CommandError, RevisionError) as exc:
            # A newer release migrated this database (a rollback of the bot): one line, no traceback.
            raise PermanentError(
                f"the database's schema revision {current} is unknown to this release, which knows up to "
                f"{script.get_current_head()}: a newer upgrade-bot migrated it — run that release, or restore "
                "the database's backup from before it"
            ) from exc
        pending.reverse()
        if pending:
            config = Config()
            config.set_main_option("script_location", str(SCRIPT_LOCATION))
            config.attributes["connection"] = conn
            command.upgrade(config, target)
            for s in pending:
                # The docstring's first paragraph wraps; the log writes a newline as `\n`.
                log.info("applied schema migration %s: %s", s.revision, " ".join(s.doc.split()))
        if fresh and pending:
            # Read inside the migration's own transaction: nothing but the revisions wrote it.
            _FRESH_SQLITE[:] = [_image(conn, [s.revision for s in pending])]
        conn.commit()
    return [s.revision for s in pending]


@dataclass(frozen=True)
class _Image:
    """A fresh SQLite database at head: its schema objects' SQL and its rows, in creation order."""

    revisions: tuple[str, ...]
    tables: tuple[str, ...]
    rows: tuple[tuple[str, tuple[tuple[object, ...], ...]], ...]
    others: tuple[str, ...]


#: The SQLite database at head that this process migrated from empty, once. Every later empty
#: SQLite database here gets the same schema and rows by replaying it (~2 ms) rather than the
#: revisions through Alembic again (~0.15 s of CPU): a process that opens many stores — a rehearsal,
#: the test suite with its database per test — migrates once. The image is what the revisions
#: themselves wrote in this process, so a revision that fails or drifts from the models still fails
#: or drifts at the first open; PostgreSQL always runs the revisions.
_FRESH_SQLITE: list[_Image] = []


def _empty_sqlite(conn: Connection) -> bool:
    if conn.dialect.name != "sqlite":
        return False
    return conn.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar() == 0


def _image(conn: Connection, revisions: list[str]) -> _Image:
    objects = conn.exec_driver_sql(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
    ).all()
    tables = [
        (name, sql) for kind, name, sql in objects if kind == "table" and not name.startswith("sqlite_")
    ]
    rows = [
        (name, tuple(tuple(r) for r in conn.exec_driver_sql(f'SELECT * FROM "{name}"').all()))
        for name, _sql in tables
    ]
    return _Image(
        revisions=tuple(revisions),
        tables=tuple(sql for _name, sql in tables),
        rows=tuple((name, found) for name, found in rows if found),
        others=tuple(sql for kind, _name, sql in objects if kind != "table"),
    )


def _replay(conn: Connection, image: _Image) -> None:
    for sql in image.tables:
        conn.exec_driver_sql(sql)
    for name, rows in image.rows:
        marks = ", ".join("?" * len(rows[0]))
        conn.exec_driver_sql(f'INSERT INTO "{name}" VALUES ({marks})', list(rows))
    for sql in image.others:
        conn.exec_driver_sql(sql)


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        # The write lock from the start (the driver itself would begin only at the first DML).
        conn.exec_driver_sql("BEGIN IMMEDIATE")


#: The last version of the hand-numbered migrator; the revisions after it are Alembic's own.
LEGACY_HEAD = 17


def _stamp_legacy(conn: Connection, script: ScriptDirectory) -> None:
    """A database of the hand-numbered migrator (and no Alembic yet): stamp its version."""
    from alembic.runtime.migration import MigrationContext
    from alembic.util import CommandError

    inspector = sa.inspect(conn)
    if inspector.has_table("alembic_version") or not inspector.has_table("schema_migrations"):
        return
    version = conn.execute(sa.text("SELECT MAX(version) FROM schema_migrations")).scalar()
    if not version:
        return
    revision = f"{int(version):04d}"
    try:
        if int(version) > LEGACY_HEAD:
            raise CommandError(f"the hand-numbered migrator stopped at {LEGACY_HEAD}")
        script.get_revision(revision)
    except CommandError as exc:
        raise PermanentError(f"the database's schema version {version} is unknown to this release") from exc
    MigrationContext.configure(conn).stamp(script, revision)
    log.info("database of schema version %s stamped at Alembic revision %s", version, revision)
