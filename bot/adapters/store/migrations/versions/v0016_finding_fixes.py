"""The run a known issue's Fix button started, one per finding.

Carried over unchanged from the hand-numbered migration 16 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "finding_fixes",
        sa.MetaData(),
        sa.Column("subject", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("clicked_by", sa.String(64), nullable=False),
        sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, server_default=""),
    ).create(conn)
