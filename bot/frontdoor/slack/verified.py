"""The completed announcement's Verified button (`announcement_verified`, issue 39).

The completed announcement asks the owning teams to check their services and press Verified.
Anyone in the channel may press it: the owning teams are not people the roster names. The click
is stored in the inbox before the ack (Slack never sends an acknowledged click again), then
decided on a worker: the press is recorded in the store once per person and announcement (a
double click or a retried delivery records nothing more), audited in the same transaction, and
the announcement is edited in place (`chat.update`) to list everyone who confirmed, in order,
rendered from the store, so any replica or a restarted bot shows the same lines. The button stays
for the others. A press on an announcement the store does not know gets a short ephemeral reason
with a reference id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.adapters.store import Store
from bot.core.announcements.service import AnnouncementService
from bot.core.announcements.templates import VERIFIED_ACTION
from bot.errors import BotError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.clicks import audit_click, click_fields, take_click
from bot.frontdoor.slack.refusals import refuse_click

log = logging.getLogger(__name__)

#: The inbox kind of a press (the inbox's `kind` column holds 16 characters).
INBOX_KIND = "verified"


def _message_ts(body: Mapping[str, Any]) -> str:
    """The ts of the message the button was on ("" when Slack does not say)."""
    container = body.get("container")
    return str(container.get("message_ts") or "") if isinstance(container, dict) else ""


def register(
    app: App,
    *,
    announcements: AnnouncementService,
    gateway: SlackGateway,
    inbox: Inbox,
    store: Store,
    clock: Callable[[], datetime],
) -> None:
    def refuse(cid: str, payload: Mapping[str, Any], message: str) -> None:
        audit_click(store, clock, payload, cid, "announcement", "verified", "refused", message, longest=200)
        refuse_click(gateway, cid, payload, message, what="verification")

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        value = str(payload.get("value", ""))
        user = str(payload.get("user", ""))
        try:
            announcement_id = int(value)
        except ValueError:
            log.info("Verified press by %s with value %r: not an announcement id", user, value[:80])
            refuse(cid, payload, "this button does not name an announcement")
            return
        if how == DONE_BEFORE:
            # Recorded before a restart; the message is drawn again below from the store anyway.
            log.info("Verified press on announcement %s by %s was worked before", announcement_id, user)
        try:
            done = announcements.verify(
                announcement_id,
                user_id=user,
                channel_id=str(payload.get("channel", "")),
                message_ts=str(payload.get("message_ts", "")),
                correlation_id=cid,
            )
        except BotError as exc:
            log.info(
                "Verified press on announcement %s by %s refused: %s", announcement_id, user, exc.user_message
            )
            refuse(cid, payload, exc.user_message)
            return
        log.info(
            "announcement %s verified by %s (%s)",
            announcement_id,
            user,
            "recorded" if done.recorded else "already recorded",
        )
        try:
            # Drawn from the store every time: a press whose edit was lost (a crash, Slack down)
            # is healed by the next one, and a second press shows the same lines.
            gateway.update_message(
                done.row.channel, done.row.ts, done.rendered.text, blocks=done.rendered.blocks
            )
        except BotError as exc:
            log.warning(
                "could not edit announcement %s after a Verified press: %s", announcement_id, exc.user_message
            )

    inbox.handle(INBOX_KIND, work)

    @app.action(VERIFIED_ACTION)
    def on_verified(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {
            **click_fields(body),
            "value": str(action.get("value", "")),
            # The message the button is on: only the posted announcement's own button counts.
            "message_ts": _message_ts(body),
        }
        said = f"Verified press on announcement {payload['value'][:40]} from {payload['user']}"
        take_click(inbox, ack, INBOX_KIND, body, payload, log, said)
