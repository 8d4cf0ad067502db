"""Schedule moves and step-complete announcements.

Carried over unchanged from the hand-numbered migration 5 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    # ADD COLUMN with a constant default works the same on SQLite and PostgreSQL.
    for statement in (
        "ALTER TABLE schedules ADD COLUMN moved_from INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE schedules ADD COLUMN move_reason TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE scheduled_announcements ADD COLUMN step_id VARCHAR(64) NOT NULL DEFAULT ''",
    ):
        conn.execute(sa.text(statement))
