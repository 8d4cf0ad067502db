"""What no other Slack listener takes: any button that is not (or no longer) active is refused,
audited and answered ephemerally; an exception in a listener goes to the log, never to chat."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import respond_via_url
from bot.adapters.store import Store
from bot.core.audit import audit_entry
from bot.frontdoor.slack.keys import ref_id
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import correlation

log = logging.getLogger(__name__)


def register(app: App, *, store: Store, workers: WorkerPool, clock: Callable[[], datetime]) -> None:
    """Register last: the action listener here matches every action id."""

    @app.action(re.compile(".*"))
    def on_action(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        user = ref_id(body, "user")
        channel = ref_id(body, "channel")
        with correlation() as cid:
            log.info("button %s from %s", action.get("action_id", ""), user)
            refuse_inactive_button(
                store,
                workers,
                at=clock(),
                user=user,
                channel=channel,
                response_url=str(body.get("response_url", "")),
                action=action,
                cid=cid,
            )

    @app.error
    def on_error(error: Exception, body: dict[str, Any]) -> None:
        # Bolt calls this for exceptions in listeners; nothing of it reaches chat.
        log.error("unhandled error in a Slack listener: %s", type(error).__name__, exc_info=error)


def refuse_inactive_button(
    store: Store,
    workers: WorkerPool,
    *,
    at: datetime,
    user: str,
    channel: str,
    response_url: str,
    action: dict[str, Any],
    cid: str,
) -> None:
    """Audit a click on a button no step is waiting on, and tell the person so (on a worker)."""
    action_id = str(action.get("action_id", ""))
    store.record_audit(
        audit_entry(
            at=at,
            user_id=user,
            channel_id=channel,
            source="slack",
            kind="action",
            subcommand=action_id,
            arguments=str(action.get("value", "")),
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
