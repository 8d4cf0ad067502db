"""Who confirmed a completed announcement (issue 39): the presses of its "Verified" button."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.adapters.store.audit import _insert_audit
from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import announcement_verifications
from bot.records import AuditEntry, VerificationRow


class Verifications(StoreBase):
    """One row per person and announcement, in the order they confirmed."""

    def record_verification(self, row: VerificationRow, audit: Sequence[AuditEntry] = ()) -> bool:
        """Store `row` and its audit in one transaction; False (and nothing written) when this
        person confirmed this announcement already: a double click, a retried delivery, another
        replica."""
        with _wrap_errors():
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        announcement_verifications.insert().values(
                            announcement_id=row.announcement_id, user_id=row.user_id[:64], at=_utc(row.at)
                        )
                    )
                    _insert_audit(conn, audit)
            except IntegrityError:
                return False
        return True

    def verifications(self, announcement_id: int) -> list[VerificationRow]:
        """Who confirmed `announcement_id`, first first."""
        query = (
            sa.select(announcement_verifications)
            .where(announcement_verifications.c.announcement_id == announcement_id)
            .order_by(announcement_verifications.c.id)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            return [
                VerificationRow(
                    announcement_id=int(r["announcement_id"]), user_id=str(r["user_id"]), at=_utc(r["at"])
                )
                for r in conn.execute(query).mappings()
            ]
