"""The fleet card's buttons in Slack: Approve (the gate the fleet waits on), Carry the canary's
waivers, Pause and Resume (`bot.core.fleets.card`).

A click is stored in the inbox before the ack (Slack never sends an acknowledged click again) and
decided on a worker by the fleet service (`FleetService.click`), with the rules of the verbs it
stands for: only the people the gate names approve it (roles, N-of-M, four eyes), only the
fleet's roster pauses, resumes or carries. A refusal (wrong person, a second approval by the same
person, a button from a card drawn before the fleet moved on) comes back as one ephemeral line
with a reference id, and is audited; the card and its thread show an accepted click. Carried
waivers are listed to the clicker, ephemeral.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.core.fleets import machine as M
from bot.core.fleets.service import FleetService
from bot.core.rendering import inert
from bot.errors import BotError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.clicks import click_actor, click_fields, take_click
from bot.frontdoor.slack.refusals import refuse_click
from bot.logsetup import log_context

log = logging.getLogger(__name__)

#: The inbox kind of a click (the inbox's `kind` column holds 16 characters).
INBOX_KIND = "fleet_click"
#: Longest list of carried waivers told to the clicker.
CARRIED_SHOWN = 20


def register(app: App, *, fleets: FleetService, gateway: SlackGateway, inbox: Inbox) -> None:
    def refuse(cid: str, payload: dict[str, Any], message: str) -> None:
        refuse_click(gateway, cid, payload, inert(message), what="fleet button")

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        action_id = str(payload.get("action_id", ""))
        button = M.FleetButton.decode(str(payload.get("value", "")), M.BUTTONS.get(action_id, ""))
        if button is None:
            refuse(cid, payload, "this button does not name a fleet run")
            return
        if how == DONE_BEFORE:
            return  # decided before a restart: the card and its thread show it
        actor = click_actor(payload, cid)
        with log_context(run_id=button.fleet_id):
            try:
                carried = fleets.click(button, actor)
            except BotError as exc:
                log.info("fleet button %s by %s refused: %s", action_id, actor.user_id, exc.user_message)
                refuse(cid, payload, exc.user_message)
                return
            log.info("fleet button %s by %s done", action_id, actor.user_id)
            if carried and payload.get("response_url"):
                lines = [f"• {inert(line)}" for line in carried[:CARRIED_SHOWN]]
                if len(carried) > CARRIED_SHOWN:
                    lines.append(f"…and {len(carried) - CARRIED_SHOWN} more (`/upgrade waive list`)")
                text = f":package: Carried {len(carried)} waiver(s):\n" + "\n".join(lines)
                try:
                    respond_via_url(str(payload["response_url"]), text, ephemeral=True)
                except BotError as exc:
                    log.warning("could not tell %s what was carried: %s", actor.user_id, exc.user_message)

    inbox.handle(INBOX_KIND, work)

    @app.action(re.compile("^fleet_(approve|pause|resume|carry)$"))
    def on_fleet_button(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {
            **click_fields(body),
            "action_id": str(action.get("action_id", "")),
            "value": str(action.get("value", ""))[:200],
        }
        take_click(
            inbox,
            ack,
            INBOX_KIND,
            body,
            payload,
            log,
            f"fleet button {payload['action_id']} from {payload['user']}",
        )
