"""The leader's lease (epoch as fencing token) and replica heartbeats.

Carried over unchanged from the hand-numbered migration 9 (`schema_migrations`).
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    m = sa.MetaData()
    table = sa.Table(
        "leadership",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "replicas",
        m,
        sa.Column("owner", sa.String(64), primary_key=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)
    # The one row exists from the start, so taking the lease is always an UPDATE (compare-and-set).
    never = datetime(1970, 1, 1, tzinfo=UTC)
    conn.execute(
        table.insert().values(id=1, holder="", epoch=0, acquired_at=never, renewed_at=never, expires_at=never)
    )
