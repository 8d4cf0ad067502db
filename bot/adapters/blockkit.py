"""Slack's Block Kit limits, and fitting what the bot sends to them (fit, never cut).

Every message, ephemeral and modal leaves through `bot.adapters.slack`, which passes its text and
blocks through `fit_message` / `fit_view` first: Slack refuses a whole message (`invalid_blocks`)
when one button's text is a character too long, and a refused card edit leaves the channel showing
a stale run. It lives beside the Slack adapter (pure Python, no slack_sdk) so that the adapter can
apply it and core (the renderer's `fit` filter) can use the same rules: adapters may not import core.

Fitting never slices rendered text blindly — a slice can split an emoji code (`:white_`), a
mention or date token (`<!date^…`), a code span or an `&amp;` entity. `fit_text` drops whole lines
from the end and says how many ("…and 14 more"); a single line too long for its limit is cut only
at a safe point outside every such token, and ends with "…". Ids and values are never rewritten
into something else: one past its limit is clipped (Slack would refuse the whole message otherwise)
and logged, since a clipped value no longer names its target.

The limits below are Slack's documented ones, the same slack_sdk's models check (the test stub
validates every payload with those models).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

MESSAGE_TEXT = 40_000
MESSAGE_BLOCKS = 50
MODAL_BLOCKS = 100
SECTION_TEXT = 3_000
SECTION_FIELDS = 10
FIELD_TEXT = 2_000
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT = 3_000
ACTIONS_ELEMENTS = 25
BUTTON_TEXT = 75
BUTTON_VALUE = 2_000
BUTTON_URL = 3_000
BLOCK_ID = 255
ACTION_ID = 255
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
OPTION_TEXT = 75
OPTION_VALUE = 150
OPTIONS = 100
PLACEHOLDER = 150
INPUT_LABEL = 2_000
INPUT_HINT = 2_000
VIEW_TITLE = 24
VIEW_BUTTON = 24
PRIVATE_METADATA = 3_000
CALLBACK_ID = 255

#: What says how much was left out; `{n}` is the number of lines dropped.
MORE = "…and {n} more"
ELLIPSIS = "…"

# Tokens a cut must never split: Slack's `<…>` (mentions, channels, dates, links), `:emoji:`
# codes, `code spans` and ```blocks```, and the three HTML entities Slack's escaping uses.
_TOKENS = re.compile(
    r"```.*?```"  # a code block (may span lines)
    r"|`[^`\n]*`"  # a code span
    r"|<[^<>\n]*>"  # <@U1>, <!subteam^S1>, <!date^…|…>, <https://…|label>
    r"|:[a-z0-9_+'-]+:"  # :white_check_mark:
    r"|&(?:amp|lt|gt);",
    re.DOTALL,
)
_FENCE = "```"


def _token_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKENS.finditer(text)]


def safe_cut(text: str, limit: int, *, tail: str = ELLIPSIS) -> str:
    """`text` cut to at most `limit` characters (with `tail`) at a point outside every token.

    Prefers the last space before the limit when it keeps at least half of the room, so a word is
    not split either; never returns more than `limit` characters."""
    if len(text) <= limit:
        return text
    room = limit - len(tail)
    if room <= 0:
        return tail[:limit]
    inside = [False] * (len(text) + 1)
    for start, end in _token_spans(text):
        for i in range(start + 1, end):
            inside[i] = True
    cut = room
    while cut > 0 and inside[cut]:
        cut -= 1
    space = text.rfind(" ", 0, cut + 1)
    if space >= room // 2 and not inside[space]:
        cut = space
    head = text[:cut].rstrip()
    if head.count(_FENCE) % 2 and len(head) + len(_FENCE) + len(tail) <= limit:
        head += _FENCE  # a code block left open would swallow what follows it
    return head + tail


def fit_text(text: str, limit: int, *, more: str = MORE, keep: str = "start") -> str:
    """`text` within `limit` characters: whole lines are dropped from the end and counted
    ("…and N more"); when not even the first line fits, it is cut safely (`safe_cut`).
    With `keep="end"` the first lines are dropped instead, and the note comes first (a history
    whose latest lines matter most).

    The count is of the non-blank lines left out. A limit shorter than the note itself (none of
    Slack's is) gets the first line cut, without a note."""
    if len(text) <= limit:
        return text
    if keep == "end":
        backwards = fit_text("\n".join(reversed(text.split("\n"))), limit, more=more)
        return "\n".join(reversed(backwards.split("\n")))
    lines = text.split("\n")
    # after[k]: the non-blank lines from k on; upto[k]: the length of the first k lines joined.
    after = [0] * (len(lines) + 1)
    for k in range(len(lines) - 1, -1, -1):
        after[k] = after[k + 1] + (1 if lines[k].strip() else 0)
    upto = [0] * (len(lines) + 1)
    fences = [0] * (len(lines) + 1)
    for k, line in enumerate(lines):
        upto[k + 1] = upto[k] + (1 if k else 0) + len(line)
        fences[k + 1] = fences[k] + line.count(_FENCE)
    for k in range(len(lines) - 1, 0, -1):
        closing = len(_FENCE) + 1 if fences[k] % 2 else 0
        note = len(more.format(n=after[k])) + 1 if after[k] else 0
        if upto[k] + closing + note <= limit:
            kept = lines[:k]
            while kept and not kept[-1].strip():
                kept.pop()
            body = "\n".join(kept) + ("\n" + _FENCE if closing else "")
            return f"{body}\n{more.format(n=after[k])}" if after[k] else body
    note_text = more.format(n=after[1])
    room = limit - len(note_text) - 1
    if not after[1] or room < len(ELLIPSIS) + 1:
        return safe_cut(lines[0], limit)
    return safe_cut(lines[0], room) + "\n" + note_text


def _clip_id(value: Any, limit: int, what: str) -> Any:
    if isinstance(value, str) and len(value) > limit:
        log.warning("a %s of %d characters was clipped to Slack's %d", what, len(value), limit)
        return value[:limit]
    return value


def _fit_text_object(obj: Any, limit: int) -> Any:
    if not isinstance(obj, Mapping):
        return obj
    text = obj.get("text")
    if isinstance(text, str) and len(text) > limit:
        # A plain_text object (a button, a title) is one line: newlines are cut, not counted.
        fitted = (
            fit_text(text, limit) if obj.get("type") == "mrkdwn" else safe_cut(" ".join(text.split()), limit)
        )
        return {**obj, "text": fitted}
    return dict(obj)


def _fit_texts(out: dict[str, Any], limits: Mapping[str, int]) -> dict[str, Any]:
    """`out` with each of its text objects that `limits` names (key → limit) fitted, in place."""
    for key, limit in limits.items():
        if key in out:
            out[key] = _fit_text_object(out[key], limit)
    return out


def _fit_confirm(confirm: Any) -> Any:
    if not isinstance(confirm, Mapping):
        return confirm
    limits = {"title": CONFIRM_TITLE, "text": CONFIRM_TEXT, "confirm": CONFIRM_BUTTON, "deny": CONFIRM_BUTTON}
    return _fit_texts(dict(confirm), limits)


def _fit_option(option: Any) -> Any:
    if not isinstance(option, Mapping):
        return option
    out = _fit_texts(dict(option), {"text": OPTION_TEXT, "description": OPTION_TEXT})
    out["value"] = _clip_id(out.get("value"), OPTION_VALUE, "option value")
    return out


def fit_element(element: Any) -> Any:
    """A block element (button, select, input…) within its limits."""
    if not isinstance(element, Mapping):
        return element
    out = dict(element)
    kind = out.get("type")
    if "action_id" in out:
        out["action_id"] = _clip_id(out["action_id"], ACTION_ID, "action_id")
    if "confirm" in out:
        out["confirm"] = _fit_confirm(out["confirm"])
    _fit_texts(out, {"placeholder": PLACEHOLDER})
    if kind == "button":
        _fit_texts(out, {"text": BUTTON_TEXT})
        out["value"] = _clip_id(out.get("value"), BUTTON_VALUE, "button value")
        if "url" in out:
            out["url"] = _clip_id(out["url"], BUTTON_URL, "button url")
        out = {k: v for k, v in out.items() if v is not None}
    elif kind in ("mrkdwn", "plain_text"):
        out = _fit_text_object(out, CONTEXT_TEXT)
    if isinstance(out.get("options"), list):
        out["options"] = [_fit_option(o) for o in out["options"][:OPTIONS]]
    if "initial_option" in out:
        out["initial_option"] = _fit_option(out["initial_option"])
    return out


def fit_block(block: Any) -> Any:
    """One block within its limits (texts fitted, elements fitted, lists capped)."""
    if not isinstance(block, Mapping):
        return block
    out = dict(block)
    kind = out.get("type")
    if "block_id" in out:
        out["block_id"] = _clip_id(out["block_id"], BLOCK_ID, "block_id")
    if kind == "section":
        _fit_texts(out, {"text": SECTION_TEXT})
        if isinstance(out.get("fields"), list):
            out["fields"] = [_fit_text_object(f, FIELD_TEXT) for f in out["fields"][:SECTION_FIELDS]]
        if "accessory" in out:
            out["accessory"] = fit_element(out["accessory"])
    elif kind == "header":
        _fit_texts(out, {"text": HEADER_TEXT})
    elif kind == "context":
        elements = out.get("elements")
        if isinstance(elements, list):
            out["elements"] = [fit_element(e) for e in elements[:CONTEXT_ELEMENTS]]
    elif kind == "actions":
        elements = out.get("elements")
        if isinstance(elements, list):
            out["elements"] = [fit_element(e) for e in elements[:ACTIONS_ELEMENTS]]
    elif kind == "input":
        _fit_texts(out, {"label": INPUT_LABEL, "hint": INPUT_HINT})
        if "element" in out:
            out["element"] = fit_element(out["element"])
    return out


def fit_blocks(blocks: Sequence[Any], *, most: int = MESSAGE_BLOCKS) -> list[Any]:
    """Every block within its limits, and at most `most` blocks: when there are more, the last
    ones (the buttons, the context line) are kept and the middle ones are replaced by a line
    saying how many were left out."""
    fitted = [fit_block(b) for b in blocks]
    if len(fitted) <= most:
        return fitted
    keep_tail = 2
    head = fitted[: most - keep_tail - 1]
    tail = fitted[len(fitted) - keep_tail :]
    dropped = len(fitted) - len(head) - len(tail)
    note = {"type": "context", "elements": [{"type": "mrkdwn", "text": MORE.format(n=dropped)}]}
    return [*head, note, *tail]


def fit_message(text: str, blocks: Sequence[Any] | None) -> tuple[str, list[Any] | None]:
    """A message's fallback text and blocks within Slack's limits."""
    fitted_text = fit_text(text, MESSAGE_TEXT)
    fitted_blocks = fit_blocks(blocks) if blocks is not None else None
    if fitted_text != text or (blocks is not None and fitted_blocks != list(blocks)):
        # The last guard worked: the template or code that built this should fit by itself.
        log.info("a message was fitted to Slack's limits (%d blocks)", len(blocks or ()))
    return fitted_text, fitted_blocks


def fit_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """A modal within its limits: title and buttons (24), blocks (100), each block."""
    out = _fit_texts(dict(view), {"title": VIEW_TITLE, "submit": VIEW_BUTTON, "close": VIEW_BUTTON})
    if isinstance(out.get("blocks"), list):
        out["blocks"] = fit_blocks(out["blocks"], most=MODAL_BLOCKS)
    for key, limit in (("private_metadata", PRIVATE_METADATA), ("callback_id", CALLBACK_ID)):
        if key in out:
            out[key] = _clip_id(out[key], limit, key)
    return out
