"""What every button door in Slack does with a click around its own decision: the click taken
into the inbox before the ack and handed to a worker, the person it is decided for, and the
audit row of a click's outcome."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from slack_bolt import Ack

from bot.adapters.store import Store
from bot.core.audit import audit_entry
from bot.core.runs.service import Actor
from bot.frontdoor.inbox import Inbox
from bot.frontdoor.slack.keys import delivery_key, ref_id
from bot.logsetup import correlation


def click_fields(body: dict[str, Any]) -> dict[str, str]:
    """What every stored click keeps: who clicked, in which channel, and the URL that answers them."""
    return {
        "user": ref_id(body, "user"),
        "channel": ref_id(body, "channel"),
        "response_url": str(body.get("response_url", "")),
    }


def take_click(
    inbox: Inbox,
    ack: Ack,
    kind: str,
    body: dict[str, Any],
    payload: dict[str, Any],
    log: logging.Logger | None = None,
    said: str = "",
    *,
    view: Mapping[str, Any] | None = None,
) -> None:
    """Store a click (or a modal's submission, `view`) in the inbox as `kind` under its delivery
    key, ack, and have a worker decide it; `said` goes to `log` with the click's correlation id."""
    key = delivery_key(body)
    if key is None and view is not None:
        key = f"view:{view.get('id', '')}"
    # Stored before the ack: Slack never sends an acknowledged click again.
    accepted = inbox.accept(kind, key, payload)
    ack()
    if accepted is not None:
        with correlation(accepted[1]):
            if log is not None:
                log.info("%s", said)
            inbox.submit(accepted[0], name=f"{kind} {str(payload.get('value', ''))[:40]}")


def click_actor(payload: Mapping[str, Any], cid: str) -> Actor:
    """The person a stored click is decided for, in the channel it came from."""
    return Actor(
        user_id=str(payload["user"]),
        source="slack",
        channel_id=str(payload["channel"]),
        correlation_id=cid,
    )


def audit_click(
    store: Store,
    clock: Callable[[], datetime],
    payload: Mapping[str, Any],
    cid: str,
    kind: str,
    subcommand: str,
    outcome: str,
    detail: str,
    *,
    longest: int | None = None,
) -> None:
    """The audit row of a click's outcome (`kind`, `subcommand`), by the clicker in the click's
    channel, its button's value the arguments (cut to `longest`)."""
    store.record_audit(
        audit_entry(
            at=clock(),
            user_id=str(payload.get("user", "")),
            channel_id=str(payload.get("channel", "")),
            source="slack",
            kind=kind,
            subcommand=subcommand,
            arguments=str(payload.get("value", ""))[:longest],
            outcome=outcome,
            detail=detail,
            correlation_id=cid,
        )
    )
