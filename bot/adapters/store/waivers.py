"""Waivers of findings: compare-and-set on their state; and the last check of each cluster, which
a new waiver is compared with."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.adapters.store.base import StoreBase, _maybe_utc, _storable_id, _utc, _wrap_errors
from bot.adapters.store.schema import checks_seen, waivers
from bot.records import CheckSeen, WaiverRow


class Waivers(StoreBase):
    """Waiver rows and their compare-and-set state changes."""

    def add_waiver(
        self,
        *,
        cluster: str,
        finding: str,
        objects: Sequence[str],
        reason: str,
        required: bool,
        state: str,
        requested_by: str,
        requested_at: datetime,
        expires_at: datetime,
    ) -> WaiverRow:
        """Store a waiver ("pending" or "active"; an active one is its requester's alone)."""
        confirmed = state == "active"
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                waivers.insert().values(
                    cluster=cluster,
                    finding=finding,
                    objects=json.dumps(list(objects)),
                    reason=reason,
                    required=required,
                    state=state,
                    requested_by=requested_by,
                    requested_at=_utc(requested_at),
                    expires_at=_utc(expires_at),
                    confirmed_by=requested_by if confirmed else "",
                    confirmed_at=_utc(requested_at) if confirmed else None,
                    revoked_by="",
                    revoked_at=None,
                )
            )
            pk = result.inserted_primary_key
            assert pk is not None
        row = self.waiver(int(pk[0]))
        assert row is not None
        return row

    def waiver(self, waiver_id: int) -> WaiverRow | None:
        if not _storable_id(waiver_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(waivers).where(waivers.c.id == waiver_id)).first()
        return None if row is None else _waiver_row(row)

    def waivers(self, *, cluster: str | None = None, states: Sequence[str] = ()) -> list[WaiverRow]:
        """Waivers by id (a cluster's, in the given states, or all)."""
        query = sa.select(waivers).order_by(waivers.c.id)
        if cluster is not None:
            query = query.where(waivers.c.cluster == cluster)
        if states:
            query = query.where(waivers.c.state.in_(list(states)))
        with _wrap_errors(), self.engine.connect() as conn:
            return [_waiver_row(r) for r in conn.execute(query)]

    def set_waiver_state(self, waiver_id: int, *, expected: str, state: str, by: str, at: datetime) -> bool:
        """Compare-and-set: "pending" → "active" (confirmed by `by`) or any → "revoked"; False when
        the waiver was no longer in `expected` (someone else was first)."""
        values: dict[str, Any] = {"state": state}
        if state == "active":
            values.update(confirmed_by=by, confirmed_at=_utc(at))
        else:
            values.update(revoked_by=by, revoked_at=_utc(at))
        with _wrap_errors(), self.engine.begin() as conn:
            done = conn.execute(
                waivers.update()
                .where(waivers.c.id == waiver_id, waivers.c.state == expected)
                .values(**values)
            ).rowcount
        return bool(done)

    def save_check_seen(self, seen: CheckSeen) -> None:
        """Keep `seen` as its cluster's last check (the one before is replaced)."""
        findings = {
            "findings": {k: list(v) for k, v in seen.findings.items()},
            "clipped": sorted(seen.clipped),
        }
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(checks_seen.delete().where(checks_seen.c.cluster == seen.cluster))
            conn.execute(
                checks_seen.insert().values(
                    cluster=seen.cluster,
                    checked_at=_utc(seen.checked_at),
                    target=seen.target[:32],
                    findings=json.dumps(findings),
                )
            )

    def check_seen(self, cluster: str) -> CheckSeen | None:
        """The last check of `cluster` kept, or None when none was."""
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(checks_seen).where(checks_seen.c.cluster == cluster)).first()
        if row is None:
            return None
        data = json.loads(row.findings)
        return CheckSeen(
            cluster=row.cluster,
            checked_at=_utc(row.checked_at),
            target=row.target,
            findings={str(k): tuple(str(o) for o in v) for k, v in data["findings"].items()},
            clipped=frozenset(str(k) for k in data["clipped"]),
        )


def _waiver_row(r: Any) -> WaiverRow:
    return WaiverRow(
        id=int(r.id),
        cluster=r.cluster,
        finding=r.finding,
        objects=tuple(str(o) for o in json.loads(r.objects)),
        reason=r.reason,
        required=bool(r.required),
        state=r.state,
        requested_by=r.requested_by,
        requested_at=_utc(r.requested_at),
        expires_at=_utc(r.expires_at),
        confirmed_by=r.confirmed_by or "",
        confirmed_at=_maybe_utc(r.confirmed_at),
        revoked_by=r.revoked_by or "",
        revoked_at=_maybe_utc(r.revoked_at),
    )
