"""The Slack front door: a Bolt `App` whose listeners ack at once and hand work to the worker pool.

Both transports (HTTP and Socket Mode) share this App. The order inside a request is fixed by
Slack's 3-second ack budget: verify (Bolt's middleware, HTTP only) → de-duplicate (one indexed
insert) → ack → enqueue. Everything slow — the command itself, rendering, posting — happens on the
bot's own workers, and its reply goes back through `response_url` or the Web API.

Gate buttons (`gate_approve`, `gate_reject`) carry run id, step id and the step's state number;
the decision is made by the run service on a worker, and a refusal (wrong person, self-approval,
double click, stale button) comes back as an ephemeral message with a reference id. A destructive
step's approval opens a modal (`gate_confirm`) for the typed step id. Any other button is refused
as no longer active.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from slack_bolt import Ack, App, BoltResponse

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.core.rendering import slack_escape
from bot.core.runs.machine import ButtonRef
from bot.core.runs.service import Actor
from bot.errors import BotError, ConfigError, SlackCallFailed
from bot.frontdoor.wiring import Services
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, new_correlation_id
from bot.records import AuditEntry
from bot.router import CommandRequest, Outcome

log = logging.getLogger(__name__)

SLASH_COMMAND = "/upgrade"
#: Gate buttons on a run's thread (and card): action id → decision.
GATE_ACTIONS = {"gate_approve": "approve", "gate_reject": "reject"}
#: The modal a destructive step's approval opens for the typed confirmation.
CONFIRM_CALLBACK = "gate_confirm"


def delivery_key(body: dict[str, Any]) -> str | None:
    """A key that is the same for every delivery of one user action, and differs between actions.

    Events carry an event_id that Slack reuses on retries; commands and interactions carry a
    trigger_id that a double-submitted request repeats.
    """
    if body.get("event_id"):
        return f"event:{body['event_id']}"
    if body.get("trigger_id"):
        return f"trigger:{body['trigger_id']}"
    return None


def build_app(
    services: Services,
    workers: WorkerPool,
    *,
    signing_secret: str | None,
    socket_mode: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> App:
    if services.web_client is None:
        raise ConfigError("environment: SLACK_BOT_TOKEN is not set (secrets come only from the environment)")
    app = App(
        client=services.web_client,
        signing_secret=signing_secret or "",
        # Socket Mode messages are not signed; HTTP requests always are.
        request_verification_enabled=not socket_mode,
        process_before_response=False,
        logger=logging.getLogger("slack_bolt.App"),
    )
    gateway = SlackGateway(services.web_client)

    @app.middleware
    def deduplicate(body: dict[str, Any], next: Callable[[], None]) -> BoltResponse | None:
        key = delivery_key(body)
        if key is not None and not services.store.claim_delivery(key, clock()):
            # Acknowledge so Slack stops retrying, but never run the same action twice.
            log.info("ignoring duplicate delivery %s", key)
            return BoltResponse(status=200, body="")
        next()
        return None

    @app.command(SLASH_COMMAND)
    def on_command(ack: Ack, command: dict[str, Any]) -> None:
        ack()
        cid = new_correlation_id()
        request = CommandRequest(
            text=str(command.get("text", "")),
            user_id=str(command.get("user_id", "")),
            channel_id=str(command.get("channel_id", "")),
            source="slack",
            correlation_id=cid,
        )
        response_url = str(command.get("response_url", ""))

        def job() -> None:
            outcome = services.router.handle(request)
            deliver(outcome, gateway=gateway, response_url=response_url, request=request)

        with correlation(cid):
            log.info("accepted %s from %s in %s", SLASH_COMMAND, request.user_id, request.channel_id)
            workers.submit(job, name=f"{SLASH_COMMAND} {request.text[:40]}")

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
            out = services.runs.click(ref, actor, confirmation=confirmation)
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

    @app.action(re.compile("^gate_(approve|reject)$"))
    def on_gate(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        user = str(body.get("user", {}).get("id", ""))
        channel = str(body.get("channel", {}).get("id", ""))
        response_url = str(body.get("response_url", ""))
        trigger_id = str(body.get("trigger_id", ""))
        action_id = str(action.get("action_id", ""))
        ref = ButtonRef.decode(str(action.get("value", "")), GATE_ACTIONS.get(action_id, ""))
        with correlation() as cid:
            log.info("gate button %s from %s", action_id, user)
            if ref is None:
                on_unknown(user, channel, response_url, action, cid)
                return
            actor = Actor(user_id=user, source="slack", channel_id=channel, correlation_id=cid)
            workers.submit(
                lambda: decide(
                    ref, actor, response_url=response_url, trigger_id=trigger_id, confirmation=None
                ),
                name=f"gate {ref.run_id}/{ref.step_id}",
            )

    @app.view(CONFIRM_CALLBACK)
    def on_confirm(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = str(body.get("user", {}).get("id", ""))
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
        ack()
        with correlation() as cid:
            actor = Actor(user_id=user, source="slack", channel_id=channel, correlation_id=cid)
            workers.submit(
                lambda: decide(ref, actor, response_url="", trigger_id="", confirmation=typed),
                name=f"confirm {ref.run_id}/{ref.step_id}",
            )

    def on_unknown(user: str, channel: str, response_url: str, action: dict[str, Any], cid: str) -> None:
        action_id = str(action.get("action_id", ""))
        services.store.record_audit(
            AuditEntry(
                at=clock(),
                user_id=user,
                channel_id=channel,
                source="slack",
                kind="action",
                subcommand=action_id[:64],
                arguments=str(action.get("value", ""))[:2000],
                outcome="refused",
                detail="no step is waiting on this button",
                correlation_id=cid,
            )
        )
        if response_url:
            workers.submit(
                lambda: respond_via_url(
                    response_url,
                    f":warning: This button is not active any more. _(ref {cid})_",
                    ephemeral=True,
                ),
                name="stale button",
            )

    @app.action(re.compile(".*"))
    def on_action(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        user = str(body.get("user", {}).get("id", ""))
        channel = str(body.get("channel", {}).get("id", ""))
        with correlation() as cid:
            log.info("button %s from %s", action.get("action_id", ""), user)
            on_unknown(user, channel, str(body.get("response_url", "")), action, cid)

    @app.error
    def on_error(error: Exception, body: dict[str, Any]) -> None:
        # Bolt calls this for exceptions in listeners; nothing of it reaches chat.
        log.error("unhandled error in a Slack listener: %s", type(error).__name__, exc_info=error)

    return app


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


def deliver(outcome: Outcome, *, gateway: SlackGateway, response_url: str, request: CommandRequest) -> None:
    """Send a command's rendered reply back to Slack: ephemeral via response_url, else posted."""
    rendered, reply = outcome.rendered, outcome.reply
    with correlation(outcome.correlation_id):
        try:
            if reply.ephemeral:
                respond_via_url(response_url, rendered.text, blocks=rendered.blocks, ephemeral=True)
                target, thread_ts = (gateway.open_dm(request.user_id) if reply.files else "", None)
            else:
                posted = gateway.post_message(
                    reply.channel or request.channel_id, rendered.text, blocks=rendered.blocks
                )
                target, thread_ts = posted.channel, posted.ts
            for attachment in reply.files:
                gateway.upload_file(
                    target,
                    attachment.filename,
                    attachment.content,
                    title=attachment.title,
                    thread_ts=thread_ts,
                )
        except (SlackCallFailed, BotError) as exc:
            log.warning(
                "could not deliver the reply to /upgrade %s: %s", outcome.subcommand, exc.user_message
            )
            if response_url:
                try:
                    respond_via_url(
                        response_url,
                        f":warning: {exc.user_message} _(ref {outcome.correlation_id})_",
                        ephemeral=True,
                    )
                except BotError:
                    log.exception("could not tell the user that delivery failed")
