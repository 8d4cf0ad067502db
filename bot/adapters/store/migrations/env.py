"""Alembic's environment: `bot.adapters.store.migrate` passes its connection, already inside the
transaction it commits (so the bot needs no alembic.ini)."""

from __future__ import annotations

from alembic import context

from bot.adapters.store.schema import metadata

context.configure(connection=context.config.attributes["connection"], target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
