"""The completed announcement names what the run's diff found regressed: recomputed from the two
snapshots its `diff` step compares, as the real store keeps them (encoded), for a run of the
built-in EKS plan written through the store's own API."""

from __future__ import annotations

from pathlib import Path

from bot.adapters.store import Store
from bot.core.announcements.service import diff_regressions
from bot.core.runs.library import assemble_run
from bot.core.snapshots.service import encode
from tests.support.diff_objects import NOW, base_objects, snap, upgraded
from tests.support.report_runs import stored_run


def _save(store: Store, label: str, body: dict[str, object]) -> None:
    store.save_snapshot(
        cluster="prod", label=label, taken_at=NOW, taken_by="U0PRIMARY", summary="", body=encode(body)
    )


def test_the_regressions_of_the_runs_diff_are_named_and_a_clean_upgrade_names_none(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        run = assemble_run(store, stored_run(store))
        # Without the snapshots the diff compares there is nothing to say, and nothing is made up.
        assert diff_regressions(store, run) == []
        _save(store, "pre", snap(base_objects(), "pre"))
        _save(store, "post", snap(upgraded(), "post", version="v1.30.2"))
        assert diff_regressions(store, run) == []
        broken = upgraded()
        broken["pods"][0]["status"]["containerStatuses"][1]["ready"] = False  # vault-agent at 2/3
        _save(store, "post", snap(broken, "post", version="v1.30.2"))
        assert diff_regressions(store, run) == ["containers not ready — Deployment shop/web"]
    finally:
        store.close()
