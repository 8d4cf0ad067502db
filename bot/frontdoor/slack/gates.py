"""Gate buttons in Slack: Approve and Reject on a run's card and thread, and the modal in which a
destructive step's approval is confirmed by typing the step id.

The buttons (`gate_approve`, `gate_reject`) carry run id, step id and the step's state number; the
decision is made by the run service on a worker, and a refusal (wrong person, self-approval,
double click, stale button) comes back as an ephemeral message with a reference id. A destructive
step's approval opens a modal (`gate_confirm`) for the typed step id.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.adapters.store import Store
from bot.core.rendering import slack_escape
from bot.core.runs.machine import ButtonRef
from bot.core.runs.service import Actor, RunService
from bot.errors import BotError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.fallback import refuse_inactive_button
from bot.frontdoor.slack.keys import delivery_key, ref_id
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation

log = logging.getLogger(__name__)

#: Gate buttons on a run's thread (and card): action id → decision.
GATE_ACTIONS = {"gate_approve": "approve", "gate_reject": "reject"}
#: The modal a destructive step's approval opens for the typed confirmation.
CONFIRM_CALLBACK = "gate_confirm"


def register(
    app: App,
    *,
    runs: RunService,
    gateway: SlackGateway,
    inbox: Inbox,
    workers: WorkerPool,
    store: Store,
    clock: Callable[[], datetime],
) -> None:
    def refuse(cid: str, *, user: str, channel: str, response_url: str, message: str) -> None:
        text = f":no_entry: {message} _(ref {cid})_"
        try:
            if response_url:
                respond_via_url(response_url, text, ephemeral=True)
            elif channel:
                gateway.post_ephemeral(channel, user, text)
        except BotError as exc:
            log.warning("could not tell %s why their click was refused: %s", user, exc.user_message)

    def decide(
        ref: ButtonRef, actor: Actor, *, response_url: str, trigger_id: str, confirmation: str | None
    ) -> None:
        try:
            out = runs.click(ref, actor, confirmation=confirmation)
        except BotError as exc:
            log.warning("gate click on %s/%s failed: %s", ref.run_id, ref.step_id, exc.user_message)
            refuse(
                actor.correlation_id,
                user=actor.user_id,
                channel=actor.channel_id,
                response_url=response_url,
                message=exc.user_message,
            )
            return
        if out.needs_confirmation:
            step = out.run.plan.step(ref.step_id)
            try:
                gateway.open_view(trigger_id, confirm_view(ref, step.title, actor.channel_id))
            except BotError as exc:
                refuse(
                    actor.correlation_id,
                    user=actor.user_id,
                    channel=actor.channel_id,
                    response_url=response_url,
                    message=f"could not open the confirmation: {exc.user_message}",
                )
            return
        if not out.accepted:
            refuse(
                actor.correlation_id,
                user=actor.user_id,
                channel=actor.channel_id,
                response_url=response_url,
                message=out.message,
            )

    def work_click(payload: dict[str, Any], cid: str, how: str) -> None:
        ref = ButtonRef.decode(str(payload["value"]), GATE_ACTIONS.get(str(payload["action_id"]), ""))
        if ref is None or how == DONE_BEFORE:
            return  # counted before the restart: the card and the thread show it
        actor = Actor(
            user_id=str(payload["user"]),
            source="slack",
            channel_id=str(payload["channel"]),
            correlation_id=cid,
        )
        decide(
            ref,
            actor,
            response_url=str(payload["response_url"]),
            trigger_id=str(payload["trigger_id"]),
            confirmation=payload.get("confirmation"),
        )

    inbox.handle("click", work_click)

    @app.action(re.compile("^gate_(approve|reject)$"))
    def on_gate(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        user = ref_id(body, "user")
        channel = ref_id(body, "channel")
        response_url = str(body.get("response_url", ""))
        trigger_id = str(body.get("trigger_id", ""))
        action_id = str(action.get("action_id", ""))
        value = str(action.get("value", ""))
        ref = ButtonRef.decode(value, GATE_ACTIONS.get(action_id, ""))
        accepted = None
        if ref is not None:
            # Stored before the ack: Slack never sends an acknowledged click again.
            accepted = inbox.accept(
                "click",
                delivery_key(body),
                {
                    "user": user,
                    "channel": channel,
                    "response_url": response_url,
                    "trigger_id": trigger_id,
                    "action_id": action_id,
                    "value": value,
                },
            )
        ack()
        with correlation() as cid:
            log.info("gate button %s from %s", action_id, user)
            if ref is None:
                refuse_inactive_button(
                    store,
                    workers,
                    at=clock(),
                    user=user,
                    channel=channel,
                    response_url=response_url,
                    action=action,
                    cid=cid,
                )
                return
            if accepted is not None:
                inbox.submit(accepted[0], name=f"gate {ref.run_id}/{ref.step_id}")

    @app.view(CONFIRM_CALLBACK)
    def on_confirm(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = ref_id(body, "user")
        try:
            meta = json.loads(str(view.get("private_metadata", "")))
            ref = ButtonRef.decode(str(meta["ref"]), "approve")
            channel = str(meta.get("channel", ""))
        except (ValueError, KeyError, TypeError):
            ref, channel = None, ""
        typed = str(
            view.get("state", {}).get("values", {}).get("confirm", {}).get("typed", {}).get("value") or ""
        ).strip()
        if ref is None:
            ack()
            return
        if typed != ref.step_id:
            # A string comparison: fast enough to answer inside the ack, where the modal shows it.
            ack(response_action="errors", errors={"confirm": f"Type {ref.step_id} exactly to approve."})
            return
        accepted = inbox.accept(
            "click",
            delivery_key(body) or f"view:{view.get('id', '')}",
            {
                "user": user,
                "channel": channel,
                "response_url": "",
                "trigger_id": "",
                "action_id": "gate_approve",
                "value": ref.encode(),
                "confirmation": typed,
            },
        )
        ack()
        if accepted is not None:
            with correlation(accepted[1]):
                inbox.submit(accepted[0], name=f"confirm {ref.run_id}/{ref.step_id}")


def confirm_view(ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    """The modal that asks for a destructive step's id, typed, before the approval counts."""
    return {
        "type": "modal",
        "callback_id": CONFIRM_CALLBACK,
        "private_metadata": json.dumps({"ref": ref.encode(), "channel": channel}),
        "title": {"type": "plain_text", "text": "Confirm a destructive step"[:24]},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*{slack_escape(title[:200])}* changes the cluster and cannot be undone "
                    f"by the bot. Type `{ref.step_id}` to approve it.",
                },
            },
            {
                "type": "input",
                "block_id": "confirm",
                "label": {"type": "plain_text", "text": "Step id"},
                "element": {"type": "plain_text_input", "action_id": "typed"},
            },
        ],
    }
