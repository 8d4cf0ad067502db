"""Slack display names (issue 40 item 5e): `users.info` answers, cached per user with when they
were fetched, for the report and the terminal."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    sa.Table(
        "people",
        sa.MetaData(),
        sa.Column("user_id", sa.String(64), primary_key=True),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
    ).create(conn)
