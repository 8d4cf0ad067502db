"""What every part of the store shares: the engine, UTC on the way out, the error translation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from bot.errors import PermanentError, TemporaryError


class StoreBase:
    engine: Engine


def _maybe_utc(value: datetime | None) -> datetime | None:
    return _utc(value) if value is not None else None


def _storable_id(value: int) -> bool:
    # Ids are typed by people (`diff 12 13`, `schedule cancel 7`); one past a 64-bit integer would
    # make the database driver raise instead of simply finding nothing.
    return 0 < value < 2**63


@contextlib.contextmanager
def _wrap_errors() -> Iterator[None]:
    """Translate SQLAlchemy failures into the bot's error tree (locked/unreachable → temporary)."""
    try:
        yield
    except OperationalError as exc:
        raise TemporaryError("the database is busy or unreachable") from exc
    except SQLAlchemyError as exc:
        raise PermanentError("the database refused the operation") from exc


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        # SQLite drops the offset; everything is written in UTC, so naive values are UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
