"""The inbox: a Slack request is stored before Slack is told "received", and worked off once.

Slack never sends an acknowledged command or click again, so a process that acked and then died
would lose it without a trace. Every listener therefore writes the request to the `inbox` table
*inside* the ack path (one small insert, milliseconds), acks, and hands the item to a worker; the
worker marks it done when the work has finished. At start-up every item still pending is worked
off again, with the correlation id it was received with.

Exactly once, not at least once: a request whose effect was committed before the crash (every
change writes its audit rows in the same transaction, tagged with the request's correlation id)
is not run again; a click on a gate is in any case refused as a repeat by the run's state
machine.

Poison work goes to a dead letter: each attempt is counted before it starts, and an item that
has been tried `MAX_ATTEMPTS` times — a request that fails every time (a bug its payload
triggers) or one that kills the bot — is set aside (state `dead`, with how it failed) instead of
being tried forever: one log line, a metric, and the person who asked is told once. A failure
that is not temporary is tried again at once (never at every start); a temporary one
(`TemporaryError`: the database busy, Slack rate-limited) waits for the next replay. An operator
lists, retries or drops dead letters with `upgrade-bot inbox list|retry|drop`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.adapters.store import Store
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.errors import POISON_ATTEMPTS, BotError, TemporaryError, clip, describe
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, new_correlation_id
from bot.records import InboxItem

log = logging.getLogger(__name__)

MAX_ATTEMPTS = POISON_ATTEMPTS

#: How an item is worked off: for the first time, again after a restart, or only to be told
#: that its effect was committed before the restart (so the person hears back all the same).
NEW, REPLAY, DONE_BEFORE = "new", "replay", "done-before"

#: Works off one item: (its payload, its correlation id, NEW | REPLAY | DONE_BEFORE).
Handler = Callable[[dict[str, Any], str, str], None]
#: Tells the person who asked that their request was set aside: (kind, payload, correlation id).
Notify = Callable[[str, Mapping[str, Any], str], None]


class Inbox:
    def __init__(
        self,
        *,
        store: Store,
        workers: WorkerPool,
        clock: Callable[[], datetime],
        handlers: Mapping[str, Handler] | None = None,
        notify: Notify | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        owner: str = "",
        live_owners: Callable[[], set[str]] | None = None,
    ) -> None:
        self.store = store
        self.workers = workers
        self.clock = clock
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.notify = notify
        self.telemetry = telemetry
        #: This process's name on the items it accepts (several replicas: who works it off).
        self.owner = owner
        #: The replicas alive now (several replicas); None on one host, where another owner is a
        #: process that is gone.
        self.live_owners = live_owners
        #: The item each correlation id names while this process works it off (`still_ours`).
        self._working: dict[str, int] = {}

    def still_ours(self, cid: str) -> bool:
        """Whether the item this process is working off under `cid` is still its own: a replica
        that stopped answering (paused past its lease) finds, when it wakes, that the leader took
        the item over and answered the person, so it does not answer them a second time. True
        for work that is not an inbox item's."""
        item_id = self._working.get(cid)
        if item_id is None:
            return True
        item = self.store.inbox_item(item_id)
        if item is None or item.owner == self.owner:
            return True
        log.info(
            "inbox item %s was taken over by %s while this process was away: the reply is theirs",
            item_id,
            item.owner or "another process",
        )
        return False

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
        attempts = item.attempts
        with correlation(cid):
            handler = self.handlers.get(item.kind)
            if handler is None:
                log.error("inbox item %s has an unknown kind %s; set aside", item.id, item.kind)
                self._set_aside(item.id, item.kind, payload, cid, attempts, f"unknown kind {item.kind}")
                return
            self._working[cid] = item.id
            try:
                if self._attempt(item, handler, payload, cid, replay=replay):
                    self.store.inbox_done(item.id, at=self.clock())
            finally:
                self._working.pop(cid, None)

    def _attempt(
        self, item: InboxItem, handler: Handler, payload: dict[str, Any], cid: str, *, replay: bool
    ) -> bool:
        """Work the item off, trying again at once after a failure that is not temporary; True
        when it is done, False when it is left pending (temporary) or set aside."""
        attempts = item.attempts
        failure = item.failure
        while True:
            if attempts >= MAX_ATTEMPTS:
                # Tried that often already (a request that kills the bot leaves no failure).
                self._set_aside(item.id, item.kind, payload, cid, attempts, failure or "the bot stopped")
                return False
            attempts += 1
            self.store.inbox_attempt(item.id)
            # Its effect was committed (with audit rows under this id) before a crash or a failure?
            again = replay or attempts > 1
            done_before = again and bool(self.store.audit_entries(correlation_id=cid, limit=1))
            if done_before:
                log.info("inbox item %s (%s) had taken effect before", item.id, item.kind)
            try:
                handler(dict(payload), cid, DONE_BEFORE if done_before else REPLAY if again else NEW)
            except Exception as exc:
                failure = describe(exc)
                log.warning(
                    "inbox item %s (%s) failed (attempt %s of %s): %s",
                    item.id,
                    item.kind,
                    attempts,
                    MAX_ATTEMPTS,
                    failure,
                )
                self.store.inbox_failed(item.id, failure=failure)
                if isinstance(exc, TemporaryError) and attempts < MAX_ATTEMPTS:
                    return False  # left pending: worked off again at the next replay
                continue
            return True

    def _set_aside(
        self, item_id: int, kind: str, payload: Mapping[str, Any], cid: str, attempts: int, failure: str
    ) -> None:
        if not self.store.inbox_set_aside(item_id, at=self.clock(), failure=failure):
            return  # set aside (or finished) by someone else, who told the person
        log.error(
            "inbox item %s (%s) set aside as a dead letter after %s attempt(s): %s "
            "(`upgrade-bot inbox list|retry|drop`)",
            item_id,
            kind,
            attempts,
            failure,
        )
        self.telemetry.inbox_set_aside(kind)
        if self.notify is not None:
            try:
                self.notify(kind, payload, cid)
            except BotError as exc:
                log.warning("could not tell the person that inbox item %s was set aside: %s", item_id, exc)

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


def tell_in_slack(gateway: SlackGateway | None) -> Notify:
    """How a dead letter's person hears of it: ephemeral through the request's response_url,
    else an ephemeral message in its channel, else a DM."""

    def notify(kind: str, payload: Mapping[str, Any], cid: str) -> None:
        what = {
            "command": f"`/upgrade {clip(str(payload.get('text', '')), 60)}`",
            "click": "Your click",
            "choice": "Your answer",
        }.get(kind, "Your request")
        text = (
            f":warning: {what} failed {MAX_ATTEMPTS} times and was set aside; nothing more will be "
            f"done with it. An operator can retry it. _(ref {cid})_"
        )
        user = str(payload.get("user_id") or payload.get("user") or "")
        channel = str(payload.get("channel_id") or payload.get("channel") or "")
        response_url = str(payload.get("response_url") or "")
        if response_url:
            respond_via_url(response_url, text, ephemeral=True)
        elif gateway is not None and user and channel:
            gateway.post_ephemeral(channel, user, text)
        elif gateway is not None and user:
            gateway.post_message(gateway.open_dm(user), text)

    return notify
