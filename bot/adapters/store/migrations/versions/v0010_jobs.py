"""Cluster jobs: cordon, drain, restart and node-group waits.

Carried over unchanged from the hand-numbered migration 10 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "jobs",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(100), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("ok", sa.Boolean, nullable=True),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("progress", sa.Text, nullable=False),
        sa.Column("card", sa.Text, nullable=False),
        sa.Column("choice_key", sa.String(200), nullable=False),
        sa.Column("choice", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)
