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

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.core.rendering import inert, slack_escape
from bot.core.runs.machine import ButtonRef, Outcome, Run
from bot.core.runs.service import Actor, RunService
from bot.errors import BotError
from bot.frontdoor.inbox import DONE_BEFORE
from bot.frontdoor.slack.clicks import click_actor
from bot.frontdoor.slack.refusals import refuse_click
from bot.frontdoor.slack.stepbuttons import (
    StepButtonDoor,
    reason_input,
    reason_modal,
    step_heading,
    step_modal,
    submitted_reason,
    submitted_value,
    text_input,
)
from bot.logsetup import log_context

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


def register(app: App, door: GateDoor) -> None:
    """Wire the gate buttons and modals into `app`, and the inbox's click work to `door`."""
    door.inbox.handle("click", door.work_click)
    app.action(re.compile("^gate_(approve|reject|force)$"))(door.on_button)
    app.view(CONFIRM_CALLBACK)(door.on_confirm)
    app.view(REASON_CALLBACK)(door.on_reason)
    app.view(FORCE_CALLBACK)(door.on_force)


@dataclass(frozen=True, kw_only=True)
class GateDoor(StepButtonDoor):
    """The gate buttons' and modals' handlers (Bolt passes `ack`, `body`, `action`/`view` by name),
    and the click work the inbox runs on a worker."""

    KIND = "click"
    DECISIONS = GATE_ACTIONS

    runs: RunService
    gateway: SlackGateway

    def refuse(self, actor: Actor, response_url: str, message: str) -> None:
        """Tell the clicker why their click does not count (ephemeral, with the reference id)."""
        where = {"response_url": response_url, "channel": actor.channel_id, "user": actor.user_id}
        refuse_click(self.gateway, actor.correlation_id, where, inert(message), what="click")

    def ask_reason(self, ref: ButtonRef, actor: Actor, *, response_url: str, trigger_id: str) -> None:
        """A Reject click: open the reason modal if this person may reject this gate now."""

        def view(run: Run) -> dict[str, Any]:
            phase = run.phase(run.step_run(ref.step_id)) or "start"
            return reason_view(ref, run.plan.step(ref.step_id).title, phase, actor.channel_id)

        self.ask_in_modal(
            ref, actor, response_url, trigger_id, may=lambda check: check.accepted, view=view, what="reason"
        )

    def ask_force(self, ref: ButtonRef, actor: Actor, *, response_url: str, trigger_id: str) -> None:
        """An "Approve with force…" click: open the force modal if this person may approve this
        gate now (the approval itself is decided again when the modal is submitted)."""

        def view(run: Run) -> dict[str, Any]:
            step = run.plan.step(ref.step_id)
            return force_view(ref, step.title, step.destructive, actor.channel_id)

        self.ask_in_modal(
            ref,
            actor,
            response_url,
            trigger_id,
            may=lambda check: check.accepted or check.needs_confirmation,
            view=view,
            what="force",
        )

    def ask_in_modal(
        self,
        ref: ButtonRef,
        actor: Actor,
        response_url: str,
        trigger_id: str,
        *,
        may: Callable[[Outcome], bool],
        view: Callable[[Run], dict[str, Any]],
        what: str,
    ) -> None:
        """Open the modal a click asks for (`view` of the run) if the run service says the clicker
        `may` make it now; otherwise, or if Slack will not open it, tell them why."""
        try:
            check = self.runs.check_click(ref, actor)
        except BotError as exc:
            check = None
            message = exc.user_message
        if check is not None and may(check):
            try:
                self.gateway.open_view(trigger_id, view(check.run))
                return
            except BotError as exc:
                message = f"could not open the {what} dialog ({exc.user_message}); click the button again"
        elif check is not None:
            message = check.message
        self.refuse(actor, response_url, message)

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
            self.refuse(actor, response_url, exc.user_message)
            return
        if out.needs_confirmation:
            step = out.run.plan.step(ref.step_id)
            try:
                self.gateway.open_view(trigger_id, confirm_view(ref, step.title, actor.channel_id))
            except BotError as exc:
                self.refuse(actor, response_url, f"could not open the confirmation: {exc.user_message}")
            return
        if not out.accepted:
            self.refuse(actor, response_url, out.message)

    def work_click(self, payload: dict[str, Any], cid: str, how: str) -> None:
        ref = ButtonRef.decode(str(payload["value"]), GATE_ACTIONS.get(str(payload["action_id"]), ""))
        if ref is None or how == DONE_BEFORE:
            return  # counted before the restart: the card and the thread show it
        actor = click_actor(payload, cid)
        with log_context(run_id=ref.run_id, step=ref.step_id):
            self.decide(
                ref,
                actor,
                response_url=str(payload["response_url"]),
                trigger_id=str(payload["trigger_id"]),
                confirmation=payload.get("confirmation"),
                reason=str(payload.get("reason") or ""),
            )

    def on_confirm(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        def read(ref: ButtonRef) -> tuple[dict[str, str], dict[str, str]]:
            typed = submitted_value(view, "confirm")
            if typed != ref.step_id:
                return {"confirm": f"Type {ref.step_id} exactly to approve."}, {}
            return {}, {"confirmation": typed}

        self.submit_form(ack, body, view, "gate_approve", "confirm", read)

    def on_reason(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        self.submit_reason(ack, body, view, "gate_reject", "reject")

    def on_force(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        def read(ref: ButtonRef) -> tuple[dict[str, str], dict[str, str]]:
            reason = submitted_reason(view)
            # None where the modal has no typed id (a step that is not destructive).
            typed = view.get("state", {}).get("values", {}).get("confirm", {}).get("typed", {}).get("value")
            errors, fields = {}, {"reason": reason}
            if not reason:
                errors["reason"] = "Say why force is needed: it goes into the thread and the audit log."
            if typed is not None and str(typed).strip() != ref.step_id:
                errors["confirm"] = f"Type {ref.step_id} exactly to approve."
            if typed is not None:
                fields["confirmation"] = str(typed).strip()
            return errors, fields

        self.submit_form(ack, body, view, "gate_force", "force", read)


def force_view(ref: ButtonRef, title: str, destructive: bool, channel: str) -> dict[str, Any]:
    """The modal of the force option: why (required), and a destructive step's id, typed."""
    heading = step_heading(
        title,
        ref,
        "with *force*: its pods are deleted with grace period 0, past their disruption budgets — what a pod "
        "on a dead node needs. The last pod of a workload still stays. Force is the gate's option only if "
        "every approval chooses it; otherwise the pods are evicted.",
    )
    blocks = [heading, reason_input("Why force")]
    if destructive:
        blocks.append(text_input("confirm", f"Type {ref.step_id[:60]} to approve"))
    return step_modal(
        FORCE_CALLBACK, ref, channel, title="Approve with force", submit="Approve with force", blocks=blocks
    )


def reason_view(ref: ButtonRef, title: str, phase: str, channel: str) -> dict[str, Any]:
    """The modal asking why a step is rejected (start gate) or reported failed (done gate)."""
    start = phase == "start"
    what = (
        "will not run: it is marked failed, and the run pauses or aborts as its plan says"
        if start
        else "is marked failed, and the run pauses or aborts as its plan says"
    )
    return reason_modal(
        REASON_CALLBACK,
        ref,
        channel,
        step_title=title,
        text=f"{what}. Say why: the reason goes to the run's thread and the audit log.",
        title="Reject the step" if start else "Report a failure",
        submit="Reject" if start else "Report failure",
    )


def confirm_view(ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    """The modal that asks for a destructive step's id, typed, before the approval counts."""
    heading = {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": f"*{slack_escape(title[:200])}* changes the cluster and cannot be undone "
            f"by the bot. Type `{ref.step_id}` to approve it.",
        },
    }
    return step_modal(
        CONFIRM_CALLBACK,
        ref,
        channel,
        title="Confirm destructive step",
        submit="Approve",
        blocks=[heading, text_input("confirm", "Step id")],
    )
