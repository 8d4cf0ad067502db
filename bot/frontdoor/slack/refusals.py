"""Telling the person who clicked why their click was refused: one short ephemeral line with the
correlation id, through the interaction's `response_url`, else in its channel. Slack failing to
take it is logged, never raised: the refusal itself is already recorded."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.errors import BotError

log = logging.getLogger(__name__)


def refuse_click(
    gateway: SlackGateway, cid: str, payload: Mapping[str, Any], message: str, *, what: str
) -> None:
    """`message` (Slack markup: its mentions are meant; text from people or the cluster in it must be
    inert already) to the clicker; `what` names the click in the log ("answer", "stop", "fix")."""
    text = f":no_entry: {message} _(ref {cid})_"
    try:
        if payload.get("response_url"):
            respond_via_url(str(payload["response_url"]), text, ephemeral=True)
        elif payload.get("channel"):
            gateway.post_ephemeral(str(payload["channel"]), str(payload["user"]), text)
    except BotError as exc:
        log.warning(
            "could not tell %s why their %s was refused: %s", payload.get("user"), what, exc.user_message
        )
