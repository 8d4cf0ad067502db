"""A paused run's buttons in Slack: Resume, Skip… and Waive… on its card (bot/core/runs/paused.py).

The buttons (`paused_resume`, `paused_skip`, `paused_waive`) carry run id, step id and the stopped
step's state number, as gate buttons do. A click is stored in the inbox before the ack and decided
on a worker:
- Resume: the run service resumes the run if the clicker holds a role of the step's gate;
- Skip…: once the worker has checked the clicker may vote to skip (the step's gate rules), a
  modal (`paused_skip_reason`) asks why; its submission is a vote, decided again on a worker;
- Waive…: once the worker has checked the run is still paused there and the clicker may ask a
  waiver (one of `actions.approvers`, as `/upgrade waive` says), a modal (`paused_waive`) asks
  which finding, for how long and why; its submission is `/upgrade waive FINDING OBJECT… --for …
  --reason … --cluster …` run through the router as that person, so every rule of the command
  holds (a Required finding's waiver waits for a second role), and its reply is posted in the
  channel. The objects are the ones the check that paused the run named for that finding: the
  people looked at those, so the same finding on another object (a new PodDisruptionBudget at 0)
  still fails the next check, instead of passing under a waiver given for something else.
A refusal (wrong person, stale button, a blank reason) comes back ephemeral with a reference id.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.core.checks.waivers import UNREAD
from bot.core.durations import parse_duration
from bot.core.jobs.service import VOTE_RECORDED, JobService, choice_of
from bot.core.people import roles_of
from bot.core.rendering import inert
from bot.core.runs import paused as P
from bot.core.runs.machine import ButtonRef
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
from bot.router import CommandRequest, Router
from bot.settings import Settings
from commands.waive import MAX_OBJECTS as WAIVER_OBJECTS

log = logging.getLogger(__name__)

#: Button action id → what it asks.
ACTIONS = {
    P.RESUME: "resume",
    P.SKIP: "skip",
    P.WAIVE: "waive",
    P.WAIT: "wait",
    P.EVIDENCE_WAIVE: "evidence_waive",
    P.ABORT: "abort",
}
#: A run paused on Inconclusive evidence: the button → the answer its step's job gets.
EVIDENCE_ANSWERS = {"wait": "wait", "abort": "abort", "evidence_waive": "waive"}
SKIP_CALLBACK = "paused_skip_reason"
EVIDENCE_WAIVE_CALLBACK = "paused_evidence_waive_reason"
WAIVE_CALLBACK = "paused_waive"
#: The longest waiver `/upgrade waive` takes; the modal says so before the command refuses.
WAIVE_LONGEST = "90d"


def register(app: App, door: PausedDoor) -> None:
    """Wire the paused-run buttons and modals into `app`, and the inbox's click work to `door`."""
    door.inbox.handle("paused", door.work)
    app.action(re.compile("^paused_(resume|skip|waive|wait|evidence_waive|abort)$"))(door.on_button)
    app.view(SKIP_CALLBACK)(door.on_skip)
    app.view(EVIDENCE_WAIVE_CALLBACK)(door.on_evidence_waive)
    app.view(WAIVE_CALLBACK)(door.on_waive)


@dataclass(frozen=True, kw_only=True)
class PausedDoor(StepButtonDoor):
    """The paused run's buttons' and modals' handlers (Bolt passes `ack`, `body`, `action`/`view` by
    name), and the click work the inbox runs on a worker."""

    KIND = "paused"
    DECISIONS = ACTIONS

    runs: RunService
    router: Router
    settings: Callable[[], Settings]
    gateway: SlackGateway
    jobs: JobService

    def refuse(self, cid: str, payload: dict[str, Any], message: str) -> None:
        refuse_click(self.gateway, cid, payload, inert(message), what="paused run button")

    def work(self, payload: dict[str, Any], cid: str, how: str) -> None:
        ref = ButtonRef.decode(str(payload.get("value", "")), ACTIONS.get(str(payload.get("action_id")), ""))
        if ref is None or how == DONE_BEFORE:
            return  # done before the restart: the card and the thread show it
        actor = click_actor(payload, cid)
        try:
            if ref.decision in EVIDENCE_ANSWERS:
                self.evidence(ref, actor, payload)
                return
            if ref.decision == "waive" and payload.get("finding"):
                self.waive(ref, actor, payload)
                return
            if ref.decision in ("skip", "waive") and not payload.get("reason"):
                self.ask(ref, actor, payload)
                return
            out = self.runs.paused_click(ref, actor, reason=str(payload.get("reason") or ""))
        except BotError as exc:
            log.warning("paused-run button on %s/%s failed: %s", ref.run_id, ref.step_id, exc.user_message)
            self.refuse(cid, payload, exc.user_message)
            return
        if not out.accepted:
            self.refuse(cid, payload, out.message)

    def evidence(self, ref: ButtonRef, actor: Actor, payload: dict[str, Any]) -> None:
        """Wait, Waive… or Abort on a run paused on Inconclusive evidence: the run's rules first
        (who may; two people to waive), then the step's job gets the answer and goes on."""
        reason = str(payload.get("reason") or "")
        if ref.decision == "evidence_waive" and not reason:
            check = self.runs.check_evidence_waive(ref, actor)
            if not check.accepted:
                self.refuse(actor.correlation_id, payload, check.message)
                return
            title = check.run.plan.step(ref.step_id).title
            try:
                self.gateway.open_view(
                    str(payload.get("trigger_id", "")), evidence_waive_view(ref, title, actor.channel_id)
                )
            except BotError as exc:
                self.refuse(
                    actor.correlation_id,
                    payload,
                    f"could not open the dialog ({exc.user_message}); click again",
                )
            return
        row = self.jobs.store.job_of_step(ref.run_id, ref.step_id)
        choice = choice_of(row.choice) if row is not None and not row.decision else None
        if row is None or choice is None or not choice.key.startswith(P.EVIDENCE + ":"):
            self.refuse(actor.correlation_id, payload, f"`{ref.step_id}` is not waiting on evidence now")
            return
        if row.epoch != ref.epoch:
            self.refuse(
                actor.correlation_id,
                payload,
                f"this button is from an earlier state of run {ref.run_id}; use the buttons on its card",
            )
            return
        # The job service asks the run first (who may; two people to waive), as every door does.
        message = self.jobs.decide(
            row.id,
            choice_key=choice.key,
            option=EVIDENCE_ANSWERS[ref.decision],
            user_id=actor.user_id,
            reason=reason,
            who=actor,
        )
        if VOTE_RECORDED in message:
            self.gateway.post_ephemeral(actor.channel_id, actor.user_id, inert(message))

    def ask(self, ref: ButtonRef, actor: Actor, payload: dict[str, Any]) -> None:
        """Skip… or Waive… clicked: the modal, if this person may use it now."""
        check = self.runs.check_paused(ref, actor)
        if not check.accepted:
            self.refuse(actor.correlation_id, payload, check.message)
            return
        run = check.run
        if ref.decision == "waive":
            config = self.settings()
            held = roles_of(actor.user_id, config.roster, self.runs.directory) & set(config.action_approvers)
            if not held:
                who = " or ".join(f"the {r}" for r in config.action_approvers)
                self.refuse(actor.correlation_id, payload, f"a Required finding's waiver is asked by {who}")
                return
            cause = P.pause_cause(run)
            findings = cause.findings if cause is not None else ()
            if not findings:
                self.refuse(actor.correlation_id, payload, f"run {run.id} did not pause on a finding")
                return
            view = waive_view(ref, run.plan.step(ref.step_id).title, findings, actor.channel_id)
        else:
            view = skip_view(ref, run.plan.step(ref.step_id).title, actor.channel_id)
        try:
            self.gateway.open_view(str(payload.get("trigger_id", "")), view)
        except BotError as exc:
            self.refuse(
                actor.correlation_id,
                payload,
                f"could not open the dialog ({exc.user_message}); click the button again",
            )

    def waive(self, ref: ButtonRef, actor: Actor, payload: dict[str, Any]) -> None:
        """The Waive… modal's answer: `/upgrade waive` as this person, for the run's cluster."""
        run = self.runs.load(ref.run_id)
        finding = str(payload["finding"])
        cause = P.pause_cause(run)
        if cause is None or cause.step_id != ref.step_id or finding not in cause.findings:
            self.refuse(actor.correlation_id, payload, f"`{finding}` is not a finding this run paused on now")
            return
        objects = "".join(f" {shlex.quote(o)}" for o in self.found_objects(run.plan.cluster, finding))
        text = (
            f"waive {finding}{objects} --for {shlex.quote(str(payload['duration']))} "
            f"--reason {shlex.quote(str(payload['reason']))} --cluster {shlex.quote(run.plan.cluster)}"
        )
        outcome = self.router.handle(
            CommandRequest(
                text=text,
                user_id=actor.user_id,
                channel_id=actor.channel_id,
                correlation_id=actor.correlation_id,
            )
        )
        if outcome.reply.ephemeral:
            self.gateway.post_ephemeral(actor.channel_id, actor.user_id, outcome.rendered.text)
        else:
            self.gateway.post_message(
                outcome.reply.channel or actor.channel_id,
                outcome.rendered.text,
                blocks=outcome.rendered.blocks,
            )

    def found_objects(self, cluster: str, finding: str) -> tuple[str, ...]:
        """The objects the cluster's last check (the run's, which paused it) named for `finding`,
        which the modal's waiver covers; none (the whole finding) when that check could not tell
        (a list not read, objects not kept), named none, or named more than a waiver takes."""
        seen = self.runs.store.check_seen(cluster)
        if seen is None or UNREAD in seen.clipped or finding in seen.clipped:
            return ()
        objects = seen.findings.get(finding, ())
        if len(objects) > WAIVER_OBJECTS or any(len(o) > 300 for o in objects):
            return ()
        return objects

    def on_skip(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        self.submit_reason(ack, body, view, P.SKIP, f"paused {ACTIONS[P.SKIP]}")

    def on_evidence_waive(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        self.submit_reason(ack, body, view, P.EVIDENCE_WAIVE, f"paused {ACTIONS[P.EVIDENCE_WAIVE]}")

    def on_waive(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        def read(ref: ButtonRef) -> tuple[dict[str, str], dict[str, str]]:
            finding, duration, reason = (
                submitted_value(view, "finding", "picked"),
                submitted_value(view, "duration"),
                submitted_reason(view),
            )
            errors: dict[str, str] = {}
            try:
                # Pure and fast: answered inside the ack, where the modal shows it by the field.
                parse_duration(duration, longest=parse_duration(WAIVE_LONGEST))
            except ValueError as exc:
                errors["duration"] = f"{exc} (like 14d or 12h; at most {WAIVE_LONGEST})"[:150]
            if not reason:
                errors["reason"] = "Say why: it is shown with the finding and kept in the audit log."
            if not finding:
                errors["finding"] = "Pick the finding to waive."
            return errors, {"finding": finding, "duration": duration, "reason": reason}

        self.submit_form(ack, body, view, P.WAIVE, f"paused {ACTIONS[P.WAIVE]}", read)


#: The paused run's modals whose one field is the reason: callback id → title, submit label, and
#: what submitting it does to the step.
_REASON_MODALS = {
    SKIP_CALLBACK: (
        "Skip the step",
        "Skip",
        "will not be done by the bot: the run goes on with the next step once the step's gate agrees "
        "(two people where it needs two). Say why: the reason goes to the run's thread, its end and the audit log.",
    ),
    EVIDENCE_WAIVE_CALLBACK: (
        "Waive the evidence",
        "Vote to waive",
        "passes without evidence once two people agree (the primary and the shadow). Say why: the reason "
        "goes to the run's thread and the audit log.",
    ),
}


def _reason_view(callback_id: str, ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    modal_title, submit, text = _REASON_MODALS[callback_id]
    return reason_modal(
        callback_id, ref, channel, step_title=title, text=text, title=modal_title, submit=submit
    )


def skip_view(ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    """The modal asking why a paused run's stopped step is skipped."""
    return _reason_view(SKIP_CALLBACK, ref, title, channel)


def evidence_waive_view(ref: ButtonRef, title: str, channel: str) -> dict[str, Any]:
    """The modal asking why a step passes without evidence (one of the two votes it needs)."""
    return _reason_view(EVIDENCE_WAIVE_CALLBACK, ref, title, channel)


def waive_view(ref: ButtonRef, title: str, findings: tuple[str, ...], channel: str) -> dict[str, Any]:
    """The modal asking which finding the run paused on is waived, for how long and why."""
    heading = step_heading(
        title,
        ref,
        "failed on these Required findings. A waiver accepts one for a while, on the objects this check found it "
        "on (the same finding on another object still fails): it covers nothing until someone in a second role "
        "confirms it (`/upgrade waive confirm ID`); then Resume runs the check again.",
    )
    finding = {
        "type": "input",
        "block_id": "finding",
        "label": {"type": "plain_text", "text": "Finding"},
        "element": {
            "type": "static_select",
            "action_id": "picked",
            # Slack allows 100 options in a static select.
            "options": [{"text": {"type": "plain_text", "text": f}, "value": f} for f in findings[:100]],
        },
    }
    duration = text_input("duration", f"For how long (like 14d; at most {WAIVE_LONGEST})", max_length=10)
    return step_modal(
        WAIVE_CALLBACK,
        ref,
        channel,
        title="Waive a finding",
        submit="Ask the waiver",
        blocks=[heading, finding, duration, reason_input()],
    )
