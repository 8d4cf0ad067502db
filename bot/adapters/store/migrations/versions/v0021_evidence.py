"""Evidence at the gates (issue 39): the baseline a run's snapshot records — the alerts firing and
each `analysis` query's value then — so a resumed run compares against the same set."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision: str | None = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "evidence_baselines",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("snapshot_id", sa.Integer, nullable=False, unique=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Index("ix_evidence_baselines_run", "run_id", "taken_at"),
    ).create(conn)
