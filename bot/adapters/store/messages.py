"""Slack message references and the outbox: a thread line written in the commit that caused it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.adapters.store.base import StoreBase, _from_row, _maybe_utc, _utc, _wrap_errors, database_failed
from bot.adapters.store.schema import run_messages
from bot.records import MessageRef


class Messages(StoreBase):
    """Which Slack message stands for what, claimed before it is posted."""

    def claim_message(
        self, *, run_id: str, key: str, channel: str, thread_ts: str, at: datetime, owner: str = ""
    ) -> bool:
        """Claim the right to post message `key` of a run; False when it was claimed before.

        The claim is committed before the post, so a restart (or a second worker) never posts the
        same card or step message twice; the ts is recorded by `record_message` afterwards.
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    run_messages.insert().values(
                        run_id=run_id,
                        key=key[:200],
                        channel=channel[:64],
                        ts="",
                        thread_ts=thread_ts,
                        claimed_at=_utc(at),
                        owner=owner[:64],
                    )
                )
            return True
        except IntegrityError:
            return False
        except OperationalError as exc:
            raise database_failed(exc) from exc

    def record_message(self, *, run_id: str, key: str, channel: str, ts: str) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                run_messages.update()
                .where(run_messages.c.run_id == run_id, run_messages.c.key == key[:200])
                .values(ts=ts, channel=channel[:64])
            )

    def release_message(self, *, run_id: str, key: str, owner: str | None = None) -> None:
        """Give up a claim whose post failed, so a later attempt may post it (an outbox row stays,
        unowned, with its body; a plain claim is deleted). With `owner`, only while that process
        still holds it: a replica that was paused must not give up a claim another took over
        after its lease ran out (and is posting, or has posted) — that would owe it twice."""
        mine = sa.and_(
            run_messages.c.run_id == run_id, run_messages.c.key == key[:200], run_messages.c.ts == ""
        )
        if owner is not None:
            mine = sa.and_(mine, run_messages.c.owner == owner[:64])
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(run_messages.update().where(mine, run_messages.c.body != "").values(owner=""))
            conn.execute(run_messages.delete().where(mine, run_messages.c.body == ""))

    def claim_outbox(
        self, *, run_id: str, key: str, channel: str, thread_ts: str, owner: str, at: datetime
    ) -> bool:
        """Take an unowned outbox row to post it now; False when another process took it first (or
        it was set aside as a dead letter)."""
        return self._changed_one(
            run_messages.update()
            .where(
                run_messages.c.run_id == run_id,
                run_messages.c.key == key[:200],
                run_messages.c.ts == "",
                run_messages.c.owner == "",
                run_messages.c.dead_at.is_(None),
            )
            .values(owner=owner[:64], channel=channel[:64], thread_ts=thread_ts, claimed_at=_utc(at))
        )

    def messages(self, run_id: str, *, posted_lines: bool = True, prefix: str = "") -> dict[str, MessageRef]:
        """The subject's message references by key. Without `posted_lines`, less the thread lines
        already posted (outbox rows with a ts): what publishing needs, read on every card edit,
        while they grow with the thread (each with its body). With `prefix`, only the keys that
        start with it (`card`: the card and its posts again, which say where its thread is)."""
        query = sa.select(run_messages).where(run_messages.c.run_id == run_id)
        if not posted_lines:
            query = query.where(sa.or_(run_messages.c.body == "", run_messages.c.ts == ""))
        if prefix:
            query = query.where(run_messages.c.key.startswith(prefix, autoescape=True))
        with _wrap_errors(), self.engine.connect() as conn:
            return {r["key"]: _message_ref(r) for r in conn.execute(query).mappings()}

    def message_at(self, *, channel: str, ts: str) -> MessageRef | None:
        """The posted message recorded at (channel, ts), if the bot posted one there."""
        query = sa.select(run_messages).where(run_messages.c.channel == channel, run_messages.c.ts == ts)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = [_message_ref(r) for r in conn.execute(query).mappings()]
        # A re-posted message's own claim row shares the ts; the reference it replaced wins.
        rows.sort(key=lambda r: ":repost:" in r.key)
        return rows[0] if rows else None

    def unposted_messages(self) -> list[MessageRef]:
        """Every claim still without a ts (in flight now, or left by a process that died); never
        a dead letter (owed to nobody until an operator retries it)."""
        query = (
            sa.select(run_messages)
            .where(run_messages.c.ts == "", run_messages.c.dead_at.is_(None))
            .order_by(run_messages.c.claimed_at)
        )
        return self._rows(query, _message_ref)

    def outbox_failed(
        self,
        *,
        run_id: str,
        key: str,
        failure: str,
        at: datetime,
        dead_after: int,
        way: str | None = None,
        dead_after_time: timedelta | None = None,
        release: bool = True,
    ) -> MessageRef | None:
        """An outbox row's post failed: released (unless `release` is False: a post that may have
        been made keeps its claim, settled later), its failures in a row of the same way counted
        (a failure whose text starts with `way`, by default `failure` itself; another way starts
        again at 1, and at `at`), and set aside as a dead letter at the `dead_after`th — or at the
        first failure `dead_after_time` or more after the run of failures began. The row as it
        now is; None when it is no outbox row still owed."""
        mine = sa.and_(
            run_messages.c.run_id == run_id,
            run_messages.c.key == key[:200],
            run_messages.c.ts == "",
            run_messages.c.body != "",
            run_messages.c.dead_at.is_(None),
        )
        way = failure if way is None else way
        with _wrap_errors(), self.engine.begin() as conn:
            row = conn.execute(sa.select(run_messages).where(mine)).mappings().first()
            if row is None:
                return None
            same = row["attempts"] > 0 and str(row["failure"]).startswith(way)
            attempts = row["attempts"] + 1 if same else 1
            since = _maybe_utc(row["failing_since"]) if same else None
            since = since or _utc(at)
            values: dict[str, Any] = {
                **({"owner": ""} if release else {}),
                "attempts": attempts,
                "failure": failure,
                "failing_since": since,
            }
            too_long = dead_after_time is not None and _utc(at) - since >= dead_after_time
            if attempts >= dead_after or too_long:
                values["dead_at"] = _utc(at)
            conn.execute(run_messages.update().where(mine).values(**values))
            fresh = conn.execute(
                sa.select(run_messages).where(
                    run_messages.c.run_id == run_id, run_messages.c.key == key[:200]
                )
            )
            return _message_ref(fresh.mappings().one())

    def outbox_dead_in(self, *, channel: str, thread_ts: str) -> list[MessageRef]:
        """The dead letters owed to one thread (a run card's), oldest first: what its card says."""
        query = (
            sa.select(run_messages)
            .where(
                run_messages.c.dead_at.is_not(None),
                run_messages.c.ts == "",
                run_messages.c.channel == channel[:64],
                run_messages.c.thread_ts == thread_ts,
            )
            .order_by(run_messages.c.dead_at)
        )
        return self._rows(query, _message_ref)

    def outbox_dead(self, *, limit: int = 200) -> list[MessageRef]:
        """The outbox rows set aside as dead letters, oldest first."""
        query = (
            sa.select(run_messages)
            .where(run_messages.c.dead_at.is_not(None), run_messages.c.ts == "")
            .order_by(run_messages.c.dead_at)
            .limit(limit)
        )
        return self._rows(query, _message_ref)

    def outbox_retry(self, *, run_id: str, key: str) -> bool:
        """A dead letter owed again, its failures from zero (the next pass of whoever posts its
        subject's rows posts it); False when it is not a dead letter."""
        return self._changed_one(
            run_messages.update()
            .where(*_dead(run_id, key))
            .values(dead_at=None, attempts=0, failure="", owner="", failing_since=None)
        )

    def outbox_drop(self, *, run_id: str, key: str) -> bool:
        """A dead letter given up for good: marked posted (ts `dropped`), so its key is never owed
        again; False when it is not a dead letter."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(run_messages.update().where(*_dead(run_id, key)).values(ts=DROPPED))
        return bool(result.rowcount == 1)


#: The ts of an outbox row an operator dropped (never a Slack ts: those are digits and a dot).
DROPPED = "dropped"


def _dead(run_id: str, key: str) -> tuple[Any, ...]:
    return (
        run_messages.c.run_id == run_id,
        run_messages.c.key == key[:200],
        run_messages.c.ts == "",
        run_messages.c.dead_at.is_not(None),
    )


def _insert_outbox(
    conn: Connection,
    run_id: str,
    outbox: Sequence[tuple[str, str]],
    at: datetime,
    *,
    ts: str = "",
    owner: str = "",
) -> None:
    """Outbox rows (key, body) of `run_id`, owed (no `ts`, no `owner`) unless said otherwise."""
    for key, body in outbox:
        conn.execute(
            run_messages.insert().values(
                run_id=run_id,
                key=key[:200],
                channel="",
                ts=ts,
                thread_ts="",
                claimed_at=_utc(at),
                owner=owner[:64],
                body=body,
            )
        )


def _message_ref(r: Any) -> MessageRef:
    return _from_row(MessageRef, r)
