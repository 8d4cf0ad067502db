"""The store's tests run on SQLite and on the session's real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.store import Store
from tests.support.postgres import drop_every_table


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL; the SQLite file's folder does not exist yet (the store makes it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'bot.db'}"
        return
    pg = request.getfixturevalue("postgres_url")
    yield pg
    # One server serves the session; leave no tables behind for the next test.
    drop_every_table(pg)


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    s = Store.open(url)
    yield s
    s.close()
