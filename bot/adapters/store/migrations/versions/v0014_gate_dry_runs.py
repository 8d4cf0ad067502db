"""A gate's dry run, read once when the gate opened.

Carried over unchanged from the hand-numbered migration 14 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "gate_dry_runs",
        sa.MetaData(),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("step_id", sa.String(64), primary_key=True),
        sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    ).create(conn)
