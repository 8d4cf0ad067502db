"""Waivers: accepted findings, confirmed by two people when Required.

Carried over unchanged from the hand-numbered migration 17 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "waivers",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("finding", sa.String(64), nullable=False),
        sa.Column("objects", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("required", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("requested_by", sa.String(64), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_by", sa.String(64), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(64), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Index("ix_waivers_cluster_state", "cluster", "state"),
    ).create(conn)
