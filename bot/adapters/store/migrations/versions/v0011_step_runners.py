"""The process running a step's action.

Carried over unchanged from the hand-numbered migration 11 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    conn.execute(sa.text("ALTER TABLE run_steps ADD COLUMN runner VARCHAR(64) NOT NULL DEFAULT ''"))
