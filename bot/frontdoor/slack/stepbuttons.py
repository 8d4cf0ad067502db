"""What the step buttons of a run's card share (gate buttons, `gates.py`; a paused run's, `paused.py`):
a click taken into the inbox before the ack (or refused if no step waits on it), and the modals a
click opens — their frame, which carries the button's reference and channel, the reason field, and
reading a submission back."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from slack_bolt import Ack

from bot.adapters.store import Store
from bot.core.rendering import slack_escape
from bot.core.runs.machine import ButtonRef
from bot.frontdoor.inbox import Inbox
from bot.frontdoor.slack.clicks import audit_click, click_fields, take_click
from bot.frontdoor.slack.fallback import refuse_inactive_button
from bot.frontdoor.slack.keys import delivery_key, ref_id
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, log_context, new_correlation_id

#: Longest reason kept (the thread line and the audit row show it whole).
REASON_LIMIT = 500


def click_payload(body: dict[str, Any], action: dict[str, Any]) -> dict[str, str]:
    """A button click as the inbox keeps it: enough to decide it on a worker after a restart."""
    return {
        **click_fields(body),
        "trigger_id": str(body.get("trigger_id", "")),
        "action_id": str(action.get("action_id", "")),
        "value": str(action.get("value", "")),
    }


@dataclass(frozen=True, kw_only=True)
class StepButtonDoor:
    """What a door of step buttons holds to take a click or a modal's submission into the inbox
    (as its `KIND`, decided on a worker) and to refuse a button no step waits on."""

    #: The inbox kind its clicks and submissions are stored as.
    KIND: ClassVar[str]
    #: Its buttons: action id → decision.
    DECISIONS: ClassVar[Mapping[str, str]]

    inbox: Inbox
    workers: WorkerPool
    store: Store
    clock: Callable[[], datetime]

    def on_button(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        """Store a click in the inbox, ack, and decide it on a worker; a button whose reference does
        not parse (or that is not one of `DECISIONS`) is refused."""
        log = logging.getLogger(type(self).__module__)
        payload = click_payload(body, action)
        ref = ButtonRef.decode(payload["value"], self.DECISIONS.get(payload["action_id"], ""))
        accepted = None
        if ref is not None:
            # Stored before the ack: Slack never sends an acknowledged click again.
            accepted = self.inbox.accept(self.KIND, delivery_key(body), payload)
        ack()
        scope = log_context(run_id=ref.run_id, step=ref.step_id) if ref is not None else nullcontext()
        with correlation() as cid, scope:
            log.info("%s button %s from %s", self.KIND, payload["action_id"], payload["user"])
            if ref is None:
                refuse_inactive_button(
                    self.store,
                    self.workers,
                    at=self.clock(),
                    user=payload["user"],
                    channel=payload["channel"],
                    response_url=payload["response_url"],
                    action=action,
                    cid=cid,
                )
                return
            if accepted is not None:
                self.inbox.submit(accepted[0], name=f"{self.KIND} {ref.decision} {ref.run_id}/{ref.step_id}")

    def submit_form(
        self,
        ack: Ack,
        body: dict[str, Any],
        view: dict[str, Any],
        action_id: str,
        what: str,
        read: Callable[[ButtonRef], tuple[dict[str, str], dict[str, str]]],
    ) -> None:
        """A step modal's submission, finishing a click of `action_id`: `read` gives its fields'
        errors, answered inside the ack (pure string checks, fast enough; the modal shows them by the
        field), or the fields stored in the inbox with the click it finishes, decided on a worker
        (`what` names it in the log)."""
        ref, channel = submitted_ref(view, self.DECISIONS[action_id])
        if ref is None:
            ack()
            return
        errors, fields = read(ref)
        if errors:
            ack(response_action="errors", errors=errors)
            # Refused in the modal, by its field: audited as every click is (who, which step, why).
            refused = submission_payload(body, channel, action_id, ref)
            audit_click(self.store, self.clock, refused, new_correlation_id(), "run", ref.decision, "refused",
                        "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())))  # fmt: skip
            return
        payload = submission_payload(body, channel, action_id, ref, **fields)
        # Stored before the ack, as a click is: an acknowledged submission is never sent again.
        log = logging.getLogger(type(self).__module__)
        said = f"{what} for {ref.run_id}/{ref.step_id} from {payload['user']}"
        with log_context(run_id=ref.run_id, step=ref.step_id):
            take_click(self.inbox, ack, self.KIND, body, payload, log, said, view=view)

    def submit_reason(
        self, ack: Ack, body: dict[str, Any], view: dict[str, Any], action_id: str, what: str
    ) -> None:
        """A step modal whose one field is the reason: refused without one."""

        def read(ref: ButtonRef) -> tuple[dict[str, str], dict[str, str]]:
            reason = submitted_reason(view)
            if not reason:
                return {"reason": "Say why: it goes into the thread and the audit log."}, {}
            return {}, {"reason": reason}

        self.submit_form(ack, body, view, action_id, what, read)


def submission_payload(
    body: dict[str, Any], channel: str, action_id: str, ref: ButtonRef, **fields: str
) -> dict[str, str]:
    """A modal's submission stored as the click it finishes (a modal has no response URL)."""
    return {
        "user": ref_id(body, "user"),
        "channel": channel,
        "response_url": "",
        "trigger_id": "",
        "action_id": action_id,
        "value": ref.encode(),
        **fields,
    }


def submitted_ref(view: dict[str, Any], decision: str) -> tuple[ButtonRef | None, str]:
    """The button reference and channel a step modal carries, or (None, "") if they do not parse."""
    try:
        meta = json.loads(str(view.get("private_metadata", "")))
        return ButtonRef.decode(str(meta["ref"]), decision), str(meta.get("channel", ""))
    except (ValueError, KeyError, TypeError):
        return None, ""


def submitted_value(view: dict[str, Any], block: str, element: str = "typed") -> str:
    """A field of a submitted modal: a typed text or a picked option's value, stripped ("" if none)."""
    state = view.get("state", {}).get("values", {}).get(block, {}).get(element, {})
    picked = state.get("selected_option") or {}
    return str(state.get("value") or picked.get("value") or "").strip()


def submitted_reason(view: dict[str, Any]) -> str:
    """The reason typed in a step modal (block `reason`), as long as it is kept ("" if none)."""
    return submitted_value(view, "reason")[:REASON_LIMIT]


def step_heading(title: str, ref: ButtonRef, text: str) -> dict[str, Any]:
    """The modal's first block: the step's title and id, then what submitting it does."""
    return {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": f"*{slack_escape(title[:200])}* (`{slack_escape(ref.step_id[:64])}`) {text}",
        },
    }


def text_input(block_id: str, label: str, **element: Any) -> dict[str, Any]:
    """A required typed field (its element `typed`, with the `element` settings given), read back
    with `submitted_value(view, block_id)`."""
    return {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": label},
        "element": {"type": "plain_text_input", "action_id": "typed", **element},
    }


def reason_input(label: str = "Reason") -> dict[str, Any]:
    """The required, multiline reason field (block `reason`)."""
    return text_input("reason", label, multiline=True, max_length=REASON_LIMIT)


def step_modal(
    callback_id: str, ref: ButtonRef, channel: str, *, title: str, submit: str, blocks: list[dict[str, Any]]
) -> dict[str, Any]:
    """A modal about one step: its submission comes back with the button's reference and channel."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": json.dumps({"ref": ref.encode(), "channel": channel}),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def reason_modal(
    callback_id: str, ref: ButtonRef, channel: str, *, step_title: str, text: str, title: str, submit: str
) -> dict[str, Any]:
    """A modal whose one field is the reason for what submitting it does to the step (`text`)."""
    heading = step_heading(step_title, ref, text)
    return step_modal(callback_id, ref, channel, title=title, submit=submit, blocks=[heading, reason_input()])
