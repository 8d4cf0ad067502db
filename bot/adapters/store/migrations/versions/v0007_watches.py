"""Watches of a cluster's rollout status.

Carried over unchanged from the hand-numbered migration 7 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "watches",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(100), nullable=False),
        sa.Column("nodegroups", sa.Text, nullable=False),
        sa.Column("namespaces", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("stop", sa.Text, nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("step_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.Text, nullable=False),
        sa.Column("end_requested_by", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)
