"""Audit log and delivery de-duplication.

Carried over unchanged from the hand-numbered migration 1 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    m = sa.MetaData()
    sa.Table(
        "audit_log",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subcommand", sa.String(64), nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("correlation_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
    )
    sa.Table(
        "deliveries",
        m,
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)
