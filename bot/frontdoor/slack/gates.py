"""Gate buttons in Slack: Approve and Reject on a run's card and thread, the modal in which a
destructive step's approval is confirmed by typing the step id, and the one in which a rejection
(or a failure reported on a "done" gate) says why.

The buttons (`gate_approve`, `gate_reject`, and `gate_force` on a step that offers force) carry run id, step id and the step's state number; the
decision is made by the run service on a worker, and a refusal (wrong person, self-approval,
double click, stale button) comes back as an ephemeral message with a reference id. A destructive
step's approval opens a modal (`gate_confirm`) for the typed step id. Reject opens a modal
(`gate_reason`) for a required reason once the worker has checked the clicker may reject this
gate now; its submission is stored in the inbox before the ack (as a click is) and decided on a
worker, where the run service checks everything again (a gate that moved on meanwhile, a role
handed over): the reason goes to the run's thread and the audit log. "Approve with force…" opens
its own modal (`gate_force_reason`) for the force's reason (and a destructive step's typed id): it
is an approval with the force option, stored and audited with that reason.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.adapters.store import Store
from bot.core.rendering import inert, slack_escape
from bot.core.runs.machine import ButtonRef
from bot.core.runs.service import Actor, RunService
from bot.errors import BotError
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.fallback import refuse_inactive_button
from bot.frontdoor.slack.keys import delivery_key, ref_id
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, log_context

log = logging.getLogger(__name__)

#: Gate buttons on a run's thread (and card): action id → decision. `gate_force` is the force
#: option of a step that offers it (`delete-pod`: grace period 0, past disruption budgets).
GATE_ACTIONS = {"gate_approve": "approve", "gate_reject": "reject", "gate_force": "force"}
#: The modal a destructive step's approval opens for the typed confirmation.
CONFIRM_CALLBACK = "gate_confirm"
#: The modal a rejection (or a reported failure) opens for its reason.
REASON_CALLBACK = "gate_reason"
#: The modal the force option opens for its own reason (and a destructive step's typed id).
FORCE_CALLBACK = "gate_force_reason"
#: Longest reason kept (the thread line and the audit row show it whole).
REASON_LIMIT = 500


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
    """Wire the gate buttons and modals into `app`, and the inbox's click work to `GateDoor`."""
    door = GateDoor(runs=runs, gateway=gateway, inbox=inbox, workers=workers, store=store, clock=clock)
    inbox.handle("click", door.work_click)
    app.action(re.compile("^gate_(approve|reject|force)$"))(door.on_gate)
    app.view(CONFIRM_CALLBACK)(door.on_confirm)
    app.view(REASON_CALLBACK)(door.on_reason)
    app.view(FORCE_CALLBACK)(door.on_force)


@dataclass(frozen=True, kw_only=True)
class GateDoor:
    """The gate buttons' and modals' handlers (Bolt passes `ack`, `body`, `action`/`view` by name),
    and the click work the inbox runs on a worker."""

    runs: RunService
    gateway: SlackGateway
    inbox: Inbox
    workers: WorkerPool
    store: Store
    clock: Callable[[], datetime]

    def refuse(self, cid: str, *, user: str, channel: str, response_url: str, message: str) -> None:
        text = f":no_entry: {inert(message)} _(ref {cid})_"
        try:
            if response_url:
                respond_via_url(response_url, text, ephemeral=True)
            elif channel:
                self.gateway.post_ephemeral(channel, user, text)
        except BotError as exc:
            log.warning("could not tell %s why their click was refused: %s", user, exc.user_message)

    def ask_reason(self, ref: ButtonRef, actor: Actor, *, response_url: str, trigger_id: str) -> None:
        """A Reject click: open the reason modal if this person may reject this gate now."""
        try:
            check = self.runs.check_click(ref, actor)
        except BotError as exc:
            check = None
            message = exc.user_message
        if check is not None and check.accepted:
            run = check.run
            step = run.plan.step(ref.step_id)
            phase = run.phase(run.step_run(ref.step_id)) or "start"
            try:
                self.gateway.open_view(trigger_id, reason_view(ref, step.title, phase, actor.channel_id))
                return
            except BotError as exc:
                message = f"could not open the reason dialog ({exc.user_message}); click the button again"
        elif check is not None:
            message = check.message
        self.refuse(
            actor.correlation_id,
            user=actor.user_id,
            channel=actor.channel_id,
            response_url=response_url,
            message=message,
        )

    def ask_force(self, ref: ButtonRef, actor: Actor, *, response_url: str, trigger_id: str) -> None:
        """An "Approve with force…" click: open the force modal if this person may approve this
        gate now (the approval itself is decided again when the modal is submitted)."""
        try:
            check = self.runs.check_click(ref, actor)
        except BotError as exc:
            check = None
            message = exc.user_message
        if check is not None and (check.accepted or check.needs_confirmation):
            run = check.run
            step = run.plan.step(ref.step_id)
            try:
                self.gateway.open_view(
                    trigger_id, force_view(ref, step.title, step.destructive, actor.channel_id)
                )
                return
            except BotError as exc:
                message = f"could not open the force dialog ({exc.user_message}); click the button again"
        elif check is not None:
            message = check.message
        self.refuse(
            actor.correlation_id,
            user=actor.user_id,
            channel=actor.channel_id,
            response_url=response_url,
            message=message,
        )

    def decide(
        self,
        ref: ButtonRef,
        actor: Actor,
        *,
        response_url: str,
        trigger_id: str,
        confirmation: str | None,
        reason: str = "",
    ) -> None:
        if ref.decision == "reject" and not reason:
            self.ask_reason(ref, actor, response_url=response_url, trigger_id=trigger_id)
            return
        if ref.decision == "force" and not reason:
            self.ask_force(ref, actor, response_url=response_url, trigger_id=trigger_id)
            return
        try:
            out = self.runs.click(ref, actor, confirmation=confirmation, reason=reason)
        except BotError as exc:
            log.warning("gate click on %s/%s failed: %s", ref.run_id, ref.step_id, exc.user_message)
            self.refuse(
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
                self.gateway.open_view(trigger_id, confirm_view(ref, step.title, actor.channel_id))
            except BotError as exc:
                self.refuse(
                    actor.correlation_id,
                    user=actor.user_id,
                    channel=actor.channel_id,
                    response_url=response_url,
                    message=f"could not open the confirmation: {exc.user_message}",
                )
            return
        if not out.accepted:
            self.refuse(
                actor.correlation_id,
                user=actor.user_id,
                channel=actor.channel_id,
                response_url=response_url,
                message=out.message,
            )

    def work_click(self, payload: dict[str, Any], cid: str, how: str) -> None:
        ref = ButtonRef.decode(str(payload["value"]), GATE_ACTIONS.get(str(payload["action_id"]), ""))
        if ref is None or how == DONE_BEFORE:
            return  # counted before the restart: the card and the thread show it
        actor = Actor(
            user_id=str(payload["user"]),
            source="slack",
            channel_id=str(payload["channel"]),
            correlation_id=cid,
        )
        with log_context(run_id=ref.run_id, step=ref.step_id):
            self.decide(
                ref,
                actor,
                response_url=str(payload["response_url"]),
                trigger_id=str(payload["trigger_id"]),
                confirmation=payload.get("confirmation"),
                reason=str(payload.get("reason") or ""),
            )

    def on_gate(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
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
            accepted = self.inbox.accept(
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
        scope = log_context(run_id=ref.run_id, step=ref.step_id) if ref is not None else nullcontext()
        with correlation() as cid, scope:
            log.info("gate button %s from %s", action_id, user)
            if ref is None:
                refuse_inactive_button(
                    self.store,
                    self.workers,
                    at=self.clock(),
                    user=user,
                    channel=channel,
                    response_url=response_url,
                    action=action,
                    cid=cid,
                )
                return
            if accepted is not None:
                self.inbox.submit(accepted[0], name=f"gate {ref.run_id}/{ref.step_id}")

    def on_confirm(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
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
        accepted = self.inbox.accept(
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
                self.inbox.submit(accepted[0], name=f"confirm {ref.run_id}/{ref.step_id}")

    def on_reason(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = str(body.get("user", {}).get("id", ""))
        try:
            meta = json.loads(str(view.get("private_metadata", "")))
            ref = ButtonRef.decode(str(meta["ref"]), "reject")
            channel = str(meta.get("channel", ""))
        except (ValueError, KeyError, TypeError):
            ref, channel = None, ""
        reason = str(
            view.get("state", {}).get("values", {}).get("reason", {}).get("typed", {}).get("value") or ""
        ).strip()
        if ref is None:
            ack()
            return
        if not reason:
            # Slack requires the input too; a blank one (spaces) is answered inside the ack.
            ack(
                response_action="errors",
                errors={"reason": "Say why: it goes into the thread and the audit log."},
            )
            return
        # Stored before the ack, as a click is: an acknowledged submission is never sent again.
        accepted = self.inbox.accept(
            "click",
            delivery_key(body) or f"view:{view.get('id', '')}",
            {
                "user": user,
                "channel": channel,
                "response_url": "",
                "trigger_id": "",
                "action_id": "gate_reject",
                "value": ref.encode(),
                "reason": reason[:REASON_LIMIT],
            },
        )
        ack()
        if accepted is not None:
            with correlation(accepted[1]), log_context(run_id=ref.run_id, step=ref.step_id):
                log.info("gate reason for %s/%s from %s", ref.run_id, ref.step_id, user)
                self.inbox.submit(accepted[0], name=f"reject {ref.run_id}/{ref.step_id}")

    def on_force(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = str(body.get("user", {}).get("id", ""))
        try:
            meta = json.loads(str(view.get("private_metadata", "")))
            ref = ButtonRef.decode(str(meta["ref"]), "force")
            channel = str(meta.get("channel", ""))
        except (ValueError, KeyError, TypeError):
            ref, channel = None, ""
        values = view.get("state", {}).get("values", {})
        reason = str(values.get("reason", {}).get("typed", {}).get("value") or "").strip()
        typed = values.get("confirm", {}).get("typed", {}).get("value")
        if ref is None:
            ack()
            return
        errors = {}
        if not reason:
            errors["reason"] = "Say why force is needed: it goes into the thread and the audit log."
        if typed is not None and str(typed).strip() != ref.step_id:
            errors["confirm"] = f"Type {ref.step_id} exactly to approve."
        if errors:
            # String checks: fast enough to answer inside the ack, where the modal shows them.
            ack(response_action="errors", errors=errors)
            return
        payload = {
            "user": user,
            "channel": channel,
            "response_url": "",
            "trigger_id": "",
            "action_id": "gate_force",
            "value": ref.encode(),
            "reason": reason[:REASON_LIMIT],
        }
        if typed is not None:
            payload["confirmation"] = str(typed).strip()
        # Stored before the ack, as a click is: an acknowledged submission is never sent again.
        accepted = self.inbox.accept("click", delivery_key(body) or f"view:{view.get('id', '')}", payload)
        ack()
        if accepted is not None:
            with correlation(accepted[1]), log_context(run_id=ref.run_id, step=ref.step_id):
                log.info("gate force for %s/%s from %s", ref.run_id, ref.step_id, user)
                self.inbox.submit(accepted[0], name=f"force {ref.run_id}/{ref.step_id}")


def force_view(ref: ButtonRef, title: str, destructive: bool, channel: str) -> dict[str, Any]:
    """The modal of the force option: why (required), and a destructive step's id, typed."""
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"*{slack_escape(title[:200])}* (`{slack_escape(ref.step_id[:64])}`) with *force*: "
                "its pods are deleted with grace period 0, past their disruption budgets — what a pod "
                "on a dead node needs. The last pod of a workload still stays. Force is the gate's "
                "option only if every approval chooses it; otherwise the pods are evicted.",
            },
        },
        {
            "type": "input",
            "block_id": "reason",
            "label": {"type": "plain_text", "text": "Why force"},
            "element": {
                "type": "plain_text_input",
                "action_id": "typed",
                "multiline": True,
                "max_length": REASON_LIMIT,
            },
        },
    ]
    if destructive:
        blocks.append(
            {
                "type": "input",
                "block_id": "confirm",
                "label": {"type": "plain_text", "text": f"Type {ref.step_id[:60]} to approve"},
                "element": {"type": "plain_text_input", "action_id": "typed"},
            }
        )
    return {
        "type": "modal",
        "callback_id": FORCE_CALLBACK,
        "private_metadata": json.dumps({"ref": ref.encode(), "channel": channel}),
        "title": {"type": "plain_text", "text": "Approve with force"},
        "submit": {"type": "plain_text", "text": "Approve with force"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def reason_view(ref: ButtonRef, title: str, phase: str, channel: str) -> dict[str, Any]:
    """The modal asking why a step is rejected (start gate) or reported failed (done gate)."""
    start = phase == "start"
    what = (
        "will not run: it is marked failed, and the run pauses or aborts as its plan says"
        if start
        else "is marked failed, and the run pauses or aborts as its plan says"
    )
    return {
        "type": "modal",
        "callback_id": REASON_CALLBACK,
        "private_metadata": json.dumps({"ref": ref.encode(), "channel": channel}),
        "title": {"type": "plain_text", "text": "Reject the step" if start else "Report a failure"},
        "submit": {"type": "plain_text", "text": "Reject" if start else "Report failure"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": f"*{slack_escape(title[:200])}* (`{slack_escape(ref.step_id[:64])}`) {what}. "
                    "Say why: the reason goes to the run's thread and the audit log.",
                },
            },
            {
                "type": "input",
                "block_id": "reason",
                "label": {"type": "plain_text", "text": "Reason"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "typed",
                    "multiline": True,
                    "max_length": REASON_LIMIT,
                },
            },
        ],
    }


def confirm_view(ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    """The modal that asks for a destructive step's id, typed, before the approval counts."""
    return {
        "type": "modal",
        "callback_id": CONFIRM_CALLBACK,
        "private_metadata": json.dumps({"ref": ref.encode(), "channel": channel}),
        "title": {"type": "plain_text", "text": "Confirm destructive step"},
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
