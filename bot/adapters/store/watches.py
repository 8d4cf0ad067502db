"""Watches of a cluster's rollout status: who drives each and what it last published."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from bot.adapters.store.base import StoreBase, _driven_by, _from_row, _maybe_utc, _utc, _wrap_errors
from bot.adapters.store.messages import _insert_outbox
from bot.adapters.store.schema import watch_samples, watches
from bot.records import WatchRow

#: A watch stops adding samples beyond this many (at one per 30 s at the most: 41 hours).
MAX_SAMPLES = 5000


class Watches(StoreBase):
    """Watch rows: created, claimed, beating, published, asked to end."""

    # Every write to a watch is here, and every write by its driver names the owner: the leader
    # lease's fence check goes into these methods, in one place.

    def create_watch(self, row: WatchRow) -> int:
        values = _watch_values(row)
        values.pop("id")
        with _wrap_errors(), self.engine.begin() as conn:
            key = conn.execute(watches.insert().values(**values)).inserted_primary_key
        assert key is not None
        return int(key[0])

    def watch(self, watch_id: int) -> WatchRow | None:
        return self._by_id(watches, watch_id, _watch_row)

    def watches(self, *, live: bool = True, limit: int = 100, run_id: str | None = None) -> list[WatchRow]:
        query = sa.select(watches).order_by(watches.c.id.desc()).limit(limit)
        if live:
            query = query.where(watches.c.state == "live")
        if run_id is not None:
            query = query.where(watches.c.run_id == run_id)
        return self._rows(query, _watch_row)

    def watch_of_step(self, run_id: str, step_id: str) -> WatchRow | None:
        return self._newest_of_step(watches, run_id, step_id, _watch_row)

    def claim_watch(self, watch_id: int, *, owner: str, now: datetime, stale_before: datetime) -> bool:
        """Take a live watch to drive it: True when it had no owner, was ours, or its owner's
        heartbeat is older than `stale_before` (a live owner's watch is never taken)."""
        return self._changed_one(
            watches.update()
            .where(
                watches.c.id == watch_id,
                watches.c.state == "live",
                sa.or_(
                    watches.c.owner == "",
                    watches.c.owner == owner[:64],
                    watches.c.heartbeat_at.is_(None),
                    watches.c.heartbeat_at < _utc(stale_before),
                ),
            )
            .values(owner=owner[:64], heartbeat_at=_utc(now))
        )

    def heartbeat_watch(self, watch_id: int, *, owner: str, now: datetime) -> bool:
        """Keep driving: False when the watch is no longer ours (ended, or taken over)."""
        return self._heartbeat(watches, watch_id, owner=owner, now=now)

    def publish_watch(
        self,
        watch_id: int,
        *,
        owner: str,
        summary: str,
        at: datetime,
        outbox: Sequence[tuple[str, str]] = (),
        markers: Sequence[str] = (),
        end_reason: str | None = None,
    ) -> bool:
        """Persist a published summary and, in the same transaction, the thread posts it owes
        (`outbox`: key, body) and the milestone keys a batched post carries (`markers`); with
        `end_reason`, end the watch. False (nothing written) when the watch is not ours."""
        subject = f"watch:{watch_id}"
        values: dict[str, Any] = {"summary": summary, "published_at": _utc(at), "heartbeat_at": _utc(at)}
        if end_reason is not None:
            values.update(state="ended", ended_at=_utc(at), end_reason=end_reason)
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                watches.update().where(_driven_by(watches, watch_id, owner)).values(**values)
            )
            if result.rowcount != 1:
                return False
            _insert_outbox(conn, subject, outbox, at)
            # The milestone keys the batched post carries: never owed on their own (`ts` "batched").
            _insert_outbox(conn, subject, [(key, "") for key in markers], at, ts="batched", owner=owner)
        return True

    def add_watch_sample(self, watch_id: int, *, owner: str, at: datetime, counts: dict[str, int]) -> bool:
        """Record a live watch's unhealthy pods by class at `at`; False (nothing written) when the
        watch is not ours or already has `MAX_SAMPLES` samples."""
        with _wrap_errors(), self.engine.begin() as conn:
            ours = conn.execute(sa.select(watches.c.id).where(_driven_by(watches, watch_id, owner))).first()
            if ours is None:
                return False
            count = conn.execute(
                sa.select(sa.func.count())
                .select_from(watch_samples)
                .where(watch_samples.c.watch_id == watch_id)
            ).scalar_one()
            if count >= MAX_SAMPLES:
                return False
            conn.execute(
                watch_samples.insert().values(
                    watch_id=watch_id, at=_utc(at), counts=json.dumps(dict(sorted(counts.items())))
                )
            )
        return True

    def watch_samples(self, watch_id: int) -> list[tuple[datetime, dict[str, int]]]:
        """A watch's samples, oldest first: (time, unhealthy pods by class)."""
        query = (
            sa.select(watch_samples.c.at, watch_samples.c.counts)
            .where(watch_samples.c.watch_id == watch_id)
            .order_by(watch_samples.c.at, watch_samples.c.id)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            return [
                (_utc(r.at), {str(k): int(v) for k, v in json.loads(r.counts).items()})
                for r in conn.execute(query)
            ]

    def request_watch_end(self, watch_id: int, *, by: str) -> bool:
        """Ask a live watch's driver to end it (`unwatch`); False when it is not live."""
        return self._changed_one(
            watches.update()
            .where(watches.c.id == watch_id, watches.c.state == "live")
            .values(end_requested_by=by[:64] or "someone")
        )


def _watch_values(w: WatchRow) -> dict[str, Any]:
    return {
        "id": w.id,
        "cluster": w.cluster,
        "nodegroups": json.dumps(list(w.nodegroups)),
        "namespaces": json.dumps(list(w.namespaces)),
        "target": w.target,
        "stop": w.stop,
        "channel": w.channel,
        "run_id": w.run_id or None,
        "step_id": w.step_id or None,
        "state": w.state,
        "started_by": w.started_by[:64],
        "started_at": _utc(w.started_at),
        "ends_at": _maybe_utc(w.ends_at),
        "ended_at": _maybe_utc(w.ended_at),
        "end_reason": w.end_reason,
        "end_requested_by": w.end_requested_by[:64],
        "owner": w.owner[:64],
        "heartbeat_at": _maybe_utc(w.heartbeat_at),
        "summary": w.summary,
        "published_at": _maybe_utc(w.published_at),
    }


def _json_tuple(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def _or_blank(value: str | None) -> str:
    return value or ""


def _watch_row(r: Any) -> WatchRow:
    return _from_row(
        WatchRow, r, nodegroups=_json_tuple, namespaces=_json_tuple, run_id=_or_blank, step_id=_or_blank
    )
