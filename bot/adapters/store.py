"""State store: the only module that imports SQLAlchemy.

One database holds everything that must survive a restart. SQLite (WAL mode) is the embedded
default; PostgreSQL is used by URL when several replicas run. The schema is versioned: migrations
are numbered, applied in order inside transactions, and recorded in `schema_migrations`, so a new
release upgrades an existing database in place and a second replica starting at the same moment
does not apply a migration twice.

Records cross this boundary as frozen dataclasses defined here (plain data); callers above never
see SQLAlchemy rows or sessions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

from bot.errors import PermanentError, TemporaryError

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One line of the audit log: who did what, where, when, and how it ended."""

    at: datetime
    user_id: str
    channel_id: str
    source: str  # "slack" | "terminal" | "scheduler"
    kind: str  # "command" | "action" | …
    subcommand: str
    arguments: str
    outcome: str  # "ok" | "error" | "denied" | "usage" | …
    detail: str = ""
    correlation_id: str = ""
    run_id: str = ""
    id: int | None = None


# ---------------------------------------------------------------------------------------------
# Schema. The table objects below describe the *current* schema for queries; migrations describe
# how each version got there and never change once released.

metadata = sa.MetaData()

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("channel_id", sa.String(64), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("subcommand", sa.String(64), nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("correlation_id", sa.String(32), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
)


snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(64), nullable=False),
    sa.Column("label", sa.String(200), nullable=False),
    sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("taken_by", sa.String(64), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
)


@dataclass(frozen=True, kw_only=True)
class SnapshotMeta:
    id: int
    cluster: str
    label: str
    taken_at: datetime
    taken_by: str
    #: Small JSON object: counts, control-plane version, gaps. Readable without the body.
    summary: str
    size: int


def _m001_audit_and_deliveries(conn: Connection) -> None:
    m = sa.MetaData()
    sa.Table(
        "audit_log",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subcommand", sa.String(64), nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("correlation_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
    )
    sa.Table(
        "deliveries",
        m,
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)


def _m002_snapshots(conn: Connection) -> None:
    m = sa.MetaData()
    table = sa.Table(
        "snapshots",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("taken_by", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    sa.Index("ix_snapshots_cluster_label_taken", table.c.cluster, table.c.label, table.c.taken_at)
    m.create_all(conn)


#: Ordered, append-only. A released migration is never edited; a change is a new entry.
MIGRATIONS: Sequence[tuple[int, str, Callable[[Connection], None]]] = (
    (1, "audit log and delivery de-duplication", _m001_audit_and_deliveries),
    (2, "snapshots", _m002_snapshots),
)


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        # SQLite drops the offset; everything is written in UTC, so naive values are UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Store:
    """The database. `Store.open(url)` connects and migrates; methods are short transactions."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        engine = create_engine(url)
        store = cls(engine)
        if migrate:
            store.migrate()
        return store

    def close(self) -> None:
        self.engine.dispose()

    # -- schema -------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("schema_migrations"):
                return 0
            value = conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar()
            return int(value or 0)

    def migrate(self, now: datetime | None = None) -> list[int]:
        """Apply pending migrations in order; return the versions applied."""
        applied: list[int] = []
        with self.engine.begin() as conn:
            metadata.tables["schema_migrations"].create(conn, checkfirst=True)
        for version, name, step in MIGRATIONS:
            try:
                with self.engine.begin() as conn:
                    done = conn.execute(
                        sa.select(schema_migrations.c.version).where(schema_migrations.c.version == version)
                    ).first()
                    if done:
                        continue
                    # Insert the marker first: a replica migrating concurrently fails on the
                    # primary key and rolls back instead of running the step twice.
                    conn.execute(
                        schema_migrations.insert().values(
                            version=version, name=name, applied_at=now or datetime.now(UTC)
                        )
                    )
                    step(conn)
                    applied.append(version)
                    log.info("applied schema migration %s: %s", version, name)
            except IntegrityError:
                log.info("schema migration %s was applied by another process", version)
        return applied

    def ping(self) -> bool:
        """True when the database answers; used by /readyz."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except SQLAlchemyError:
            log.warning("database ping failed", exc_info=True)
            return False

    # -- deliveries ---------------------------------------------------------------------------

    def claim_delivery(self, key: str, now: datetime) -> bool:
        """Record that the delivery `key` is being handled; False if it was seen before.

        Slack retries deliveries and users double-click; the primary key makes the first claim
        win even across processes sharing the database.
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(deliveries.insert().values(key=key[:200], received_at=_utc(now)))
            return True
        except IntegrityError:
            return False

    def forget_deliveries_before(self, cutoff: datetime) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(deliveries.delete().where(deliveries.c.received_at < _utc(cutoff)))
            return int(result.rowcount or 0)

    # -- audit ----------------------------------------------------------------------------------

    def record_audit(self, entry: AuditEntry) -> int:
        values = _audit_values(entry)
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(audit_log.insert().values(**values))
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def audit_entries(
        self,
        *,
        since: datetime | None = None,
        run_id: str | None = None,
        limit: int | None = None,
    ) -> list[AuditEntry]:
        query = sa.select(audit_log).order_by(audit_log.c.at, audit_log.c.id)
        if since is not None:
            query = query.where(audit_log.c.at >= _utc(since))
        if run_id is not None:
            query = query.where(audit_log.c.run_id == run_id)
        if limit is not None:
            query = query.limit(limit)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            AuditEntry(
                id=row["id"],
                at=_utc(row["at"]),
                user_id=row["user_id"],
                channel_id=row["channel_id"],
                source=row["source"],
                kind=row["kind"],
                subcommand=row["subcommand"],
                arguments=row["arguments"],
                outcome=row["outcome"],
                detail=row["detail"],
                correlation_id=row["correlation_id"],
                run_id=row["run_id"],
            )
            for row in rows
        ]

    # -- snapshots -------------------------------------------------------------------------------

    def save_snapshot(
        self, *, cluster: str, label: str, taken_at: datetime, taken_by: str, summary: str, body: bytes
    ) -> int:
        """Store one snapshot in a single transaction: it is there whole, or not at all."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                snapshots.insert().values(
                    cluster=cluster[:64],
                    label=label[:200],
                    taken_at=_utc(taken_at),
                    taken_by=taken_by[:64],
                    summary=summary,
                    size=len(body),
                    body=body,
                )
            )
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def snapshot_body(self, snapshot_id: int) -> tuple[SnapshotMeta, bytes] | None:
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(snapshots).where(snapshots.c.id == snapshot_id)).mappings().first()
        if row is None:
            return None
        return _snapshot_meta(row), bytes(row["body"])

    def snapshots(
        self, *, cluster: str | None = None, label: str | None = None, limit: int = 20
    ) -> list[SnapshotMeta]:
        """Newest first, without bodies."""
        cols = [c for c in snapshots.c if c.name != "body"]
        query = sa.select(*cols).order_by(snapshots.c.taken_at.desc(), snapshots.c.id.desc()).limit(limit)
        if cluster is not None:
            query = query.where(snapshots.c.cluster == cluster)
        if label is not None:
            query = query.where(snapshots.c.label == label)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_snapshot_meta(r) for r in rows]


def _snapshot_meta(row: Any) -> SnapshotMeta:
    return SnapshotMeta(
        id=int(row["id"]),
        cluster=row["cluster"],
        label=row["label"],
        taken_at=_utc(row["taken_at"]),
        taken_by=row["taken_by"],
        summary=row["summary"],
        size=int(row["size"]),
    )


def _audit_values(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": _utc(entry.at),
        "user_id": entry.user_id[:64],
        "channel_id": entry.channel_id[:64],
        "source": entry.source[:16],
        "kind": entry.kind[:32],
        "subcommand": entry.subcommand[:64],
        "arguments": entry.arguments,
        "outcome": entry.outcome[:32],
        "detail": entry.detail,
        "correlation_id": entry.correlation_id[:32],
        "run_id": entry.run_id[:64],
    }


@contextlib.contextmanager
def _wrap_errors() -> Iterator[None]:
    """Translate SQLAlchemy failures into the bot's error tree (locked/unreachable → temporary)."""
    try:
        yield
    except OperationalError as exc:
        raise TemporaryError("the database is busy or unreachable") from exc
    except SQLAlchemyError as exc:
        raise PermanentError("the database refused the operation") from exc


def create_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get their directory, WAL and a busy timeout."""
    if url.startswith("sqlite"):
        db_path = sa.engine.make_url(url).database
        if db_path and db_path != ":memory:":
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        # Worker threads share the engine; SQLite's own locking serialises writers, and the busy
        # timeout makes a writer wait for the lock instead of failing at once.
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if url.startswith("postgresql://"):
        # psycopg 3 is the driver we ship in the `postgres` extra.
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return sa.create_engine(url, pool_pre_ping=True)
