"""Leadership: the leader's lease (epoch as fencing token) and the replicas' heartbeats."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import leadership, replicas
from bot.records import Lease


class Leadership(StoreBase):
    """The lease, the replicas' heartbeats, and the fence check for a duty about to write elsewhere."""

    def acquire_lease(
        self,
        holder: str,
        *,
        epoch: int,
        duration: timedelta,
        force: bool = False,
        grace: timedelta = timedelta(0),
    ) -> Lease:
        """Renew the lease when `holder` holds it with `epoch`, else take it when free or expired.

        The lease as it stands afterwards is returned: `lease.held_by(holder)` says this replica
        leads, with `lease.epoch`. Compare-and-set: the UPDATE matches only the holder and epoch
        read in the same transaction, so of two replicas racing for an expired lease one wins; the
        epoch grows with every change of holder. Times come from the database's clock (PostgreSQL
        `clock_timestamp()`), so replicas whose clocks disagree still agree on expiry. The
        heartbeat of `holder` (`live_replicas`) is written in the same transaction. `force` takes
        it even when another holds it (SQLite at start: its one replica is the leader, and a
        holder that is still there is fenced off by the new epoch).
        """
        with _wrap_errors(), self.engine.begin() as conn:
            now = _db_now(conn)
            row = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
            cur_holder, cur_epoch = str(row["holder"]), int(row["epoch"])
            mine = cur_holder == holder and cur_epoch == epoch and epoch > 0
            if mine:
                values: dict[str, Any] = {"renewed_at": now, "expires_at": now + duration}
            elif force or not cur_holder or _utc(row["expires_at"]) + grace <= now:
                values = {
                    "holder": holder[:64],
                    "epoch": cur_epoch + 1,
                    "acquired_at": now,
                    "renewed_at": now,
                    "expires_at": now + duration,
                }
            else:
                values = {}
            if values:
                conn.execute(
                    leadership.update()
                    .where(
                        leadership.c.id == 1,
                        leadership.c.holder == cur_holder,
                        leadership.c.epoch == cur_epoch,
                    )
                    .values(**values)
                )
            seen = conn.execute(replicas.update().where(replicas.c.owner == holder[:64]).values(seen_at=now))
            if seen.rowcount == 0:
                conn.execute(replicas.insert().values(owner=holder[:64], seen_at=now))
            after = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
        return _lease(after, now)

    def release_lease(self, holder: str, *, epoch: int) -> bool:
        """Give the lease up (a graceful shutdown), so another replica takes it at once; False when
        `holder` no longer held it with `epoch`. Its heartbeat goes too: the process is leaving."""
        with _wrap_errors(), self.engine.begin() as conn:
            now = _db_now(conn)
            result = conn.execute(
                leadership.update()
                .where(leadership.c.id == 1, leadership.c.holder == holder, leadership.c.epoch == epoch)
                .values(holder="", expires_at=now)
            )
            conn.execute(replicas.delete().where(replicas.c.owner == holder[:64]))
        return bool(result.rowcount == 1)

    def lease(self) -> Lease:
        """The lease as it stands now (read only)."""
        with _wrap_errors(), self.engine.connect() as conn:
            now = _db_now(conn)
            row = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
        return _lease(row, now)

    def live_replicas(self, within: timedelta) -> set[str]:
        """The replicas (their owner names) that renewed or tried the lease within `within`."""
        with _wrap_errors(), self.engine.connect() as conn:
            cutoff = _db_now(conn) - within
            rows = conn.execute(sa.select(replicas.c.owner, replicas.c.seen_at)).all()
        return {str(owner) for owner, seen in rows if _utc(seen) >= cutoff}

    @property
    def single_host(self) -> bool:
        """SQLite: one file on one host, so one replica — it leads from its start."""
        return self.engine.dialect.name == "sqlite"

    def check_fence(self) -> None:
        """Raise `Fenced` when the fence in force (`fencing`) is stale; nothing outside a duty.

        For a duty about to do something that writes to Slack before the database (a card edit).
        """
        with _wrap_errors(), self.engine.begin():
            pass


def _db_now(conn: Connection) -> datetime:
    """The database's time: replicas on several hosts agree on it, whatever their own clocks say.
    (SQLite has no server: its one replica's clock is the database's.)"""
    if conn.dialect.name == "postgresql":
        return _utc(conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one())
    return datetime.now(UTC)


def _lease(row: Any, now: datetime) -> Lease:
    return Lease(
        holder=str(row["holder"]),
        epoch=int(row["epoch"]),
        acquired_at=_utc(row["acquired_at"]),
        renewed_at=_utc(row["renewed_at"]),
        expires_at=_utc(row["expires_at"]),
        now=now,
    )
