"""Inbox dead letters: how an item's last attempt failed.

Carried over unchanged from the hand-numbered migration 15 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    # A dead letter is a state ('dead'), not a table: it keeps its row, key and payload, so an
    # operator can retry it as it was (`upgrade-bot inbox retry`).
    conn.execute(sa.text("ALTER TABLE inbox ADD COLUMN failure TEXT NOT NULL DEFAULT ''"))
