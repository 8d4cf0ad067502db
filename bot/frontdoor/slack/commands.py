"""The `/upgrade` slash command in Slack: ack, hand the command to the router on a worker, and
deliver its reply — ephemeral through `response_url`, or posted in the channel."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.errors import BotError, SlackCallFailed
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation, new_correlation_id
from bot.router import CommandRequest, Outcome, Router

log = logging.getLogger(__name__)

SLASH_COMMAND = "/upgrade"


def register(app: App, *, router: Router, gateway: SlackGateway, workers: WorkerPool) -> None:
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
            outcome = router.handle(request)
            deliver(outcome, gateway=gateway, response_url=response_url, request=request)

        with correlation(cid):
            log.info("accepted %s from %s in %s", SLASH_COMMAND, request.user_id, request.channel_id)
            workers.submit(job, name=f"{SLASH_COMMAND} {request.text[:40]}")


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
