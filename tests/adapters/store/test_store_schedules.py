"""Migrations 4 and 5 on SQLite and PostgreSQL: schedules and their announcements, one dedup key
each, state changes that only the first writer makes, cancellation of what is still pending, and a
move that replaces a pending schedule at most once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.adapters.store import Store
from bot.errors import ConcurrentUpdate
from bot.records import AnnouncementRow, AuditEntry, ScheduleRow

NOW = datetime(2026, 11, 20, 3, tzinfo=UTC)
START = datetime(2026, 12, 1, 5, tzinfo=UTC)
TABLES = ("schedules", "scheduled_announcements", "run_messages", "audit_log", "inbox")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
        yield s
        s.close()
        return
    s = Store.open(request.getfixturevalue("postgres_url"))
    yield s
    with s.engine.begin() as conn:
        for table in TABLES:
            conn.execute(sa.text(f"DELETE FROM {table}"))
    s.close()


def schedule_row() -> ScheduleRow:
    return ScheduleRow(
        id=0,
        plan_id=1,
        plan_name="prod-1.30",
        window_start=START,
        window_end=START + timedelta(hours=3),
        tz="Asia/Tokyo",
        channel="C0ANNOUNCE",
        state="scheduled",
        run_id="",
        created_by="U0COORD",
        created_at=NOW,
    )


def rows(schedule_id: int, keys: tuple[str, ...] = ("scheduled", "starting")) -> list[AnnouncementRow]:
    return [
        AnnouncementRow(
            id=0,
            schedule_id=schedule_id,
            plan_name="prod-1.30",
            run_id="",
            template=key,
            due_at=NOW if key == "scheduled" else START,
            window_start=START,
            dedup_key=f"schedule:{schedule_id}/{key}",
            state="scheduled",
            channel="C0ANNOUNCE",
        )
        for key in keys
    ]


def test_migration_4_stores_a_schedule_with_its_announcements(store: Store) -> None:
    assert (store.schema_version() or "") >= "0004"
    sid = store.create_schedule(schedule_row(), rows)
    got = store.schedule(sid)
    assert got is not None
    assert got.window_start == START
    assert got.tz == "Asia/Tokyo"
    announced = store.scheduled_announcements(schedule_id=sid)
    assert [(a.template, a.dedup_key, a.due_at) for a in announced] == [
        ("scheduled", f"schedule:{sid}/scheduled", NOW),
        ("starting", f"schedule:{sid}/starting", START),
    ]


def test_a_dedup_key_is_stored_once_and_a_failed_schedule_leaves_nothing(store: Store) -> None:
    sid = store.create_schedule(schedule_row(), rows)
    again = rows(sid)[0]
    assert store.add_announcement(again) is None
    with pytest.raises(ConcurrentUpdate):
        store.create_schedule(schedule_row(), lambda _: [*rows(sid), *rows(sid)])
    assert len(store.schedules()) == 1
    assert len(store.scheduled_announcements()) == 2


def test_only_the_first_writer_moves_an_announcement_and_cancel_spares_what_was_sent(store: Store) -> None:
    sid = store.create_schedule(schedule_row(), rows)
    first, second = store.scheduled_announcements(schedule_id=sid)
    audit = AuditEntry(
        at=NOW, user_id="bot", channel_id="C0ANNOUNCE", source="scheduler", kind="announcement",
        subcommand="scheduled", arguments=first.dedup_key, outcome="ok",
    )  # fmt: skip
    assert store.finish_announcement(
        first.id, state="sent", at=NOW, channel="C0ANNOUNCE", ts="1.1", audit=[audit]
    )
    assert not store.finish_announcement(first.id, state="skipped", at=NOW, audit=[audit])
    assert len(store.audit_entries()) == 1
    assert store.cancel_schedule(sid, at=NOW, reason="moved") == 1
    sent, cancelled = store.scheduled_announcements(schedule_id=sid)
    assert (sent.state, sent.ts) == ("sent", "1.1")
    assert (cancelled.state, cancelled.reason) == ("cancelled", "moved")
    assert cancelled.id == second.id
    assert store.schedule(sid).state == "cancelled"  # type: ignore[union-attr]


def test_move_replaces_a_pending_schedule_in_one_transaction_and_only_once(store: Store) -> None:
    sid = store.create_schedule(schedule_row(), rows)
    first, _ = store.scheduled_announcements(schedule_id=sid)
    assert store.finish_announcement(first.id, state="sent", at=NOW, channel="C0ANNOUNCE", ts="1.1")
    later = START + timedelta(days=2)
    moved = replace(
        schedule_row(),
        window_start=later,
        window_end=later + timedelta(hours=3),
        moved_from=sid,
        move_reason="late",
    )
    new_id, withdrawn = store.move_schedule(
        sid, moved, lambda i: rows(i, ("delayed", "starting")), at=NOW, reason="moved by U0COORD: late"
    )
    assert withdrawn == 1
    assert new_id != sid
    assert store.schedule(sid).state == "moved"  # type: ignore[union-attr]
    got = store.schedule(new_id)
    assert got is not None
    assert (got.moved_from, got.move_reason, got.window_start) == (sid, "late", later)
    assert [(a.state, a.reason) for a in store.scheduled_announcements(schedule_id=sid)] == [
        ("sent", ""),
        ("cancelled", "moved by U0COORD: late"),
    ]
    assert [a.template for a in store.scheduled_announcements(schedule_id=new_id)] == ["delayed", "starting"]
    # The old one is no longer pending: a second move (another replica, a double submit) changes nothing.
    with pytest.raises(ConcurrentUpdate):
        store.move_schedule(sid, moved, lambda i: rows(i, ("delayed",)), at=NOW, reason="again")
    assert len(store.schedules()) == 2
    assert len(store.scheduled_announcements()) == 4


def test_migration_5_keeps_a_version_4_databases_rows_and_adds_empty_move_and_step_fields(
    tmp_path: Path,
) -> None:
    old = Store.open(f"sqlite:///{tmp_path / 'v4.db'}", migrate=False)
    assert old.migrate("0004") == ["0001", "0002", "0003", "0004"]
    with old.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO schedules (plan_id, plan_name, window_start, window_end, tz, channel, state,"
                " run_id, created_by, created_at, override_reason) VALUES (1, 'prod-1.30', :s, :e,"
                " 'Asia/Tokyo', 'C0ANNOUNCE', 'scheduled', '', 'U0COORD', :n, '')"
            ),
            {"s": START, "e": START + timedelta(hours=3), "n": NOW},
        )
    assert old.schema_version() == "0004"
    # Later revisions (0007 and up) apply too; this test is about 0005 and 0006.
    assert [v for v in old.migrate() if v <= "0006"] == ["0005", "0006"]
    (kept,) = old.schedules()
    assert (kept.plan_name, kept.moved_from, kept.move_reason) == ("prod-1.30", 0, "")
    old.add_announcement(rows(kept.id, ("starting",))[0])
    (announcement,) = old.scheduled_announcements()
    assert announcement.step_id == ""
    old.close()
