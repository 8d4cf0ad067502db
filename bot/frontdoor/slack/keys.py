"""Slack delivery keys: what makes two deliveries the same user action (de-duplication, inbox)."""

from __future__ import annotations

from typing import Any


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
