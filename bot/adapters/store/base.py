"""What every part of the store shares: the engine, UTC on the way out, the error translation."""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from bot.errors import DatabaseUnwritable, PermanentError, TemporaryError

R = TypeVar("R")


class StoreBase:
    engine: Engine

    def _by_id(self, table: sa.Table, row_id: int, convert: Callable[[Any], R]) -> R | None:
        """The row of `table` whose integer `id` is `row_id`, as `convert` makes it; None when there
        is none (or `row_id` could not be one)."""
        if not _storable_id(row_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(table).where(table.c.id == row_id)).mappings().first()
        return convert(row) if row else None

    def _changed_one(self, statement: sa.Update) -> bool:
        """Run the compare-and-set `statement` in a transaction of its own: True when it changed
        its one row, False when the row was not as its `where` expects (nothing written)."""
        with _wrap_errors(), self.engine.begin() as conn:
            return bool(conn.execute(statement).rowcount == 1)

    def _rows(self, query: sa.Select[Any], convert: Callable[[Any], R]) -> list[R]:
        """The rows `query` selects, each as `convert` makes it."""
        with _wrap_errors(), self.engine.connect() as conn:
            return [convert(r) for r in conn.execute(query).mappings()]

    def _newest_of_step(
        self, table: sa.Table, run_id: str, step_id: str, convert: Callable[[Any], R]
    ) -> R | None:
        """The newest row of `table` (a job, a watch) that a run's step started, as `convert` makes
        it (a resumed step continues the same one); None when it started none."""
        query = (
            sa.select(table)
            .where(table.c.run_id == run_id, table.c.step_id == step_id)
            .order_by(table.c.id.desc())
            .limit(1)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return convert(row) if row else None

    def _heartbeat(self, table: sa.Table, row_id: int, *, owner: str, now: datetime) -> bool:
        """Keep driving the live row `row_id` of `table`: False when it is no longer `owner`'s."""
        return self._changed_one(
            table.update().where(_driven_by(table, row_id, owner)).values(heartbeat_at=_utc(now))
        )


def _driven_by(table: sa.Table, row_id: int, owner: str) -> sa.ColumnElement[bool]:
    """The live row `row_id` of `table` (a job, a watch) while `owner` drives it: the fence that
    every write by its driver goes through."""
    return sa.and_(table.c.id == row_id, table.c.owner == owner[:64], table.c.state == "live")


def _maybe_utc(value: datetime | None) -> datetime | None:
    return _utc(value) if value is not None else None


def _storable_id(value: int) -> bool:
    # Ids are typed by people (`diff 12 13`, `schedule cancel 7`); one past a 64-bit integer would
    # make the database driver raise instead of simply finding nothing.
    return 0 < value < 2**63


#: The drivers' words for a database that answers but cannot write (SQLite's, PostgreSQL's), and
#: what the bot says of each.
_UNWRITABLE = (
    (("database or disk is full", "could not extend file", "no space left"), "the database's disk is full"),
    (("readonly database", "read-only"), "the database is read-only (its file or folder cannot be written)"),
    (("disk i/o error", "input/output error"), "the database's disk failed (I/O error)"),
)


def database_failed(exc: OperationalError) -> TemporaryError:
    """What an operational failure of the database is, said as the bot says it: a disk that is
    full, a read-only file or a failing disk (`DatabaseUnwritable`: only an operator mends it), else
    busy or unreachable (it may pass). The driver's own words stay in the cause, for the log."""
    words = str(getattr(exc, "orig", "") or exc).lower()
    for needles, said in _UNWRITABLE:
        if any(n in words for n in needles):
            return DatabaseUnwritable(said)
    return TemporaryError("the database is busy or unreachable")


def driver_words(exc: BaseException) -> str:
    """The database driver's message behind a store error (no SQL, no parameters): for the log."""
    cause = exc.__cause__
    return str(getattr(cause, "orig", "") or "")[:300]


@contextlib.contextmanager
def _wrap_errors() -> Iterator[None]:
    """Translate SQLAlchemy failures into the bot's error tree (locked/unreachable → temporary)."""
    try:
        yield
    except OperationalError as exc:
        raise database_failed(exc) from exc
    except SQLAlchemyError as exc:
        raise PermanentError("the database refused the operation") from exc


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        # SQLite drops the offset; everything is written in UTC, so naive values are UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _optional_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


#: How a column comes back as a record field of this type (SQLite returns integers for booleans,
#: naive datetimes); a field of another type takes the column's value as it is.
_FROM_COLUMN: dict[Any, Callable[[Any], Any]] = {
    int: int,
    bool: bool,
    datetime: _utc,
    (datetime, None): _maybe_utc,
    (bool, None): _optional_bool,
}


#: How a record field of this type is written to its column (everything is stored in UTC); a
#: field of another type is written as it is.
_TO_COLUMN: dict[Any, Callable[[Any], Any]] = {datetime: _utc, (datetime, None): _maybe_utc}


#: Record type → (field name, its type as `_FROM_COLUMN` and `_TO_COLUMN` key it) in field order,
#: worked out once per type.
_HINTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _field_hints(record: type) -> tuple[tuple[str, Any], ...]:
    known = _HINTS.get(record)
    if known is not None:
        return known
    hints = typing.get_type_hints(record)
    found = []
    for field in dataclasses.fields(record):
        hint = hints[field.name]
        if isinstance(hint, types.UnionType):
            args = typing.get_args(hint)
            if len(args) == 2 and args[1] is type(None):
                hint = (args[0], None)
        found.append((field.name, hint))
    _HINTS[record] = tuple(found)
    return _HINTS[record]


#: Record type → (field name, its reader by type) in field order, worked out once per type.
_READERS: dict[type, tuple[tuple[str, Callable[[Any], Any] | None], ...]] = {}


def _from_row(record: type[R], row: Any, **read: Callable[[Any], Any]) -> R:
    """The record (a dataclass) whose fields are the row's columns of the same names, each read by
    its type (`_FROM_COLUMN`) or by `read[name]` where the column is stored otherwise (JSON, a list)."""
    readers = _READERS.get(record)
    if readers is None:
        readers = _READERS[record] = tuple(
            (name, _FROM_COLUMN.get(hint)) for name, hint in _field_hints(record)
        )
    values = {}
    for name, by_type in readers:
        reader = read.get(name, by_type)
        values[name] = reader(row[name]) if reader is not None else row[name]
    return record(**values)


def _to_row(record: Any, **write: Callable[[Any], Any]) -> dict[str, Any]:
    """The columns of the same names as the fields of `record` (a dataclass), each written by its
    type (`_TO_COLUMN`) or by `write[name]` where the column is stored otherwise: `_from_row`'s
    reverse."""
    values = {}
    for name, hint in _field_hints(type(record)):
        writer = write.get(name, _TO_COLUMN.get(hint))
        value = getattr(record, name)
        values[name] = writer(value) if writer is not None else value
    return values
