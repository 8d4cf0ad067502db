"""The `/upgrade` slash command in Slack: ack, hand the command to the router on a worker, and
deliver its reply — ephemeral through `response_url`, or posted in the channel."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.core.rendering import inert
from bot.errors import BotError, SlackCallFailed, clip
from bot.frontdoor.inbox import DONE_BEFORE, Inbox
from bot.frontdoor.slack.keys import delivery_key
from bot.logsetup import correlation
from bot.router import CommandRequest, Outcome, Router

log = logging.getLogger(__name__)

SLASH_COMMAND = "/upgrade"


#: What the inbox keeps of a slash command: enough to run it again after a restart.
_FIELDS = ("text", "user_id", "channel_id", "response_url")


def register(app: App, *, router: Router, gateway: SlackGateway, inbox: Inbox) -> None:
    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        if how == DONE_BEFORE:
            # Ran before the restart (or on a replica that stopped answering, which does not
            # answer when it wakes: `Inbox.still_ours`); only its reply was lost.
            respond_via_url(
                str(payload.get("response_url", "")),
                f":information_source: `/upgrade {inert(clip(str(payload.get('text', ''))), multiline=False)}` was "
                f"already done, once; its reply was lost when the bot that did it stopped. The channel shows its "
                f"result. _(ref {cid})_",
                ephemeral=True,
            )
            return
        request = CommandRequest(
            text=str(payload.get("text", "")),
            user_id=str(payload.get("user_id", "")),
            channel_id=str(payload.get("channel_id", "")),
            source="slack",
            correlation_id=cid,
        )
        outcome = router.handle(request)
        if not inbox.still_ours(cid):
            return  # taken over while this process was away: its new owner answered the person
        deliver(outcome, gateway=gateway, response_url=str(payload.get("response_url", "")), request=request)

    inbox.handle("command", work)

    @app.command(SLASH_COMMAND)
    def on_command(ack: Ack, body: dict[str, Any], command: dict[str, Any]) -> None:
        # Stored before the ack: Slack never sends an acknowledged command again.
        accepted = inbox.accept("command", delivery_key(body), {f: str(command.get(f, "")) for f in _FIELDS})
        ack()
        if accepted is None:
            return
        item_id, cid = accepted
        with correlation(cid):
            log.info(
                "accepted %s from %s in %s", SLASH_COMMAND, command.get("user_id"), command.get("channel_id")
            )
            inbox.submit(item_id, name=f"{SLASH_COMMAND} {str(command.get('text', ''))[:40]}")


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
                    respond_via_url(response_url, _undelivered(outcome, request, exc), ephemeral=True)
                except BotError:
                    log.exception("could not tell the user that delivery failed")


#: How much of an undelivered reply the ephemeral answer repeats (Slack takes 3,000 characters).
REPEATED = 2400


def _undelivered(outcome: Outcome, request: CommandRequest, exc: SlackCallFailed | BotError) -> str:
    """The person's answer when a command's reply could not be posted: the command was done (a
    plan stored, a snapshot taken), so it says so and repeats the reply, lest they do it again."""
    why = inert(exc.user_message)
    ref = f"_(ref {outcome.correlation_id})_"
    if outcome.reply.ephemeral or not outcome.ok:
        return f":warning: {why} {ref}"
    channel = outcome.reply.channel or request.channel_id
    text = outcome.rendered.text
    shown = text if len(text) <= REPEATED else text[: REPEATED - 1] + "…"
    return (
        f":warning: `/upgrade {inert(' '.join(request.text.split()[:3])[:60], multiline=False)}` was done, but its "
        f"reply could not be posted in <#{channel}>: "
        f"{why} {ref}\nIt said:\n{shown}"
    )
