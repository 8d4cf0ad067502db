"""At most one offer to uncordon per aborted run.

Carried over unchanged from the hand-numbered migration 13 (`schema_migrations`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    # A partial unique index (SQLite and PostgreSQL): whoever offers second — the replica that
    # aborted, or the leader's scan making up for a crash — inserts nothing.
    conn.execute(
        sa.text("CREATE UNIQUE INDEX ix_jobs_one_abort_offer ON jobs (run_id) WHERE step_id = 'after-abort'")
    )
