"""The audit log: who did what, when, with what outcome."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import audit_log
from bot.records import AuditEntry


class AuditLog(StoreBase):
    """The audit log's rows."""

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
        correlation_id: str | None = None,
    ) -> list[AuditEntry]:
        query = sa.select(audit_log).order_by(audit_log.c.at, audit_log.c.id)
        if correlation_id is not None:
            query = query.where(audit_log.c.correlation_id == correlation_id)
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


def _insert_audit(conn: Connection, audit: Sequence[AuditEntry]) -> None:
    """The audit rows of a change, inside its transaction (they stand or fall with it)."""
    for entry in audit:
        conn.execute(audit_log.insert().values(**_audit_values(entry)))


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
