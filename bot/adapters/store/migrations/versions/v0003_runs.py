"""Plans, runs, steps, approvals and Slack message references.

Carried over unchanged from the hand-numbered migration 3 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    m = sa.MetaData()
    sa.Table(
        "plans",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, index=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("loaded_by", sa.String(64), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "runs",
        m,
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("plan_name", sa.String(100), nullable=False),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("roster", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "run_steps",
        m,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("step_id", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("escalations", sa.Integer, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
    )
    table = sa.Table(
        "approvals",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("phase", sa.String(8), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("roles", sa.String(200), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    # A second click by the same person on the same gate state can never be stored twice.
    sa.Index(
        "ux_approvals_once",
        table.c.run_id,
        table.c.step_id,
        table.c.phase,
        table.c.epoch,
        table.c.user_id,
        table.c.decision,
        unique=True,
    )
    sa.Table(
        "run_messages",
        m,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)
