"""Plans as stored (`bot.core.runs.library`): a stored plan is parsed once however often its runs
are loaded (every click, tick and card refresh loads one), and a reload under the same name is a
plan of its own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bot.adapters.store import Store
from bot.core.runs.library import find_plan, stored_plan
from bot.resources import BUILTIN_PLANS

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_a_stored_plan_is_parsed_once_and_a_reload_is_parsed_anew(tmp_path: Path) -> None:
    text = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text(encoding="utf-8")
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        first = store.save_plan(name="eks-nodegroups", text=text, loaded_by="U0PRIMARY", loaded_at=T0)
        plan = stored_plan(store, first)
        # The same frozen plan, not the YAML parsed again.
        assert stored_plan(store, first) is plan
        assert find_plan(store, "eks-nodegroups")[1] is plan
        reloaded = text.replace(
            "title: Snapshot the cluster before", "title: Snapshot the whole cluster before"
        )
        assert reloaded != text
        second = store.save_plan(name="eks-nodegroups", text=reloaded, loaded_by="U0PRIMARY", loaded_at=T0)
        again = stored_plan(store, second)
        assert again is not plan
        assert again.steps[0].title == "Snapshot the whole cluster before the upgrade"
        assert stored_plan(store, first) is plan  # the first run's plan is still its own
    finally:
        store.close()
