"""Outbox dead letters by time too: when an outbox row's failures in a row began.

`failing_since` is when the current run of failures of a thread post started (NULL while it has
not failed, or since an operator retried it). A post Slack answers 5xx for longer than the
configured time is set aside like one it refuses (issue 38), so it never blocks its run's thread.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision: str | None = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("run_messages", sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True))
