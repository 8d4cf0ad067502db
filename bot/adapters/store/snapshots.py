"""Cluster snapshots: metadata and compressed bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.adapters.store.base import StoreBase, _from_row, _storable_id, _utc, _wrap_errors
from bot.adapters.store.schema import snapshots
from bot.records import SnapshotMeta


class Snapshots(StoreBase):
    """Snapshots, their metadata listed apart from their bodies."""

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
        if not _storable_id(snapshot_id):
            return None
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
    return _from_row(SnapshotMeta, row)
