"""The replica working off an inbox item.

Carried over unchanged from the hand-numbered migration 12 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("ALTER TABLE inbox ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT ''"))
