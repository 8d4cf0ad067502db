"""Watch samples (issue 31): a watch's unhealthy pods by class over time, for the run report.

A watch writes a sample when its counts changed, at most every 30 s of its clock, and at most
`bot.adapters.store.watches.MAX_SAMPLES` per watch.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision: str | None = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "watch_samples",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("watch_id", sa.Integer, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("counts", sa.Text, nullable=False),
        sa.Index("ix_watch_samples_watch_at", "watch_id", "at"),
    ).create(conn)
