"""Plans, runs, their steps and approvals; a run's commit is one compare-and-set."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.adapters.store.audit import _insert_audit
from bot.adapters.store.base import StoreBase, _from_row, _maybe_utc, _utc, _wrap_errors
from bot.adapters.store.messages import _insert_outbox
from bot.adapters.store.schema import approvals, plans, run_steps, runs
from bot.errors import ConcurrentUpdate
from bot.records import Approval, AuditEntry, PlanRow, RunRow, StepRun, StepState


@contextlib.contextmanager
def _one_snapshot(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A read-only transaction whose statements all see one snapshot of the database.

    `engine.begin()` does not give that. pysqlite opens a transaction only before a write, so each
    SELECT reads the database as it is then. PostgreSQL's READ COMMITTED takes a snapshot per
    statement. Here SQLite gets an explicit (deferred) BEGIN, which holds its WAL snapshot from the
    first read to the end, and PostgreSQL gets REPEATABLE READ. Nothing is written: the
    transaction is rolled back.
    """
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("BEGIN")
            try:
                yield conn
            finally:
                conn.rollback()
        return
    with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin() as tx:
        yield conn
        tx.rollback()


#: How many runs' steps and approvals `run_rows` keeps in memory (the live ones, and some more).
KEPT_RUNS = 64


class Runs(StoreBase):
    """Plans, and runs with their steps and approvals."""

    #: Run id → its steps and approvals as of one version of it (`run_rows`); made by the store.
    _run_parts: dict[str, tuple[tuple[int, datetime], tuple[StepRun, ...], tuple[Approval, ...]]]
    _run_parts_lock: threading.Lock

    def save_plan(self, *, name: str, text: str, loaded_by: str, loaded_at: datetime) -> int:
        """Store a plan's text; the newest plan under a name is the one `start` uses."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                plans.insert().values(
                    name=name[:100], text=text, loaded_by=loaded_by[:64], loaded_at=_utc(loaded_at)
                )
            )
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def plan(self, name: str) -> PlanRow | None:
        query = sa.select(plans).where(plans.c.name == name).order_by(plans.c.id.desc()).limit(1)
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _plan_row(row) if row else None

    def plan_by_id(self, plan_id: int) -> PlanRow | None:
        return self._by_id(plans, plan_id, _plan_row)

    def create_run(
        self,
        run: RunRow,
        steps: Sequence[StepRun],
        audit: Sequence[AuditEntry] = (),
        outbox: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Insert a new run with its steps in plan order (and audit rows, and the thread lines it
        owes as outbox rows) in one transaction."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(runs.insert().values(**_run_values(run)))
            for position, step in enumerate(steps):
                conn.execute(run_steps.insert().values(**_step_values(run.id, position, step)))
            _insert_audit(conn, audit)
            _insert_outbox(conn, run.id, outbox, run.updated_at)

    def run_rows(self, run_id: str) -> tuple[RunRow, list[StepRun], list[Approval]] | None:
        """A run, its steps in plan order and its approvals in the order given, all as of one
        committed version of the run (`_one_snapshot`): a transition committed between the reads
        cannot pair the run's old state with its steps' new one (a failed step in a run still
        active)."""
        with _wrap_errors(), _one_snapshot(self.engine) as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
            if row is None:
                return None
            run = _run_row(row)
            # Its steps and approvals are written only by the commit that raises its version
            # (`create_run`, `commit_run`): as of a version they were read at, they are kept, and
            # every tick, click and card edit that loads the run again reads its one row only.
            version = (run.version, run.created_at)
            with self._run_parts_lock:
                kept = self._run_parts.get(run_id)
            if kept is not None and kept[0] == version:
                return run, list(kept[1]), list(kept[2])
            steps = conn.execute(
                sa.select(run_steps).where(run_steps.c.run_id == run_id).order_by(run_steps.c.position)
            ).mappings()
            step_rows = [_step_run(s) for s in steps]
            given = conn.execute(
                sa.select(approvals).where(approvals.c.run_id == run_id).order_by(approvals.c.id)
            ).mappings()
            approval_rows = [_approval(a) for a in given]
        with self._run_parts_lock:
            self._run_parts.pop(run_id, None)
            self._run_parts[run_id] = (version, tuple(step_rows), tuple(approval_rows))
            while len(self._run_parts) > KEPT_RUNS:
                del self._run_parts[next(iter(self._run_parts))]
        return run, step_rows, approval_rows

    def runs(self, *, states: Sequence[str] | None = None, limit: int = 50) -> list[RunRow]:
        """Newest first."""
        query = sa.select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit)
        if states is not None:
            query = query.where(runs.c.state.in_(list(states)))
        return self._rows(query, _run_row)

    def commit_run(
        self,
        *,
        run_id: str,
        expected_version: int,
        state: str,
        roster: Mapping[str, Sequence[str]],
        reason: str,
        updated_at: datetime,
        steps: Sequence[tuple[int, StepRun]] = (),
        new_approvals: Sequence[Approval] = (),
        audit: Sequence[AuditEntry] = (),
        outbox: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Commit one transition: the run moves from `expected_version` to the next, or not at all.

        `UPDATE … WHERE version = :expected` is the optimistic lock: when another click, worker or
        replica committed first, no row matches and `ConcurrentUpdate` is raised with nothing
        written, so a step can never be advanced twice. `steps` are the changed ones, each with
        its position in the plan. `outbox` holds (key, body) of the thread lines the transition
        owes: committed with it, so a crash right after the commit cannot lose them.
        """
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                runs.update()
                .where(runs.c.id == run_id, runs.c.version == expected_version)
                .values(
                    version=expected_version + 1,
                    state=state,
                    roster=_roster_text(roster),
                    reason=reason,
                    updated_at=_utc(updated_at),
                )
            )
            if result.rowcount != 1:
                raise ConcurrentUpdate(f"run {run_id} changed since version {expected_version}")
            for position, step in steps:
                values = _step_values(run_id, position, step)
                conn.execute(
                    run_steps.update()
                    .where(run_steps.c.run_id == run_id, run_steps.c.step_id == step.step_id)
                    .values(**{k: v for k, v in values.items() if k not in ("run_id", "step_id")})
                )
            for approval in new_approvals:
                _store_vote(conn, run_id, approval)
            _insert_audit(conn, audit)
            _insert_outbox(conn, run_id, outbox, updated_at)
        return expected_version + 1


def _plan_row(row: Any) -> PlanRow:
    return _from_row(PlanRow, row)


def _run_values(run: RunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "plan_id": run.plan_id,
        "plan_name": run.plan_name[:100],
        "cluster": run.cluster[:64],
        "state": run.state,
        "version": run.version,
        "roster": _roster_text(run.roster),
        "reason": run.reason,
        "created_by": run.created_by[:64],
        "created_at": _utc(run.created_at),
        "updated_at": _utc(run.updated_at),
    }


def _run_row(row: Any) -> RunRow:
    return _from_row(RunRow, row, roster=lambda v: {k: tuple(r) for k, r in json.loads(v).items()})


def _roster_text(roster: Mapping[str, Sequence[str]]) -> str:
    return json.dumps({k: list(v) for k, v in roster.items()}, sort_keys=True)


def _step_values(run_id: str, position: int, step: StepRun) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step_id": step.step_id,
        "position": position,
        "state": str(step.state),
        "epoch": step.epoch,
        "started_by": step.started_by[:64],
        "opened_at": _maybe_utc(step.opened_at),
        "started_at": _maybe_utc(step.started_at),
        "finished_at": _maybe_utc(step.finished_at),
        "escalations": step.escalations,
        "note": step.note,
        "runner": step.runner[:64],
        "left_behind": step.left_behind,
    }


def _step_run(row: Any) -> StepRun:
    return _from_row(StepRun, row, state=StepState)


def _store_vote(conn: sa.Connection, run_id: str, a: Approval) -> None:
    """One vote per person, decision and gate state (`ux_approvals_once`): a vote given again
    after the gate's `expires:` let the first one lapse replaces it (the audit log keeps both)."""
    values = _approval_values(run_id, a)
    key = ("run_id", "step_id", "phase", "epoch", "user_id", "decision")
    again = conn.execute(
        approvals.update()
        .where(*(approvals.c[k] == values[k] for k in key))
        .values(roles=values["roles"], at=values["at"], reason=values["reason"])
    )
    if again.rowcount == 0:
        conn.execute(approvals.insert().values(**values))


def _approval_values(run_id: str, a: Approval) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step_id": a.step_id,
        "phase": a.phase,
        "epoch": a.epoch,
        "user_id": a.user_id[:64],
        "roles": ",".join(a.roles)[:200],
        "decision": a.decision,
        "at": _utc(a.at),
        "reason": a.reason,
    }


def _approval(row: Any) -> Approval:
    return _from_row(Approval, row, roles=lambda v: tuple(r for r in v.split(",") if r))
