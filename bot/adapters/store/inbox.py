"""Requests from Slack: delivery de-duplication and the inbox of acknowledged requests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.adapters.store.base import StoreBase, _from_row, _storable_id, _utc, _wrap_errors, database_failed
from bot.adapters.store.engine import SQLITE_BUSY_SECONDS
from bot.adapters.store.schema import deliveries, inbox
from bot.records import InboxItem


class Inbox(StoreBase):
    """De-duplicated deliveries and the inbox's items, from acknowledgement to done or dead."""

    def claim_delivery(self, key: str, now: datetime, *, wait: float | None = None) -> bool:
        """Record that the delivery `key` is being handled; False if it was seen before.

        Slack retries deliveries and users double-click; the primary key makes the first claim
        win even across processes sharing the database. `wait`: at most this many seconds for a
        SQLite lock another process holds (the request's acknowledgement is due within 3 s; the
        engine's own busy timeout is 30 s), then the database is busy.
        """
        with _wrap_errors():  # the database down: a temporary error, which the Slack door says
            try:
                with self.engine.begin() as conn:
                    short = wait is not None and conn.dialect.name == "sqlite"
                    if short:
                        conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(float(wait or 0) * 1000)}")
                    try:
                        conn.execute(deliveries.insert().values(key=key[:200], received_at=_utc(now)))
                    finally:
                        if short:
                            conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_SECONDS * 1000)}")
            except IntegrityError:  # the key is there already: a retry, a second click
                return False
        return True

    def forget_deliveries_before(self, cutoff: datetime) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(deliveries.delete().where(deliveries.c.received_at < _utc(cutoff)))
            return int(result.rowcount or 0)

    def inbox_put(self, *, key: str, kind: str, payload: str, at: datetime, owner: str = "") -> int | None:
        """Store a request before it is acknowledged; None when the same key is already there."""
        try:
            with self.engine.begin() as conn:
                result = conn.execute(
                    inbox.insert().values(
                        key=key[:200],
                        kind=kind,
                        payload=payload,
                        received_at=_utc(at),
                        state="pending",
                        attempts=0,
                        owner=owner[:64],
                    )
                )
                return int(result.inserted_primary_key[0])  # type: ignore[index]
        except IntegrityError:
            return None
        except OperationalError as exc:
            raise database_failed(exc) from exc

    def inbox_take(self, item_id: int, *, owner: str, was: str) -> bool:
        """Take a pending item over from `was` (gone) to work it off here; False when another
        replica took it first or it was done meanwhile."""
        return self._changed_one(
            inbox.update()
            .where(inbox.c.id == item_id, inbox.c.state == "pending", inbox.c.owner == was[:64])
            .values(owner=owner[:64])
        )

    def inbox_pending(self, *, limit: int = 500) -> list[InboxItem]:
        query = sa.select(inbox).where(inbox.c.state == "pending").order_by(inbox.c.id).limit(limit)
        return self._rows(query, _inbox_item)

    def inbox_item(self, item_id: int) -> InboxItem | None:
        return self._by_id(inbox, item_id, _inbox_item)

    def inbox_attempt(self, item_id: int) -> None:
        """Count an attempt before working an item off (a request that kills the bot is not retried forever)."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(inbox.update().where(inbox.c.id == item_id).values(attempts=inbox.c.attempts + 1))

    def inbox_done(self, item_id: int, *, at: datetime) -> bool:
        """Mark an item worked off; False when it already was (someone else finished it first)."""
        return self._inbox_move(item_id, "pending", state="done", done_at=_utc(at))

    def inbox_failed(self, item_id: int, *, failure: str) -> None:
        """Note how an attempt failed (the operator's `inbox list` shows it)."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(inbox.update().where(inbox.c.id == item_id).values(failure=failure[:1000]))

    def inbox_set_aside(self, item_id: int, *, at: datetime, failure: str = "") -> bool:
        """Set a pending item aside as a dead letter; False when it was not pending (so whoever
        sets it aside first is the only one who tells the person)."""
        values: dict[str, Any] = {"state": "dead", "done_at": _utc(at)}
        if failure:
            values["failure"] = failure[:1000]
        return self._inbox_move(item_id, "pending", **values)

    def inbox_items(self, *, states: Sequence[str] = ("dead",), limit: int = 200) -> list[InboxItem]:
        """Items in `states`, oldest first (dead letters by default)."""
        query = sa.select(inbox).where(inbox.c.state.in_(list(states))).order_by(inbox.c.id).limit(limit)
        return self._rows(query, _inbox_item)

    def inbox_retry(self, item_id: int) -> bool:
        """A dead letter back to pending, its attempts from zero and no owner (so the leader's
        next pass works it off); False when it is not a dead letter."""
        if not _storable_id(item_id):
            return False
        return self._inbox_move(item_id, "dead", state="pending", attempts=0, owner="", done_at=None)

    def inbox_drop(self, item_id: int, *, at: datetime) -> bool:
        """A dead letter dropped for good (kept until forgotten with the done ones)."""
        if not _storable_id(item_id):
            return False
        return self._inbox_move(item_id, "dead", state="dropped", done_at=_utc(at))

    def _inbox_move(self, item_id: int, was: str, **values: Any) -> bool:
        """Change an item that is in state `was` (`values`: its new state and what goes with it);
        False when it is not (someone else changed it first), so one change wins."""
        return self._changed_one(
            inbox.update().where(inbox.c.id == item_id, inbox.c.state == was).values(**values)
        )

    def forget_inbox_before(self, cutoff: datetime) -> int:
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.delete().where(
                    inbox.c.state.in_(["done", "dropped"]), inbox.c.received_at < _utc(cutoff)
                )
            )
        return int(result.rowcount or 0)


def _inbox_item(r: Any) -> InboxItem:
    return _from_row(InboxItem, r)
