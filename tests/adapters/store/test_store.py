"""The store against SQLite and a real PostgreSQL server: migrations, audit log, de-duplication."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.adapters.store import Store
from bot.adapters.store.migrate import script_directory
from bot.records import AuditEntry, CheckSeen, JobRow

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def entry(**overrides: object) -> AuditEntry:
    values: dict[str, object] = {
        "at": NOW,
        "user_id": "U0PRIMARY",
        "channel_id": "C0OPS",
        "source": "slack",
        "kind": "command",
        "subcommand": "help",
        "arguments": "help",
        "outcome": "ok",
        "correlation_id": "abcd1234",
    }
    values.update(overrides)
    return AuditEntry(**values)  # type: ignore[arg-type]


def test_migrations_reach_the_latest_version_and_are_not_applied_twice(store: Store) -> None:
    assert store.schema_version() == script_directory().get_current_head() == "0027"
    assert store.migrate() == []


def test_audit_entries_round_trip_in_utc_order(store: Store) -> None:
    store.record_audit(entry(at=NOW + timedelta(minutes=5), subcommand="audit"))
    store.record_audit(entry(at=NOW, subcommand="help"))
    got = store.audit_entries()
    assert [e.subcommand for e in got] == ["help", "audit"]
    assert got[0].at == NOW
    assert got[0].at.tzinfo is not None
    assert got[0].correlation_id == "abcd1234"


def test_audit_entries_filter_by_since(store: Store) -> None:
    store.record_audit(entry(at=NOW - timedelta(days=2), subcommand="old"))
    store.record_audit(entry(at=NOW, subcommand="new"))
    assert [e.subcommand for e in store.audit_entries(since=NOW - timedelta(hours=1))] == ["new"]


def test_a_delivery_is_claimed_once(store: Store) -> None:
    assert store.claim_delivery("trigger:123.456", NOW) is True
    assert store.claim_delivery("trigger:123.456", NOW) is False
    assert store.claim_delivery("trigger:999", NOW) is True


def test_old_deliveries_can_be_forgotten(store: Store) -> None:
    store.claim_delivery("event:old", NOW - timedelta(days=3))
    store.claim_delivery("event:new", NOW)
    assert store.forget_deliveries_before(NOW - timedelta(days=1)) == 1
    assert store.claim_delivery("event:old", NOW) is True


def test_store_survives_reopening_the_same_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    first = Store.open(url)
    first.record_audit(entry())
    first.close()
    second = Store.open(url)
    assert len(second.audit_entries()) == 1
    assert second.migrate() == []
    second.close()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    import sqlalchemy as sa

    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    with s.engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
    s.close()


def test_a_run_has_at_most_one_offer_after_its_abort_and_other_jobs_are_not_limited(store: Store) -> None:
    def job(step_id: str, run_id: str = "r1") -> JobRow:
        return JobRow(id=0, run_id=run_id, step_id=step_id, kind="uncordon", cluster="prod", started_at=NOW)

    first = store.create_job_once(job("after-abort"))
    assert first is not None
    assert store.create_job_once(job("after-abort")) is None
    assert store.create_job_once(job("after-abort", run_id="r2")) is not None
    assert store.create_job_once(job("drain-old")) is not None
    assert store.create_job_once(job("drain-old")) is not None  # a resumed step may start another
    assert [j.step_id for j in store.jobs(run_id="r1")] == ["after-abort", "drain-old", "drain-old"]


def test_a_clusters_last_check_is_kept_once_and_replaced_by_the_next(store: Store) -> None:
    at = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    assert store.check_seen("prod") is None
    first = CheckSeen(
        cluster="prod",
        checked_at=at,
        target="1.25",
        findings={"PDB001": ("PodDisruptionBudget billing/ledger",)},
    )
    store.save_check_seen(first)
    assert store.check_seen("prod") == first
    later = CheckSeen(
        cluster="prod",
        checked_at=at + timedelta(hours=1),
        target="1.26",
        findings={},
        clipped=frozenset({"*"}),
    )
    store.save_check_seen(later)
    assert store.check_seen("prod") == later
    assert store.check_seen("staging") is None
