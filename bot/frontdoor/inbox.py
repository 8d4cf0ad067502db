"""The inbox: a Slack request is stored before Slack is told "received", and worked off once.

Slack never sends an acknowledged command or click again, so a process that acked and then died
would lose it without a trace. Every listener therefore writes the request to the `inbox` table
*inside* the ack path (one small insert, milliseconds), acks, and hands the item to a worker; the
worker marks it done when the work has finished. At start-up every item still pending is worked
off again, with the correlation id it was received with.

Exactly once, not at least once: a request whose effect was committed before the crash (every
change writes its audit rows in the same transaction, tagged with the request's correlation id)
is not run again; a click on a gate is in any case refused as a repeat by the run's state
machine. An item that has already been tried `MAX_ATTEMPTS` times (a request that kills the bot)
is set aside with a log line instead of being tried forever.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from bot.adapters.store import Store
from bot.errors import BotError
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, new_correlation_id

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3

#: How an item is worked off: for the first time, again after a restart, or only to be told
#: that its effect was committed before the restart (so the person hears back all the same).
NEW, REPLAY, DONE_BEFORE = "new", "replay", "done-before"

#: Works off one item: (its payload, its correlation id, NEW | REPLAY | DONE_BEFORE).
Handler = Callable[[dict[str, Any], str, str], None]


class Inbox:
    def __init__(
        self,
        *,
        store: Store,
        workers: WorkerPool,
        clock: Callable[[], datetime],
        handlers: Mapping[str, Handler] | None = None,
    ) -> None:
        self.store = store
        self.workers = workers
        self.clock = clock
        self.handlers: dict[str, Handler] = dict(handlers or {})
        #: This process's name on the items it accepts (several replicas: who works it off).
        self.owner = ""
        #: The replicas alive now (several replicas); None on one host, where another owner is a
        #: process that is gone.
        self.live_owners: Callable[[], set[str]] | None = None

    def handle(self, kind: str, handler: Handler) -> None:
        self.handlers[kind] = handler

    def accept(self, kind: str, key: str | None, payload: Mapping[str, Any]) -> tuple[int, str] | None:
        """Store a request (call before `ack()`); its id and correlation id, or None if known."""
        cid = new_correlation_id()
        body = json.dumps({**payload, "_cid": cid})
        item_id = self.store.inbox_put(
            key=key or f"local:{cid}", kind=kind, payload=body, at=self.clock(), owner=self.owner
        )
        if item_id is None:
            log.info("ignoring a repeat of %s %s", kind, key)
            return None
        return item_id, cid

    def submit(self, item_id: int, *, name: str) -> None:
        self.workers.submit(lambda: self.work(item_id, replay=False), name=name)

    def work(self, item_id: int, *, replay: bool) -> None:
        item = self.store.inbox_item(item_id)
        if item is None or item.state != "pending":
            return
        payload = json.loads(item.payload)
        cid = str(payload.pop("_cid", "")) or new_correlation_id()
        with correlation(cid):
            if item.attempts >= MAX_ATTEMPTS:
                log.error("inbox item %s (%s) failed %s times; set aside", item.id, item.kind, item.attempts)
                self.store.inbox_done(item.id, at=self.clock())
                return
            self.store.inbox_attempt(item.id)
            handler = self.handlers.get(item.kind)
            if handler is None:
                log.error("inbox item %s has an unknown kind %s; set aside", item.id, item.kind)
            else:
                # Its effect was committed (with audit rows under this id) before the crash?
                done_before = replay and bool(self.store.audit_entries(correlation_id=cid, limit=1))
                if done_before:
                    log.info("inbox item %s (%s) had taken effect before the restart", item.id, item.kind)
                try:
                    handler(payload, cid, DONE_BEFORE if done_before else REPLAY if replay else NEW)
                except BotError as exc:
                    log.warning("inbox item %s (%s) failed: %s", item.id, item.kind, exc.user_message)
                    return  # left pending: worked off again at the next start
            self.store.inbox_done(item.id, at=self.clock())

    def replay(self) -> int:
        """On the leader (at start-up, when it wins the lease, and every little while): hand to
        the workers every pending item whose replica is gone — never one this process or another
        live replica is still working off; how many were taken."""
        live = self.live_owners() if self.live_owners is not None else set()
        taken = 0
        for item in self.store.inbox_pending():
            if (item.owner and item.owner == self.owner) or item.owner in live:
                continue
            if not self.store.inbox_take(item.id, owner=self.owner, was=item.owner):
                continue
            taken += 1
            self.workers.submit(
                functools.partial(self.work, item.id, replay=True), name=f"replay {item.kind} {item.id}"
            )
        if taken:
            log.info("working off %s request(s) acknowledged by a process that is gone", taken)
        return taken
