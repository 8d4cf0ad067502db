"""A known issue's Fix button: one run per finding, however often it is clicked."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import finding_fixes
from bot.errors import PermanentError


class FindingFixes(StoreBase):
    """Each finding's one fix: claimed, recorded, released."""

    def claim_fix(self, *, subject: str, key: str, by: str, at: datetime) -> bool:
        """Claim the one fix of a finding (`subject`: its watch, `key`: its milestone) for `by`;
        False when it was claimed before (a double click, a second person)."""
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                conn.execute(
                    finding_fixes.insert().values(
                        subject=subject[:64],
                        key=key[:200],
                        clicked_by=by[:64],
                        clicked_at=_utc(at),
                        run_id="",
                    )
                )
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False
            raise
        return True

    def finding_fix(self, *, subject: str, key: str) -> tuple[str, str] | None:
        """(who clicked, the run it started or "" while it starts) of a finding's fix, or None."""
        query = sa.select(finding_fixes.c.clicked_by, finding_fixes.c.run_id).where(
            finding_fixes.c.subject == subject[:64], finding_fixes.c.key == key[:200]
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (str(row[0]), str(row[1])) if row is not None else None

    def record_fix(self, *, subject: str, key: str, run_id: str) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                finding_fixes.update()
                .where(finding_fixes.c.subject == subject[:64], finding_fixes.c.key == key[:200])
                .values(run_id=run_id[:64])
            )

    def release_fix(self, *, subject: str, key: str) -> None:
        """Give up a claim whose run was refused (nothing started), so a later click may start one."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                finding_fixes.delete().where(
                    finding_fixes.c.subject == subject[:64],
                    finding_fixes.c.key == key[:200],
                    finding_fixes.c.run_id == "",
                )
            )
