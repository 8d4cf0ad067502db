"""A cluster job's question in Slack: its answer buttons (`job_choice_<option>`) in the run's
thread, and the modal where an answer that needs a reason (deleting pods instead of evicting them)
gets one.

A click is stored in the inbox before the ack, then decided on a worker by the job service (is the
clicker in one of the answer's roles? is the question still open?); a refusal comes back as an
ephemeral message with a reference id. The job's next tick acts on the answer.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.core.jobs.service import VOTE_RECORDED, JobService, choice_of, parse_choice_value
from bot.core.rendering import inert, slack_escape
from bot.errors import BotError, UserError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.clicks import click_actor, click_fields, take_click
from bot.frontdoor.slack.keys import ref_id
from bot.frontdoor.slack.refusals import refuse_click
from bot.frontdoor.slack.stepbuttons import reason_input, submitted_reason

log = logging.getLogger(__name__)

REASON_CALLBACK = "job_choice_reason"


def register(app: App, *, jobs: JobService, gateway: SlackGateway, inbox: Inbox) -> None:
    def refuse(cid: str, payload: dict[str, Any], message: str) -> None:
        refuse_click(gateway, cid, payload, inert(message), what="answer")

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        parsed = parse_choice_value(str(payload.get("value", "")))
        if parsed is None or how == DONE_BEFORE:
            return
        job_id, key, option = parsed
        user = str(payload.get("user", ""))
        reason = str(payload.get("reason", ""))
        try:
            row = jobs.store.job(job_id)
            choice = choice_of(row.choice) if row is not None else None
            picked = next((o for o in choice.options if o.id == option), None) if choice else None
            if picked is not None and picked.needs_reason and not reason and payload.get("trigger_id"):
                # Only someone who may give the answer is asked why (not told after typing a reason).
                if row is not None and (refusal := jobs.refusal(row, picked, user)):
                    refuse(cid, payload, refusal)
                    return
                gateway.open_view(
                    str(payload["trigger_id"]), reason_view(str(payload["value"]), picked.label, payload)
                )
                return
            message = jobs.decide(
                job_id,
                choice_key=key,
                option=option,
                user_id=user,
                reason=reason,
                who=click_actor(payload, cid),
            )
            if VOTE_RECORDED in message and payload.get("channel"):
                # A first vote to waive Inconclusive evidence: the question stays open; say so.
                gateway.post_ephemeral(str(payload["channel"]), user, inert(message))
        except UserError as exc:
            refuse(cid, payload, exc.user_message)
        except BotError as exc:
            log.warning("answer to job %s failed: %s", job_id, exc.user_message)
            refuse(cid, payload, exc.user_message)

    inbox.handle("choice", work)

    @app.action(re.compile("^job_choice_[a-z-]+$"))
    def on_choice(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {
            **click_fields(body),
            "trigger_id": str(body.get("trigger_id", "")),
            "value": str(action.get("value", "")),
        }
        take_click(
            inbox, ack, "choice", body, payload, log, f"job answer {payload['value']} from {payload['user']}"
        )

    @app.view(REASON_CALLBACK)
    def on_reason(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        try:
            meta = json.loads(str(view.get("private_metadata", "")))
        except ValueError:
            ack()
            return
        reason = submitted_reason(view)
        if not reason:
            ack(
                response_action="errors",
                errors={"reason": "Say why: it goes into the thread and the audit log."},
            )
            return
        payload = {
            "user": ref_id(body, "user"),
            "channel": str(meta.get("channel", "")),
            "response_url": "",
            "trigger_id": "",
            "value": str(meta.get("value", "")),
            "reason": reason,
        }
        take_click(inbox, ack, "choice", body, payload, view=view)


def reason_view(value: str, label: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The modal asking why, for an answer that needs a reason."""
    return {
        "type": "modal",
        "callback_id": REASON_CALLBACK,
        "private_metadata": json.dumps({"value": value, "channel": payload.get("channel", "")}),
        "title": {"type": "plain_text", "text": "Give a reason"},
        "submit": {"type": "plain_text", "text": "Confirm"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*{slack_escape(label[:200])}*: say why (thread and audit log).",
                },
            },
            # At most REASON_LIMIT characters, as Slack's own counter shows: none is cut unseen.
            reason_input(),
        ],
    }
