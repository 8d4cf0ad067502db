"""Migrations: Alembic's `upgrade head`, run by the store at start-up with the revisions shipped in
`migrations/versions/` (no alembic.ini at run time).

A database made before Alembic recorded its hand-numbered version in `schema_migrations`; it is
stamped at the revision of the same number first, then upgraded in place. That table stays as it
was (a release before this one, started on the database by a rollback, finds its own version).

Several replicas may start at once: the whole upgrade is one transaction (SQLite and PostgreSQL
both have transactional DDL) that first takes the migration lock — `BEGIN IMMEDIATE` on SQLite,
a transaction-scoped advisory lock on PostgreSQL — so the second replica waits, then finds the
database at head and applies nothing.
"""

from __future__ import annotations

import logging
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


def upgrade(engine: Engine, target: str = "head") -> list[str]:
    """Bring the database to `target` (normally head); return the revisions applied, in order."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.util import CommandError

    script = script_directory()
    with engine.connect() as conn:
        _lock(conn)
        _stamp_legacy(conn, script)
        current = MigrationContext.configure(conn).get_current_revision()
        try:
            pending = list(script.iterate_revisions(target, current))
        except CommandError as exc:
            raise PermanentError(
                f"the database's schema revision {current} is unknown to this release: {exc}"
            ) from exc
        pending.reverse()
        if pending:
            config = Config()
            config.set_main_option("script_location", str(SCRIPT_LOCATION))
            config.attributes["connection"] = conn
            command.upgrade(config, target)
            for s in pending:
                log.info("applied schema migration %s: %s", s.revision, s.doc)
        conn.commit()
    return [s.revision for s in pending]


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
