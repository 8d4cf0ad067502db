"""Fleet runs (issue 41): the parent row, its members and its gate votes.

A member is one cluster, with the plan of its child run pinned when the fleet started; a vote is
one approval of a stage's before/after gate."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision: str | None = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    meta = sa.MetaData()
    sa.Table(
        "fleet_runs",
        meta,
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("plan_text", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("stage", sa.Integer, nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("soak_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "fleet_members",
        meta,
        sa.Column("fleet_id", sa.String(64), primary_key=True),
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("stage", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("plan_text", sa.Text, nullable=False),
    )
    sa.Table(
        "fleet_votes",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("fleet_id", sa.String(64), nullable=False),
        sa.Column("stage", sa.Integer, nullable=False),
        sa.Column("gate", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("roles", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("fleet_id", "stage", "gate", "user_id", name="uq_fleet_votes_one_per_person"),
    )
    meta.create_all(conn)
