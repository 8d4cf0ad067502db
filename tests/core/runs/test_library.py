"""Stored plans: a run's plan is parsed once per text, however often the run is loaded (a
rehearsal follows a run by loading it many times a second), and a reload is a plan of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.runs.library import stored_plan
from tests.support.fleets import T0, TINY_PLAN


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path}/bot.db")
    yield opened
    opened.close()


def test_a_stored_plan_is_parsed_once_and_a_reload_is_parsed_anew(store: Store) -> None:
    first = store.save_plan(name="tiny", text=TINY_PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    plan = stored_plan(store, first)
    assert stored_plan(store, first) is plan
    assert plan.target_version == "1.30.2"
    reloaded = store.save_plan(
        name="tiny", text=TINY_PLAN.replace('"1.30.2"', '"1.30.3"'), loaded_by="U0PRIMARY", loaded_at=T0
    )
    assert stored_plan(store, reloaded).target_version == "1.30.3"
    assert stored_plan(store, first) is plan
