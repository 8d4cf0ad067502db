"""Schedules and their announcements."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.adapters.store.audit import _insert_audit
from bot.adapters.store.base import StoreBase, _from_row, _utc, _wrap_errors, database_failed
from bot.adapters.store.schema import scheduled_announcements, schedules
from bot.errors import ConcurrentUpdate
from bot.records import AnnouncementRow, AuditEntry, ScheduleRow


class Schedules(StoreBase):
    """Schedules and their announcements: created, moved, cancelled, announced."""

    def create_schedule(
        self,
        schedule: ScheduleRow,
        announcements: Callable[[int], Sequence[AnnouncementRow]],
        *,
        audit: Sequence[AuditEntry] = (),
    ) -> int:
        """Insert a schedule, its announcements and its audit rows in one transaction; the
        schedule's id. (The audit row carries the request's correlation id: a request replayed
        after a crash finds it and is answered "done just before", not "already scheduled".)

        A dedup key already stored (the same message scheduled twice) fails the whole insert
        with ConcurrentUpdate, so nothing half-scheduled remains.
        """
        with self._scheduling() as conn:
            schedule_id = _insert_schedule(conn, schedule, announcements)
            _insert_audit(conn, audit)
        return schedule_id

    def add_announcement(self, announcement: AnnouncementRow) -> int | None:
        """Store one more announcement (completed/aborted); None when its dedup key exists."""
        try:
            with self.engine.begin() as conn:
                values = _announcement_values(announcement, schedule_id=announcement.schedule_id)
                pk = conn.execute(scheduled_announcements.insert().values(**values)).inserted_primary_key
            return int(pk[0]) if pk else 0
        except IntegrityError:
            return None
        except OperationalError as exc:
            raise database_failed(exc) from exc

    def schedule(self, schedule_id: int) -> ScheduleRow | None:
        return self._by_id(schedules, schedule_id, _schedule_row)

    def schedules(
        self, *, states: Sequence[str] | None = None, plan_name: str | None = None, limit: int = 50
    ) -> list[ScheduleRow]:
        """Newest first."""
        query = sa.select(schedules).order_by(schedules.c.id.desc()).limit(limit)
        if states is not None:
            query = query.where(schedules.c.state.in_(list(states)))
        if plan_name is not None:
            query = query.where(schedules.c.plan_name == plan_name)
        return self._rows(query, _schedule_row)

    def update_schedule(
        self,
        schedule_id: int,
        *,
        state: str,
        run_id: str | None = None,
        withdraw: tuple[Sequence[str], str, datetime] | None = None,
        bring_forward: tuple[str, datetime] | None = None,
    ) -> int:
        """Set the schedule's state (and run); with `withdraw` = (templates, reason, at), in the same
        transaction cancel its announcements of those templates not posted yet (how many); with
        `bring_forward` = (template, at), make its announcements of that template not posted yet
        and due later than `at` due at `at`."""
        values: dict[str, Any] = {"state": state}
        if run_id is not None:
            values["run_id"] = run_id[:64]
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(schedules.update().where(schedules.c.id == schedule_id).values(**values))
            if bring_forward is not None:
                template, at = bring_forward
                conn.execute(
                    scheduled_announcements.update()
                    .where(
                        scheduled_announcements.c.schedule_id == schedule_id,
                        scheduled_announcements.c.state == "scheduled",
                        scheduled_announcements.c.template == template,
                        scheduled_announcements.c.due_at > _utc(at),
                    )
                    .values(due_at=_utc(at), updated_at=_utc(at))
                )
            if withdraw is None:
                return 0
            templates, reason, at = withdraw
            return _withdraw_announcements(conn, schedule_id, reason=reason, at=at, templates=templates)

    def miss_schedule(
        self,
        schedule_id: int,
        *,
        at: datetime,
        reason: str,
        announcement: AnnouncementRow,
        audit: Sequence[AuditEntry] = (),
    ) -> int | None:
        """Close a pending schedule whose window ended by `at` as `missed`, in one transaction:
        its announcements not posted yet are withdrawn with `reason` and `announcement` (the one
        saying so) is stored. Its id; None when the schedule was no longer pending or its window
        had not ended (a run started, someone moved or cancelled it, another replica closed it)."""
        with _wrap_errors(), self.engine.begin() as conn:
            closed = conn.execute(
                schedules.update()
                .where(
                    schedules.c.id == schedule_id,
                    schedules.c.state == "scheduled",
                    schedules.c.window_end <= _utc(at),
                )
                .values(state="missed")
            )
            if closed.rowcount != 1:
                return None
            _withdraw_announcements(conn, schedule_id, reason=reason, at=at)
            values = _announcement_values(announcement, schedule_id=schedule_id)
            pk = conn.execute(scheduled_announcements.insert().values(**values)).inserted_primary_key
            _insert_audit(conn, audit)
            return int(pk[0]) if pk else 0

    def schedule_of_run(self, run_id: str) -> ScheduleRow | None:
        """The schedule a run was started under (`attach_run`), if any."""
        query = (
            sa.select(schedules)
            .where(schedules.c.run_id == run_id[:64])
            .order_by(schedules.c.id.desc())
            .limit(1)
        )
        found = self._rows(query, _schedule_row)
        return found[0] if found else None

    def scheduled_announcements(
        self, *, schedule_id: int | None = None, states: Sequence[str] | None = None, limit: int = 500
    ) -> list[AnnouncementRow]:
        """In due order."""
        query = (
            sa.select(scheduled_announcements)
            .order_by(scheduled_announcements.c.due_at, scheduled_announcements.c.id)
            .limit(limit)
        )
        if schedule_id is not None:
            query = query.where(scheduled_announcements.c.schedule_id == schedule_id)
        if states is not None:
            query = query.where(scheduled_announcements.c.state.in_(list(states)))
        return self._rows(query, _announcement_row)

    def scheduled_announcement(self, announcement_id: int) -> AnnouncementRow | None:
        return self._by_id(scheduled_announcements, announcement_id, _announcement_row)

    def finish_announcement(
        self,
        announcement_id: int,
        *,
        state: str,
        at: datetime,
        channel: str = "",
        ts: str = "",
        delayed: bool = False,
        reason: str = "",
        audit: Sequence[AuditEntry] = (),
    ) -> bool:
        """Move a scheduled announcement to sent/skipped/cancelled (with its audit rows) once.

        `WHERE state = 'scheduled'` makes the first writer win; False when it was not scheduled.
        """
        with _wrap_errors(), self.engine.begin() as conn:
            values: dict[str, Any] = {
                "state": state,
                "delayed": delayed,
                "reason": reason,
                "updated_at": _utc(at),
            }
            if channel:
                values["channel"] = channel[:64]
            if ts:
                values["ts"] = ts[:32]
            result = conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.id == announcement_id,
                    scheduled_announcements.c.state == "scheduled",
                )
                .values(**values)
            )
            if result.rowcount != 1:
                return False
            _insert_audit(conn, audit)
        return True

    def note_announcement_failure(self, announcement_id: int, reason: str) -> bool:
        """Why the last attempt to post a still scheduled announcement failed (`schedule list` shows
        it, and a skip for lateness repeats it); True when that is news (the reason changed)."""
        with _wrap_errors(), self.engine.begin() as conn:
            changed = conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.id == announcement_id,
                    scheduled_announcements.c.state == "scheduled",
                    scheduled_announcements.c.reason != reason,
                )
                .values(reason=reason)
            )
        return bool(changed.rowcount)

    def record_announcement_ts(self, announcement_id: int, *, channel: str, ts: str) -> None:
        """The ts of a post that another worker marked sent while Slack was still answering."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.id == announcement_id,
                    scheduled_announcements.c.state == "sent",
                    scheduled_announcements.c.ts == "",
                )
                .values(channel=channel[:64], ts=ts[:32], reason="")
            )

    def cancel_schedule(
        self, schedule_id: int, *, at: datetime, reason: str, audit: Sequence[AuditEntry] = ()
    ) -> int:
        """Cancel a schedule and every announcement of it not yet posted; how many were cancelled."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(schedules.update().where(schedules.c.id == schedule_id).values(state="cancelled"))
            cancelled = _withdraw_announcements(conn, schedule_id, reason=reason, at=at)
            _insert_audit(conn, audit)
            return cancelled

    def move_schedule(
        self,
        schedule_id: int,
        replacement: ScheduleRow,
        announcements: Callable[[int], Sequence[AnnouncementRow]],
        *,
        at: datetime,
        reason: str,
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[int, int]:
        """Replace a pending schedule by one for another window, in one transaction.

        The old schedule becomes `moved` and its unposted announcements `cancelled`; the new one
        and its announcements are inserted. Returns (new schedule id, announcements withdrawn).
        ConcurrentUpdate when the old one is no longer pending (someone moved, cancelled or
        started it first) — nothing is changed then.
        """
        with self._scheduling() as conn:
            moved = conn.execute(
                schedules.update()
                .where(schedules.c.id == schedule_id, schedules.c.state == "scheduled")
                .values(state="moved")
            )
            if moved.rowcount != 1:
                raise ConcurrentUpdate(f"schedule #{schedule_id} is no longer pending")
            withdrawn = _withdraw_announcements(conn, schedule_id, reason=reason, at=at)
            new_id = _insert_schedule(conn, replacement, announcements)
            _insert_audit(conn, audit)
        return new_id, withdrawn

    @contextlib.contextmanager
    def _scheduling(self) -> Iterator[Connection]:
        """One transaction that inserts a schedule and its announcements: a dedup key already
        stored (the same message scheduled twice) fails it whole with ConcurrentUpdate."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except IntegrityError as exc:
            raise ConcurrentUpdate("these announcements were scheduled already") from exc
        except OperationalError as exc:
            raise database_failed(exc) from exc


def _withdraw_announcements(
    conn: Connection, schedule_id: int, *, reason: str, at: datetime, templates: Sequence[str] | None = None
) -> int:
    """Cancel the schedule's announcements not posted yet (of `templates`, when given) inside the
    caller's transaction; how many."""
    query = scheduled_announcements.update().where(
        scheduled_announcements.c.schedule_id == schedule_id,
        scheduled_announcements.c.state == "scheduled",
    )
    if templates is not None:
        query = query.where(scheduled_announcements.c.template.in_(list(templates)))
    result = conn.execute(query.values(state="cancelled", reason=reason, updated_at=_utc(at)))
    return int(result.rowcount or 0)


def _insert_schedule(
    conn: Connection, schedule: ScheduleRow, announcements: Callable[[int], Sequence[AnnouncementRow]]
) -> int:
    """Insert a schedule (a new id) and its announcements inside the caller's transaction; its id."""
    values = _schedule_values(schedule)
    values.pop("id")
    pk = conn.execute(schedules.insert().values(**values)).inserted_primary_key
    schedule_id = int(pk[0]) if pk else 0
    # The announcements' dedup keys name the schedule, so they are built from its id.
    for a in announcements(schedule_id):
        conn.execute(
            scheduled_announcements.insert().values(**_announcement_values(a, schedule_id=schedule_id))
        )
    return schedule_id


def _schedule_values(s: ScheduleRow) -> dict[str, Any]:
    return {
        "id": s.id,
        "plan_id": s.plan_id,
        "plan_name": s.plan_name[:100],
        "window_start": _utc(s.window_start),
        "window_end": _utc(s.window_end),
        "tz": s.tz[:64],
        "channel": s.channel[:64],
        "state": s.state,
        "run_id": s.run_id[:64],
        "created_by": s.created_by[:64],
        "created_at": _utc(s.created_at),
        "override_reason": s.override_reason,
        "moved_from": s.moved_from,
        "move_reason": s.move_reason,
    }


def _schedule_row(row: Any) -> ScheduleRow:
    return _from_row(ScheduleRow, row)


def _announcement_values(a: AnnouncementRow, *, schedule_id: int) -> dict[str, Any]:
    return {
        "schedule_id": schedule_id,
        "plan_name": a.plan_name[:100],
        "run_id": a.run_id[:64],
        "template": a.template[:32],
        "due_at": _utc(a.due_at),
        "window_start": _utc(a.window_start),
        "dedup_key": a.dedup_key[:200],
        "state": a.state,
        "channel": a.channel[:64],
        "ts": a.ts[:32],
        "delayed": a.delayed,
        "reason": a.reason,
        "updated_at": _utc(a.updated_at or a.due_at),
        "step_id": a.step_id[:64],
    }


def _announcement_row(row: Any) -> AnnouncementRow:
    return _from_row(AnnouncementRow, row)
