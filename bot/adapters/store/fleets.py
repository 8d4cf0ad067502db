"""Fleet runs (issue 41): the parent row, its members and its gate votes; every change is one
transaction that compare-and-sets the fleet's `version`, so two writers never both win."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from bot.adapters.store.audit import _insert_audit
from bot.adapters.store.base import StoreBase, _from_row, _to_row, _wrap_errors
from bot.adapters.store.schema import fleet_members, fleet_runs, fleet_votes
from bot.records import AuditEntry, FleetMemberRow, FleetRow, FleetVoteRow


class Fleets(StoreBase):
    """Fleet rows, members and votes."""

    def create_fleet(
        self, fleet: FleetRow, members: Sequence[FleetMemberRow], audit: Sequence[AuditEntry] = ()
    ) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(fleet_runs.insert().values(**_to_row(fleet)))
            if members:
                conn.execute(fleet_members.insert(), [_to_row(m) for m in members])
            _insert_audit(conn, audit)

    def commit_fleet(
        self,
        fleet: FleetRow,
        *,
        expected_version: int,
        members: Sequence[FleetMemberRow] = (),
        votes: Sequence[FleetVoteRow] = (),
        audit: Sequence[AuditEntry] = (),
    ) -> bool:
        """Write a change made on version `expected_version` (the row gets `fleet.version`); False,
        writing nothing, when someone else changed the fleet first."""
        with _wrap_errors(), self.engine.begin() as conn:
            done = conn.execute(
                fleet_runs.update()
                .where(fleet_runs.c.id == fleet.id, fleet_runs.c.version == expected_version)
                .values(**_to_row(fleet))
            ).rowcount
            if not done:
                return False
            for m in members:
                conn.execute(
                    fleet_members.update()
                    .where(fleet_members.c.fleet_id == m.fleet_id, fleet_members.c.cluster == m.cluster)
                    .values(state=m.state, run_id=m.run_id, attempts=m.attempts, reason=m.reason)
                )
            for v in votes:
                conn.execute(
                    fleet_votes.insert().values(**_to_row(v, roles=lambda roles: json.dumps(list(roles))))
                )
            _insert_audit(conn, audit)
        return True

    def fleet_rows(self, fleet_id: str) -> tuple[FleetRow, list[FleetMemberRow], list[FleetVoteRow]] | None:
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(fleet_runs).where(fleet_runs.c.id == fleet_id)).mappings().first()
            if row is None:
                return None
            members = conn.execute(
                sa.select(fleet_members)
                .where(fleet_members.c.fleet_id == fleet_id)
                .order_by(fleet_members.c.stage, fleet_members.c.position)
            ).mappings()
            votes = conn.execute(
                sa.select(fleet_votes).where(fleet_votes.c.fleet_id == fleet_id).order_by(fleet_votes.c.id)
            ).mappings()
            return _fleet_row(row), [_member_row(m) for m in members], [_vote_row(v) for v in votes]

    def fleets(self, *, states: Sequence[str] | None = None, limit: int = 50) -> list[FleetRow]:
        """Newest first."""
        query = (
            sa.select(fleet_runs)
            .order_by(fleet_runs.c.created_at.desc(), fleet_runs.c.id.desc())
            .limit(limit)
        )
        if states is not None:
            query = query.where(fleet_runs.c.state.in_(list(states)))
        return self._rows(query, _fleet_row)

    def fleet_of_run(self, run_id: str) -> str | None:
        """The fleet whose member runs `run_id` (None: an ordinary run)."""
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(
                sa.select(fleet_members.c.fleet_id).where(fleet_members.c.run_id == run_id)
            ).first()
        return None if row is None else str(row[0])


def _fleet_row(r: Any) -> FleetRow:
    return _from_row(FleetRow, r)


def _member_row(r: Any) -> FleetMemberRow:
    return _from_row(FleetMemberRow, r)


def _vote_row(r: Any) -> FleetVoteRow:
    return _from_row(FleetVoteRow, r, roles=lambda v: tuple(json.loads(v)))
