"""Signed but malformed Slack payloads that a probe of a real `upgrade-bot run --http` found
crashing inside Bolt or a listener (a 500 with a traceback): each must be refused before any
listener runs, by both doors."""

from __future__ import annotations

import json
import urllib.parse


def form(document: object) -> bytes:
    """An interaction as Slack posts it: a form with one `payload` field holding JSON."""
    return urllib.parse.urlencode({"payload": json.dumps(document)}).encode()


def reason_submission(view: dict[str, object]) -> dict[str, object]:
    return {"type": "view_submission", "user": {"id": "U0PRIMARY"}, "trigger_id": "1.2.v", "view": view}


def reason_view(**changes: object) -> dict[str, object]:
    view: dict[str, object] = {
        "id": "V1",
        "type": "modal",
        "callback_id": "job_choice_reason",
        "private_metadata": json.dumps({"value": "1|k|delete", "channel": "C0OPS"}),
        "state": {"values": {"reason": {"typed": {"type": "plain_text_input", "value": "why"}}}},
    }
    view.update(changes)
    return view


def click(actions: object, **more: object) -> dict[str, object]:
    return {
        "type": "block_actions",
        "user": {"id": "U0PRIMARY"},
        "channel": {"id": "C0OPS"},
        "trigger_id": "1.2.a",
        "actions": actions,
        **more,
    }


UNTYPED = reason_view()
del UNTYPED["type"]

#: The signed but malformed shapes a probe of a real process found crashing inside Bolt or a listener.
MALFORMED: list[tuple[str, bytes, str]] = [
    ("block_actions with no actions", form(click([])), "form"),
    ("block_actions with an empty action", form(click([{}])), "form"),
    (
        "a gate button whose epoch has 5,000 digits",
        form(click([{"action_id": "gate_approve", "type": "button", "value": "x|y|" + "9" * 5000}])),
        "form",
    ),
    ("a view with no type", form(reason_submission(UNTYPED)), "form"),
    (
        "a view whose reason is a string",
        form(reason_submission(reason_view(state={"values": {"reason": "because"}}))),
        "form",
    ),
    (
        "a view whose typed value is a number",
        form(reason_submission(reason_view(state={"values": {"reason": {"typed": {"value": 5}}}}))),
        "form",
    ),
    ("an event that is a string", json.dumps({"type": "event_callback", "event": "str"}).encode(), "json"),
    (
        "an event whose channel is a number",
        json.dumps(
            {"type": "event_callback", "event_id": "Ev1", "event": {"type": "message", "channel": 5}}
        ).encode(),
        "json",
    ),
]
