"""Pipeline hooks (issue 43): the build reports of signed hooks, and the signatures seen.

A signature is kept until its request's replay window is over, so the same signed request sent
again is refused on every replica; expired ones are pruned as new ones are claimed."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision: str | None = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    meta = sa.MetaData()
    sa.Table(
        "pipeline_builds",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("job", sa.String(200), nullable=False),
        sa.Column("build", sa.String(100), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("revision", sa.String(100), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "hook_signatures",
        meta,
        sa.Column("signature", sa.String(128), primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )
    meta.create_all(conn)
