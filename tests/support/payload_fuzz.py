"""Hypothesis strategies for Slack's payloads, from the shapes the bot reads
(`bot.frontdoor.payloads`): a valid payload of each kind, then one mutation — a field dropped,
retyped, truncated, oversized or made of odd Unicode — anywhere in it."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

USERS = st.sampled_from(["U0PRIMARY", "U0SHADOW", "U0STRANGER"])
# Digits that are not ASCII ("²", Arabic-Indic, full-width), marks, surrogates and controls.
ODD_TEXT = st.sampled_from(
    ["²", "١٢", "٣", "１２", "\u0301", "\ud800", "\x00", "‮", "—", "“", "|", "||", "9" * 5000, "x" * 4000]
)
TEXT = st.one_of(st.text(max_size=30), ODD_TEXT)
BUTTON_VALUE = st.one_of(
    st.sampled_from(["r-1|drain|3", "1|drain-timeout:node-1:1|wait", "x|y|", "²|k|wait", "1|k|delete"]),
    st.tuples(TEXT, TEXT, TEXT).map("|".join),
    TEXT,
)
ACTION_ID = st.sampled_from(["gate_approve", "gate_reject", "job_choice_wait", "job_choice_delete", "other"])
CALLBACK_ID = st.sampled_from(["gate_confirm", "job_choice_reason", "gate_reject_reason", "a-new-modal"])


def _metadata(draw: Any) -> str:
    return json.dumps({"ref": draw(BUTTON_VALUE), "value": draw(BUTTON_VALUE), "channel": "C0OPS"})


@st.composite
def block_actions(draw: Any, response_url: str) -> dict[str, Any]:
    action: dict[str, Any] = {
        "action_id": draw(ACTION_ID),
        "block_id": "b",
        "type": "button",
        "value": draw(BUTTON_VALUE),
        "action_ts": "1.2",
    }
    return {
        "type": "block_actions",
        "trigger_id": f"t-{draw(st.integers(0, 10**9))}",
        "user": {"id": draw(USERS), "team_id": "T0TEAM"},
        "channel": {"id": "C0OPS"},
        "team": {"id": "T0TEAM"},
        "api_app_id": "A0STUB",
        "response_url": response_url,
        "container": {"type": "message"},
        "message": {"user": "UBOT", "ts": "1.1", "text": "card"},
        "actions": [action],
    }


@st.composite
def view_payload(draw: Any, kind: str) -> dict[str, Any]:
    block = draw(st.sampled_from(["confirm", "reason", "why"]))
    value = draw(st.one_of(st.none(), TEXT))
    return {
        "type": kind,
        "trigger_id": f"v-{draw(st.integers(0, 10**9))}",
        "user": {"id": draw(USERS)},
        "team": {"id": "T0TEAM"},
        "api_app_id": "A0STUB",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": draw(CALLBACK_ID),
            "private_metadata": _metadata(draw),
            "state": {"values": {block: {"typed": {"type": "plain_text_input", "value": value}}}},
        },
    }


@st.composite
def shortcut(draw: Any) -> dict[str, Any]:
    return {
        "type": draw(st.sampled_from(["shortcut", "message_action"])),
        "callback_id": draw(st.sampled_from(["upgrade", "x"])),
        "trigger_id": "s-1",
        "user": {"id": draw(USERS)},
        "channel": {"id": "C0OPS"},
        "team": {"id": "T0TEAM"},
    }


@st.composite
def event_callback(draw: Any) -> dict[str, Any]:
    return {
        "type": "event_callback",
        "team_id": "T0TEAM",
        "api_app_id": "A0STUB",
        "event_id": f"Ev{draw(st.integers(0, 10**9))}",
        "event_time": 1,
        "authorizations": [{"team_id": "T0TEAM", "user_id": "UBOT", "is_bot": True}],
        "event": {
            "type": draw(st.sampled_from(["app_mention", "message", "reaction_added", "channel_created"])),
            "user": draw(USERS),
            "channel": draw(st.sampled_from(["C0OPS", {"id": "C0OPS", "name": "ops"}])),
            "text": draw(TEXT),
            "ts": "1.1",
            "item": {"type": "message", "channel": "C0OPS", "ts": "1.1"},
        },
    }


@st.composite
def slash_command(draw: Any, response_url: str) -> dict[str, Any]:
    return {
        "token": "x",
        "team_id": "T0TEAM",
        "channel_id": "C0OPS",
        "user_id": draw(USERS),
        "command": "/upgrade",
        "text": draw(st.one_of(st.sampled_from(["help", "whoami", "status", "plan show x"]), TEXT)),
        "api_app_id": "A0STUB",
        "response_url": response_url,
        "trigger_id": f"c-{draw(st.integers(0, 10**9))}",
    }


def valid(response_url: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(Socket Mode envelope type, payload) for every kind the bot handles."""
    return st.one_of(
        block_actions(response_url).map(lambda p: ("interactive", p)),
        view_payload("view_submission").map(lambda p: ("interactive", p)),
        view_payload("view_closed").map(lambda p: ("interactive", p)),
        shortcut().map(lambda p: ("interactive", p)),
        event_callback().map(lambda p: ("events_api", p)),
        slash_command(response_url).map(lambda p: ("slash_commands", p)),
    )


REPLACEMENTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**4000, max_value=10**4001),
    st.floats(allow_nan=False),
    TEXT,
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` with one change at one path: dropped, retyped, truncated, oversized or odd."""
    out = copy.deepcopy(payload)
    path = draw(st.sampled_from(_paths(out)))
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    how = draw(st.sampled_from(["drop", "retype", "truncate", "oversize", "unicode"]))
    if how == "drop":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    elif how == "retype":
        parent[key] = draw(REPLACEMENTS)
    elif how == "truncate":
        value = parent[key]
        parent[key] = (
            value[: draw(st.integers(0, max(0, len(value) - 1)))] if isinstance(value, (str, list)) else None
        )
    elif how == "oversize":
        parent[key] = draw(st.sampled_from(["x" * 75_000, "9" * 5000, [parent[key]] * 100]))
    else:
        parent[key] = draw(ODD_TEXT)
    return out


def payloads(response_url: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """Valid payloads (a third) and mutated ones."""
    return valid(response_url).flatmap(
        lambda pair: st.one_of(
            st.just(pair),
            mutated(pair[1]).map(lambda p, kind=pair[0]: (kind, p)),
            mutated(pair[1]).map(lambda p, kind=pair[0]: (kind, p)),
        )
    )
