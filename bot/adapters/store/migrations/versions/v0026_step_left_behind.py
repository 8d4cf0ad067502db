"""What a succeeded step left for people: `run_steps.left_behind` (e.g. the nodes a drain skipped,
still cordoned). Empty for a step that did everything it was asked; the card keeps such a step in
full and the run's ending lists it, rather than counting it among the plain "done"."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision: str | None = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("run_steps", sa.Column("left_behind", sa.Text, nullable=False, server_default=""))
