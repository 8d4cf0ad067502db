"""Alembic migrates the store: a fresh database reaches head, a database made before Alembic is
stamped and upgraded in place, the revisions are one chain whose head matches the models, and
replicas starting at once apply each revision once (SQLite and a real PostgreSQL server).

`tests/data/store-v17.sqlite` was made by the hand-numbered migrator (`bot/adapters/store.py` at
4c175bd, schema version 17): an audit entry, a plan and a started run, a job, a watch, a waiver
and an inbox item, journal mode DELETE so the one file is the whole database.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from bot.adapters.store import Store, metadata
from bot.adapters.store.migrate import script_directory, shipped_head
from bot.errors import PermanentError
from bot.records import JobRow

LEGACY_V17 = Path(__file__).parents[2] / "data" / "store-v17.sqlite"
NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
#: The hand-numbered versions there were (no 8), each now the revision of the same number.
LEGACY_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17)
#: The Alembic revisions since (no hand-numbered migration ever had these numbers).
NEW_REVISIONS = ("0018", "0019", "0020", "0021", "0022", "0023", "0024", "0025", "0026", "0027")
ALL_REVISIONS = [f"{v:04d}" for v in LEGACY_VERSIONS] + list(NEW_REVISIONS)


def differences(store: Store) -> list[object]:
    """What autogenerate would change to make the database match the models (the legacy
    `schema_migrations` table aside: it stays for a rollback, and no model describes it)."""
    with store.engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "include_name": lambda name, kind, _parent: (
                    not (kind == "table" and name == "schema_migrations")
                ),
            },
        )
        return list(compare_metadata(context, metadata))


def make_legacy(url: str, version: int) -> None:
    """A database as the hand-numbered migrator left it at `version`: the same DDL (the revisions
    are its frozen steps), recorded in `schema_migrations` and without Alembic's table."""
    store = Store.open(url, migrate=False)
    store.migrate(f"{version:04d}")
    with store.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE alembic_version"))
        conn.execute(
            sa.text(
                "CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY,"
                " name VARCHAR(200) NOT NULL, applied_at TIMESTAMP WITH TIME ZONE NOT NULL)"
            )
        )
        for v in LEGACY_VERSIONS:
            if v <= version:
                conn.execute(
                    sa.text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :at)"),
                    {"v": v, "n": f"migration {v}", "at": NOW},
                )
    store.close()


def test_the_revisions_are_one_linear_chain_numbered_as_the_old_migrations() -> None:
    script = script_directory()
    assert script.get_heads() == [NEW_REVISIONS[-1]]
    assert script.get_bases() == ["0001"]
    chain = [s.revision for s in script.walk_revisions("base", "heads")]
    assert chain == list(reversed(ALL_REVISIONS))
    for revision in script.walk_revisions():
        assert not revision.is_merge_point
        assert not revision.is_branch_point
        assert revision.branch_labels == set()


def test_a_fresh_database_reaches_head_and_matches_the_models(url: str) -> None:
    store = Store.open(url, migrate=False)
    assert store.schema_version() is None
    assert store.migrate() == ALL_REVISIONS
    assert store.schema_version() == script_directory().get_current_head()
    assert differences(store) == []
    assert store.migrate() == []
    store.close()


def _contents(store: Store) -> tuple[list[tuple[Any, ...]], dict[str, list[tuple[Any, ...]]]]:
    """Every schema object's SQL, and every table's rows."""
    with store.engine.connect() as conn:
        objects = sorted(
            tuple(r) for r in conn.execute(sa.text("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        )
        tables = [name for kind, name, _t, _s in objects if kind == "table"]
        return objects, {t: sorted(map(tuple, conn.execute(sa.text(f'SELECT * FROM "{t}"')))) for t in tables}


def test_a_fresh_sqlite_database_after_the_first_is_the_revisions_result_replayed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Alembic's own result: a target by id never takes the replay.
    migrated = Store.open(f"sqlite:///{tmp_path / 'migrated.db'}", migrate=False)
    assert migrated.migrate(NEW_REVISIONS[-1]) == ALL_REVISIONS
    Store.open(f"sqlite:///{tmp_path / 'first.db'}").close()  # the process's image, if not made yet
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bot.adapters.store.migrate"):
        replayed = Store.open(f"sqlite:///{tmp_path / 'replayed.db'}", migrate=False)
        assert replayed.migrate() == ALL_REVISIONS
    assert [r.getMessage() for r in caplog.records] == [
        "fresh database: schema at head as this process migrated it before"
    ]
    assert _contents(replayed) == _contents(migrated)
    assert differences(replayed) == []
    assert replayed.migrate() == []
    assert replayed.acquire_lease("replica-a", epoch=0, duration=timedelta(minutes=1)).holder == "replica-a"
    migrated.close()
    replayed.close()


def test_the_shipped_head_read_from_the_revision_files_is_alembics() -> None:
    assert shipped_head() == script_directory().get_current_head() == NEW_REVISIONS[-1]


def test_a_database_at_head_opens_without_alembic_and_one_behind_is_upgraded(url: str) -> None:
    behind = Store.open(url, migrate=False)
    assert behind.migrate(NEW_REVISIONS[-2]) == ALL_REVISIONS[:-1]
    behind.close()
    store = Store.open(url)  # the fast path must not take a database one revision behind for head
    assert store.schema_version() == NEW_REVISIONS[-1]
    assert store.migrate() == []
    store.close()
    # At head: opening it (every command and start does) imports neither Alembic nor a revision.
    code = (
        "import sys\nfrom bot.adapters.store import Store\n"
        f"Store.open({url!r}).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic' or '.versions.' in m))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_each_migration_applied_is_one_log_line_in_plain_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    behind = Store.open(url, migrate=False)
    behind.migrate(NEW_REVISIONS[-2])
    behind.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bot.adapters.store.migrate"):
        Store.open(url).close()
    # The revision's docstring wraps at its second line; the log used to show `one\nrow` there.
    assert [r.getMessage() for r in caplog.records if r.name == "bot.adapters.store.migrate"] == [
        "applied schema migration 0027: The last check of each cluster: `checks_seen`, its finding ids "
        "and the objects each named, one row per cluster replaced by every check, so `/upgrade waive` "
        'can say that a waiver (a typo of an object: "shop/paymnets") matches no finding of it.'
    ]


def test_the_database_made_by_the_hand_numbered_migrator_opens_and_is_upgraded_in_place(
    tmp_path: Path,
) -> None:
    db = tmp_path / "bot.db"
    shutil.copyfile(LEGACY_V17, db)
    store = Store.open(f"sqlite:///{db}")
    # Stamped at 0017 (nothing re-run over the existing tables), then at head.
    assert store.schema_version() == script_directory().get_current_head()
    assert differences(store) == []
    # Everything the old code wrote reads back through the new store.
    assert [e.subcommand for e in store.audit_entries() if e.correlation_id == "legacy01"] == ["help"]
    (run,) = store.runs()
    loaded = store.run_rows(run.id)
    assert loaded is not None
    assert (run.id, run.plan_name, run.state) == ("RD8050C", "eks-nodegroups", "active")
    assert loaded[1][0].step_id == "snapshot-pre"
    (job,) = store.jobs(run_id=run.id)
    assert (job.kind, job.step_id) == ("drain", "drain-old")
    assert [w.cluster for w in store.watches()] == ["prod"]
    assert [w.finding for w in store.waivers(cluster="prod")] == ["pdb-zero"]
    assert [i.key for i in store.inbox_pending()] == ["cmd:legacy"]
    # The lease row of the old migration 9 is there: taking the lease is its compare-and-set.
    assert store.acquire_lease("replica-a", epoch=0, duration=timedelta(minutes=1)).holder == "replica-a"
    # The old partial unique index still holds: one offer to uncordon per aborted run.
    offer = JobRow(
        id=0, run_id=run.id, step_id="after-abort", kind="uncordon", cluster="prod", started_at=NOW
    )
    assert store.create_job_once(offer) is not None
    assert store.create_job_once(offer) is None
    # The old version table is left as it was (a rollback to the release before finds its own).
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT MAX(version) FROM schema_migrations")).scalar() == 17
    store.close()
    again = Store.open(f"sqlite:///{db}")
    assert again.migrate() == []
    again.close()


def test_an_older_hand_numbered_database_is_stamped_at_its_version_and_upgraded(url: str) -> None:
    make_legacy(url, 12)
    store = Store.open(url, migrate=False)
    assert store.schema_version() is None
    assert store.migrate() == ["0013", "0014", "0015", "0016", "0017", *NEW_REVISIONS]
    assert differences(store) == []
    store.close()


def test_a_hand_numbered_version_this_release_does_not_know_is_refused(url: str) -> None:
    make_legacy(url, 17)
    store = Store.open(url, migrate=False)
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'later', :at)"),
            {"at": NOW},
        )
    store.close()
    with pytest.raises(PermanentError, match="schema version 99 is unknown"):
        Store.open(url)


def test_replicas_starting_at_once_apply_each_revision_once(url: str) -> None:
    Store.open(url, migrate=False).close()  # the SQLite file's directory exists before the race
    applied: list[list[str]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def replica() -> None:
        store = Store.open(url, migrate=False)
        try:
            barrier.wait()
            applied.append(store.migrate())
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(applied, key=len) == [[], [], [], ALL_REVISIONS]
    store = Store.open(url)
    assert store.schema_version() == NEW_REVISIONS[-1]
    assert differences(store) == []
    store.close()


def test_a_database_a_newer_release_migrated_is_refused_in_one_line(tmp_path: Path) -> None:
    """The bot rolled back to an older release: its store is at a revision this one lacks. The
    refusal names both revisions and what to do (it was an Alembic traceback)."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    Store.open(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0999'"))
    engine.dispose()
    with pytest.raises(PermanentError) as refused:
        Store.open(url)
    assert str(refused.value) == (
        f"the database's schema revision 0999 is unknown to this release, which knows up to {shipped_head()}: "
        "a newer upgrade-bot migrated it — run that release, or restore the database's backup from before it"
    )
