"""Alembic's script directory: `env.py` and `versions/`, one revision a schema change."""
