"""Cluster jobs: a long action's progress, its driver, and the question it put to people."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from bot.adapters.store.audit import _insert_audit
from bot.adapters.store.base import StoreBase, _driven_by, _from_row, _maybe_utc, _utc, _wrap_errors
from bot.adapters.store.messages import _insert_outbox
from bot.adapters.store.schema import jobs, run_messages, runs
from bot.errors import PermanentError
from bot.records import AuditEntry, JobRow


class Jobs(StoreBase):
    """Job rows: created, claimed, beating, ticked, decided, interrupted, reopened, finished."""

    # Every write by a job's driver names the owner and the live state, so a process that lost the
    # job (interrupted, taken over, deposed) writes nothing; the fence check rides on `begin()`.

    def create_job(self, row: JobRow) -> int:
        values = _job_values(row)
        values.pop("id")
        with _wrap_errors(), self.engine.begin() as conn:
            key = conn.execute(jobs.insert().values(**values)).inserted_primary_key
        assert key is not None
        return int(key[0])

    def create_job_once(self, row: JobRow) -> int | None:
        """`create_job` for a job of which a run may have only one (abort's offer, revision 0013):
        None when the run has it already."""
        values = _job_values(row)
        values.pop("id")
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                key = conn.execute(jobs.insert().values(**values)).inserted_primary_key
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return None
            raise
        assert key is not None
        return int(key[0])

    def aborted_runs_without_job(self, step_id: str, *, since: datetime, kinds: Sequence[str]) -> list[str]:
        """Runs aborted since `since` that had a non-dry-run job of one of `kinds` and have no job
        for the pseudo-step `step_id` (what the leader's scan owes after a crash; oldest first)."""
        had = sa.exists().where(jobs.c.run_id == runs.c.id, jobs.c.kind.in_(list(kinds)), ~jobs.c.dry_run)
        offered = sa.exists().where(jobs.c.run_id == runs.c.id, jobs.c.step_id == step_id)
        query = (
            sa.select(runs.c.id)
            .where(runs.c.state == "aborted", runs.c.updated_at >= since, had, ~offered)
            .order_by(runs.c.updated_at)
            .limit(50)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            return [str(r) for r in conn.execute(query).scalars()]

    def job(self, job_id: int) -> JobRow | None:
        return self._by_id(jobs, job_id, _job_row)

    def jobs(
        self, *, states: Sequence[str] = ("live",), run_id: str | None = None, limit: int = 200
    ) -> list[JobRow]:
        query = sa.select(jobs).where(jobs.c.state.in_(list(states))).order_by(jobs.c.id).limit(limit)
        if run_id is not None:
            query = query.where(jobs.c.run_id == run_id)
        return self._rows(query, _job_row)

    def job_of_step(self, run_id: str, step_id: str) -> JobRow | None:
        """The newest job a run's step started (a resumed step continues the same one)."""
        return self._newest_of_step(jobs, run_id, step_id, _job_row)

    def claim_job(self, job_id: int, *, owner: str, now: datetime) -> bool:
        """Take a live job nobody drives (just started or resumed) to drive it; a job with an owner
        is never taken over silently: a dead owner's job is interrupted instead (`interrupt_job`)."""
        return self._changed_one(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.state == "live", jobs.c.owner == "")
            .values(owner=owner[:64], heartbeat_at=_utc(now))
        )

    def heartbeat_job(self, job_id: int, *, owner: str, now: datetime) -> bool:
        """Keep driving: False when the job is no longer ours (interrupted, ended)."""
        return self._heartbeat(jobs, job_id, owner=owner, now=now)

    def interrupt_job(
        self,
        job_id: int,
        *,
        owner_was: str,
        at: datetime,
        note: str = "",
        outbox: Sequence[tuple[str, str]] = (),
    ) -> bool:
        """Stop driving a live job whose owner is `owner_was` (gone, deposed, or its step stopped
        running); its progress stays for `resume`. `outbox`: thread posts of `job:ID` it owes (a
        key posted before is not owed again), in the same transaction. False when someone changed
        it first (nothing written)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(_driven_by(jobs, job_id, owner_was))
                .values(state="interrupted", owner="", updated_at=_utc(at), detail=note)
            )
            if result.rowcount != 1:
                return False
            _owe_posts(conn, f"job:{job_id}", outbox, at)
        return True

    def reopen_job(self, job_id: int, *, epoch: int, at: datetime, progress: str | None = None) -> bool:
        """`resume` approved again: the same job continues from its progress (`progress`, when
        given, replaces it) under the step's new epoch (nobody drives it until a driver claims it)."""
        values: dict[str, Any] = {
            "state": "live",
            "owner": "",
            "epoch": epoch,
            "updated_at": _utc(at),
            "detail": "",
        }
        if progress is not None:
            values["progress"] = progress
        return self._changed_one(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.state.in_(["live", "interrupted"]))
            .values(**values)
        )

    def save_job_tick(
        self,
        job_id: int,
        *,
        owner: str,
        at: datetime,
        progress: str,
        card: str,
        choice_key: str = "",
        choice: str = "",
        clear_decision: bool = False,
        outbox: Sequence[tuple[str, str]] = (),
        audit: Sequence[AuditEntry] = (),
        done: tuple[bool, str] | None = None,
    ) -> bool:
        """Persist one tick in ONE transaction: the progress, the live card lines, the open
        question, the thread posts it owes (outbox rows of `job:ID`, each key once: a key posted
        before is not owed again) and its audit rows; with `done`, end the job. False (nothing
        written) when the job is not ours."""
        subject = f"job:{job_id}"
        values: dict[str, Any] = {
            "progress": progress,
            "card": card,
            "choice_key": choice_key[:200],
            "choice": choice,
            "heartbeat_at": _utc(at),
            "updated_at": _utc(at),
        }
        if clear_decision:
            values["decision"] = ""
        if done is not None:
            values.update(state="done", ok=done[0], detail=done[1], ended_at=_utc(at))
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(jobs.update().where(_driven_by(jobs, job_id, owner)).values(**values))
            if result.rowcount != 1:
                return False
            _owe_posts(conn, subject, outbox, at)
            _insert_audit(conn, audit)
        return True

    def save_job_card(
        self, job_id: int, *, owner: str, at: datetime, card: str, outbox: Sequence[tuple[str, str]] = ()
    ) -> bool:
        """The live card lines of a job that could not tick (its cluster unreachable), and the
        thread posts that owes, in one transaction; its progress, its question and `updated_at`
        (when it last moved) are left as they are. False when the job is not ours."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update().where(_driven_by(jobs, job_id, owner)).values(card=card, heartbeat_at=_utc(at))
            )
            if result.rowcount != 1:
                return False
            _owe_posts(conn, f"job:{job_id}", outbox, at)
        return True

    def decide_job(self, job_id: int, *, choice_key: str, decision: str) -> bool:
        """Record people's answer to the job's open question; False when that question is no longer
        open (answered already, or a stale button)."""
        return self._changed_one(
            jobs.update()
            .where(
                jobs.c.id == job_id,
                jobs.c.state.in_(["live", "interrupted"]),
                jobs.c.choice_key == choice_key[:200],
                jobs.c.choice_key != "",
                jobs.c.decision == "",
            )
            .values(decision=decision)
        )

    def finish_job(self, job_id: int, *, ok: bool, detail: str, at: datetime) -> bool:
        """End a job that is not being driven (a dry run, a job refused before its first tick)."""
        return self._changed_one(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.state != "done")
            .values(state="done", ok=ok, detail=detail, ended_at=_utc(at), updated_at=_utc(at), owner="")
        )


def _owe_posts(conn: Connection, subject: str, outbox: Sequence[tuple[str, str]], at: datetime) -> None:
    """Outbox rows of `subject` not known yet (each key once, ever)."""
    if not outbox:
        return
    known = set(
        conn.execute(
            sa.select(run_messages.c.key).where(
                run_messages.c.run_id == subject,
                run_messages.c.key.in_([k[:200] for k, _ in outbox]),
            )
        ).scalars()
    )
    fresh = [(k, b) for k, b in outbox if k[:200] not in known]
    _insert_outbox(conn, subject, list({k: (k, b) for k, b in fresh}.values()), at)


def _job_values(j: JobRow) -> dict[str, Any]:
    choice_key = ""
    if j.choice:
        try:
            choice_key = str(json.loads(j.choice).get("key", ""))
        except (ValueError, AttributeError):
            choice_key = ""
    return {
        "id": j.id,
        "run_id": j.run_id[:64],
        "step_id": j.step_id[:64],
        "epoch": j.epoch,
        "kind": j.kind[:32],
        "cluster": j.cluster[:100],
        "args": j.args,
        "dry_run": j.dry_run,
        "state": j.state,
        "ok": j.ok,
        "detail": j.detail,
        "progress": j.progress,
        "card": j.card,
        "choice_key": choice_key[:200],
        "choice": j.choice,
        "decision": j.decision,
        "owner": j.owner[:64],
        "heartbeat_at": _maybe_utc(j.heartbeat_at),
        "started_by": j.started_by[:64],
        "started_at": _utc(j.started_at),
        "updated_at": _maybe_utc(j.updated_at),
        "ended_at": _maybe_utc(j.ended_at),
    }


def _job_row(r: Any) -> JobRow:
    return _from_row(JobRow, r)
