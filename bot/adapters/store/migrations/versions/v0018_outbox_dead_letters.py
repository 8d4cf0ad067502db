"""Outbox dead letters: a thread post Slack refuses the same way every time is set aside.

`attempts` counts the failures in a row of the same way, `failure` is the last one (one line),
and `dead_at` is when the row was set aside (NULL while it is still owed). A dead row is never
claimed again until an operator retries it (`upgrade-bot outbox retry`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision: str | None = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("run_messages", sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
    op.add_column("run_messages", sa.Column("failure", sa.Text, nullable=False, server_default=""))
    op.add_column("run_messages", sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True))
