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


def ref_id(body: dict[str, Any], field: str) -> str:
    """`body[field]["id"]` (a user, channel or team as interactions carry them), or "": Slack
    sends `"channel": null` and leaves it out (a modal has no channel)."""
    ref = body.get(field)
    return str(ref.get("id") or "") if isinstance(ref, dict) else ""
