"""Message claim owners and the inbox of acknowledged requests.

Carried over unchanged from the hand-numbered migration 6 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("ALTER TABLE run_messages ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT ''"))
    conn.execute(sa.text("ALTER TABLE run_messages ADD COLUMN body TEXT NOT NULL DEFAULT ''"))
    sa.Table(
        "inbox",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)
