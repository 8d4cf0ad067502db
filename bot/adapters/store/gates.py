"""A gate's dry run, read from the cluster once when the gate opened."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import gate_dry_runs
from bot.errors import PermanentError


class GateDryRuns(StoreBase):
    """Each gate's dry run, kept once."""

    def save_gate_dry_run(self, *, run_id: str, step_id: str, epoch: int, at: datetime, body: str) -> bool:
        """Keep the dry run of a gate (a step at an epoch); False when one was kept before (another
        worker or replica was first: theirs is the one shown)."""
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                conn.execute(
                    gate_dry_runs.insert().values(
                        run_id=run_id, step_id=step_id, epoch=epoch, computed_at=_utc(at), body=body
                    )
                )
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False
            raise
        return True

    def gate_dry_run(self, *, run_id: str, step_id: str, epoch: int) -> str | None:
        """The kept dry run of a gate (its JSON body), or None."""
        query = sa.select(gate_dry_runs.c.body).where(
            gate_dry_runs.c.run_id == run_id,
            gate_dry_runs.c.step_id == step_id,
            gate_dry_runs.c.epoch == epoch,
        )
        with _wrap_errors(), self.engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else str(value)
