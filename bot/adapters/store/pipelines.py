"""Pipeline hooks (issue 43): the build reports signed hooks sent for a run's steps, and the
signatures already accepted (a replayed request is refused on every replica: the table is shared)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.adapters.store.base import StoreBase, _from_row, _to_row, _utc, _wrap_errors
from bot.adapters.store.schema import hook_signatures, pipeline_builds
from bot.records import PipelineBuild


class PipelineHooks(StoreBase):
    """Build reports by run, in the order they came; signatures seen, until they expire."""

    def claim_hook_signature(
        self, *, source: str, signature: str, now: datetime, expires_at: datetime
    ) -> bool:
        """Record `signature` as used until `expires_at`; False when it was used already (a
        replay). Signatures past their expiry are forgotten first: their requests are stale
        anyway, refused by their timestamp."""
        with _wrap_errors():
            with self.engine.begin() as conn:
                conn.execute(hook_signatures.delete().where(hook_signatures.c.expires_at < _utc(now)))
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        hook_signatures.insert().values(
                            signature=signature[:128], source=source[:64], expires_at=_utc(expires_at)
                        )
                    )
            except IntegrityError:
                return False
        return True

    def hook_signature_count(self) -> int:
        """How many signatures are kept (for tests and the operator's curiosity)."""
        with _wrap_errors(), self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(hook_signatures)).scalar_one())

    def record_pipeline_build(self, build: PipelineBuild) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(pipeline_builds.insert().values(**_to_row(build)))

    def pipeline_builds(self, run_id: str) -> list[PipelineBuild]:
        """Every build report of run `run_id`, oldest first."""
        with _wrap_errors(), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(pipeline_builds)
                .where(pipeline_builds.c.run_id == run_id[:64])
                .order_by(pipeline_builds.c.id)
            ).all()
        return [_from_row(PipelineBuild, r._mapping) for r in rows]
