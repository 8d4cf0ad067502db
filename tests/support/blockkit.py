"""Block Kit as Slack checks it: every block and modal through slack_sdk's own models (their
length and shape rules: a confirm dialog's title ≤ 100, text ≤ 300, buttons ≤ 30 characters …),
plus the message limits the models do not know (50 blocks, 3,000 characters a section)."""

from __future__ import annotations

import json
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

MAX_BLOCKS = 50
MAX_SECTION = 3000


def message_blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks of a chat.postMessage/chat.update call, validated; [] when it has none."""
    raw = params.get("blocks")
    blocks: list[dict[str, Any]] = json.loads(raw) if isinstance(raw, str) else list(raw or [])
    assert len(blocks) <= MAX_BLOCKS, f"{len(blocks)} blocks"
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.to_dict()  # raises SlackObjectFormationError when a rule is broken
        if block.get("type") == "section":
            assert len(block["text"]["text"]) <= MAX_SECTION, len(block["text"]["text"])
    return blocks


def modal(view: dict[str, Any] | str) -> dict[str, Any]:
    """A views.open view, validated."""
    loaded: dict[str, Any] = json.loads(view) if isinstance(view, str) else view
    View(**loaded).validate_json()
    for block in loaded["blocks"]:
        Block.parse(block).to_dict()  # type: ignore[union-attr]
    return loaded


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every button of the actions blocks."""
    return [
        element
        for block in blocks
        if block.get("type") == "actions"
        for element in block["elements"]
        if element.get("type") == "button"
    ]


def text_of(blocks: list[dict[str, Any]]) -> str:
    """The sections' text, one after another."""
    return "\n".join(b["text"]["text"] for b in blocks if b.get("type") == "section")
