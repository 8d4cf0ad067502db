"""The watch card's Stop button (`watch_stop`): ends a standalone watch as `/upgrade unwatch` does.

The click is stored in the inbox before the ack (Slack never sends an acknowledged click again),
then decided on a worker: the clicker must hold a role in the roster (as for `unwatch`), the watch
must still be live and not a plan step's (that one ends with its step). The end request is a row
in the database, so the stop is durable: the watch's driver — this process or the next one —
ends it with a final summary on its card and in its thread. A refusal comes back as an ephemeral
message with a reference id; every click is audited.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.adapters.store import Store
from bot.core.people import Directory, roles_of
from bot.core.watches.service import WatchService
from bot.errors import BotError, UserError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.clicks import audit_click, click_fields, take_click
from bot.frontdoor.slack.refusals import refuse_click

log = logging.getLogger(__name__)

STOP_ACTION = "watch_stop"


def stop_watch(
    watches: WatchService,
    *,
    watch_id: int,
    user_id: str,
    roster: Mapping[str, Sequence[str]],
    directory: Directory,
) -> None:
    """Ask the watch to end for `user_id`; a `UserError` says why not."""
    if not roles_of(user_id, roster, directory):
        raise UserError("only people on the roster can stop a watch")
    row = watches.get(watch_id)
    if row.run_id:
        raise UserError(f"watch {watch_id} belongs to run `{row.run_id}`; it ends with its step")
    if row.state == "live" and row.end_requested_by:
        # Two people on the same card: the first stop stands (and its name is on the final line).
        raise UserError(f"watch {watch_id} is already ending: stopped by <@{row.end_requested_by}>")
    watches.request_end(watch_id, by=user_id)


def register(
    app: App,
    *,
    watches: WatchService,
    roster: Callable[[], Mapping[str, Sequence[str]]],
    directory: Directory,
    gateway: SlackGateway,
    inbox: Inbox,
    store: Store,
    clock: Callable[[], datetime],
) -> None:
    def refuse(cid: str, payload: Mapping[str, Any], message: str) -> None:
        refuse_click(gateway, cid, payload, message, what="stop")

    def audit(payload: Mapping[str, Any], cid: str, outcome: str, detail: str) -> None:
        audit_click(store, clock, payload, cid, "action", STOP_ACTION, outcome, detail)

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        if how == DONE_BEFORE:
            return  # stopped before the restart: the card and the thread say so
        try:
            watch_id = int(str(payload.get("value", "")))
        except ValueError:
            refuse(cid, payload, "this button does not name a watch")
            return
        user = str(payload.get("user", ""))
        try:
            stop_watch(watches, watch_id=watch_id, user_id=user, roster=roster(), directory=directory)
        except BotError as exc:
            log.info("stop of watch %s by %s refused: %s", watch_id, user, exc.user_message)
            audit(payload, cid, "refused", exc.user_message)
            refuse(cid, payload, exc.user_message)
            return
        log.info("watch %s: stop asked by %s", watch_id, user)
        audit(payload, cid, "ok", f"watch {watch_id} asked to end")

    inbox.handle("watch_stop", work)

    @app.action(STOP_ACTION)
    def on_stop(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {**click_fields(body), "value": str(action.get("value", ""))}
        take_click(
            inbox,
            ack,
            "watch_stop",
            body,
            payload,
            log,
            f"watch stop {payload['value']} from {payload['user']}",
        )
