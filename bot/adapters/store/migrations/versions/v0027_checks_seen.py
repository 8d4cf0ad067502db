"""The last check of each cluster: `checks_seen`, its finding ids and the objects each named, one
row per cluster replaced by every check, so `/upgrade waive` can say that a waiver (a typo of an
object: "shop/paymnets") matches no finding of it."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision: str | None = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    meta = sa.MetaData()
    sa.Table(
        "checks_seen",
        meta,
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("target", sa.String(32), nullable=False),
        sa.Column("findings", sa.Text, nullable=False),
    )
    meta.create_all(conn)
