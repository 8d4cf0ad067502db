"""Who confirmed a completed announcement (issue 39): one row per person who pressed "Verified".

The unique (announcement, user) pair makes a double click, a retried delivery or two replicas
recording the same press store it once."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision: str | None = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    meta = sa.MetaData()
    sa.Table(
        "announcement_verifications",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("announcement_id", sa.Integer, nullable=False, index=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("announcement_id", "user_id", name="uq_announcement_verifications_once"),
    )
    meta.create_all(conn)
