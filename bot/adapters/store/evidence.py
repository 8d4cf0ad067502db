"""Evidence baselines: what a run's snapshot recorded of its cluster's alerts and analysis
queries (issue 39), written once per snapshot and read by the evidence jobs of the run."""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa

from bot.adapters.store.base import StoreBase, _utc, _wrap_errors
from bot.adapters.store.schema import evidence_baselines
from bot.records import EvidenceBaselineRow


class EvidenceBaselines(StoreBase):
    """Baselines by run: the earliest of a run (its `pre` snapshot) is the one compared against."""

    def save_evidence_baseline(
        self, *, snapshot_id: int, run_id: str, cluster: str, taken_at: datetime, body: dict[str, object]
    ) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                evidence_baselines.insert().values(
                    snapshot_id=snapshot_id,
                    run_id=run_id[:64],
                    cluster=cluster[:64],
                    taken_at=_utc(taken_at),
                    body=json.dumps(body, sort_keys=True),
                )
            )

    def evidence_baseline(self, run_id: str) -> EvidenceBaselineRow | None:
        """The run's baseline: recorded with its earliest snapshot; None when none was."""
        query = (
            sa.select(evidence_baselines)
            .where(evidence_baselines.c.run_id == run_id[:64])
            .order_by(evidence_baselines.c.taken_at, evidence_baselines.c.id)
            .limit(1)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        return EvidenceBaselineRow(
            snapshot_id=int(row["snapshot_id"]),
            run_id=str(row["run_id"]),
            cluster=str(row["cluster"]),
            taken_at=_utc(row["taken_at"]),
            body=json.loads(row["body"]),
        )
