"""Schedules and scheduled announcements.

Carried over unchanged from the hand-numbered migration 4 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    m = sa.MetaData()
    sa.Table(
        "schedules",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("plan_name", sa.String(100), nullable=False, index=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("override_reason", sa.Text, nullable=False),
    )
    sa.Table(
        "scheduled_announcements",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("schedule_id", sa.Integer, nullable=False, index=True),
        sa.Column("plan_name", sa.String(100), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("template", sa.String(32), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        # The same message (subject, template, due instant) can be stored only once.
        sa.Column("dedup_key", sa.String(200), nullable=False, unique=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("delayed", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)
