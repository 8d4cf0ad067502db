"""Slack markup as a person at a terminal reads it: what `exec` and `rehearse` print.

The bot writes every message once, for Slack (mrkdwn): mentions are `<@U…>`, dates are
`<!date^SECONDS^FORMAT|fallback>` tokens each reader's Slack shows in their own time zone, links are
`<URL|label>`, emoji are `:shortcodes:`. In a terminal (`TerminalText`):
- people by name: the display names the bot has cached from Slack (`users.info`), else the
  mention's own label, else the id (the bot's texts name the role next to a mention already);
- dates in the terminal's local time zone (or the one given), `2026-11-29 07:00 CET`;
- links as `label (URL)`; `&lt;`, `&gt;`, `&amp;` as the characters;
- the emoji the bot's templates use as the characters (`EMOJI`), or with `plain` as short ASCII
  words (`[ok]`, `[!]`), and every other non-ASCII character of the bot's own (arrows, dashes,
  rules) as ASCII too (`ascii_text`), for logs, CI and terminals without UTF-8;
- with `plain`, Slack's emphasis dropped too: `*bold*` and `_italic_` read as their words (a
  `snake_case` name or a `*` between spaces is not emphasis, and stays).
Machine output (`-o json`) never passes through here: it stays exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import TextIO

#: shortcode → (the character, plain ASCII): every emoji the templates and the bot's own texts use
#: (`grep -rhoE ':[a-z_]+:' templates bot`); tests/frontdoor/test_termtext.py keeps it complete.
EMOJI: Mapping[str, tuple[str, str]] = {
    "alarm_clock": ("⏰", "[time]"),
    "arrow_forward": ("▶️", "[>]"),
    "arrow_heading_down": ("⤵️", "[moved]"),
    "arrows_counterclockwise": ("🔄", "[~]"),
    "ballot_box_with_check": ("☑️", "[v]"),
    "black_square_for_stop": ("⏹️", "[stopped]"),
    "bell": ("🔔", "[bell]"),
    "calendar": ("📅", "[date]"),
    "camera": ("📷", "[snap]"),
    "checkered_flag": ("🏁", "[end]"),
    "clipboard": ("📋", "[plan]"),
    "construction": ("🚧", "[wip]"),
    "double_vertical_bar": ("⏸️", "[paused]"),
    "eyes": ("👀", "[look]"),
    "fast_forward": ("⏩", "[>>]"),
    "gear": ("⚙️", "[gear]"),
    "grey_question": ("❔", "[?]"),
    "handshake": ("🤝", "[ok]"),
    "heavy_check_mark": ("✔️", "[v]"),
    "heavy_minus_sign": ("➖", "[-]"),
    "hourglass": ("⌛", "[wait]"),
    "hourglass_flowing_sand": ("⏳", "[wait]"),
    "information_source": ("ℹ️", "[i]"),
    "large_blue_circle": ("🔵", "[blue]"),
    "large_green_circle": ("🟢", "[green]"),
    "large_purple_circle": ("🟣", "[purple]"),
    "large_yellow_circle": ("🟡", "[yellow]"),
    "leftwards_arrow_with_hook": ("↩️", "[<-]"),
    "mag": ("🔍", "[?]"),
    "memo": ("📝", "[note]"),
    "no_entry": ("⛔", "[stop]"),
    "no_entry_sign": ("🚫", "[no]"),
    "octagonal_sign": ("🛑", "[STOP]"),
    "package": ("📦", "[pkg]"),
    "page_facing_up": ("📄", "[file]"),
    "point_right": ("👉", "[next]"),
    "raised_hand": ("✋", "[hand]"),
    "red_circle": ("🔴", "[red]"),
    "repeat": ("🔁", "[again]"),
    "rocket": ("🚀", "[go]"),
    "rotating_light": ("🚨", "[ALERT]"),
    "stop_button": ("⏹️", "[stop]"),
    "stopwatch": ("⏱️", "[soak]"),
    "tada": ("🎉", "[done]"),
    "warning": ("⚠️", "[!]"),
    "wave": ("👋", "[hi]"),
    "white_check_mark": ("✅", "[ok]"),
    "white_circle": ("⚪", "[ ]"),
    "wrench": ("🔧", "[fix]"),
    "x": ("❌", "[x]"),
}

#: The bot's own non-ASCII characters (the rehearsal's frames, arrows, dashes) in ASCII.
ASCII: Mapping[str, str] = {
    "─": "-",
    "↳": "->",
    "→": "->",
    "←": "<-",
    "—": "-",
    "–": "-",
    "…": "...",
    "·": "*",
    "•": "*",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "×": "x",
    "≥": ">=",
    "≤": "<=",
    "✓": "v",
    "✗": "x",
    # The cards' progress bars and the step now's marker.
    "▓": "#",
    "░": ".",
    "▶": ">",
}

_DATE = re.compile(r"<!date\^(\d+)\^[^|>]*(?:\|([^>]*))?>")
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^>]*))?>")
_GROUP = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^>]*))?>")
_CHANNEL = re.compile(r"<#([CGD][A-Z0-9]+)(?:\|([^>]*))?>")
_SPECIAL = re.compile(r"<!(here|channel|everyone)(?:\|[^>]*)?>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]*))?>")
_EMOJI = re.compile(r":([a-z0-9_+-]+):")
#: Slack's `*bold*` and `_italic_`: the mark touches a word on its inside and none on its outside
#: (as Slack reads it), so `snake_case`, `2 * 3` and `kube-*` are left as they are.
_EMPHASIS = re.compile(r"(?<![\w*_])([*_])(?=[^\s*_])([^*_\n]*?[^\s*_])\1(?![\w*_])")


@dataclass(frozen=True)
class TerminalText:
    """Renders Slack markup for a terminal (see the module docstring)."""

    #: Slack user or group id → display name (the bot's cache of `users.info`).
    names: Mapping[str, str] = field(default_factory=dict)
    #: Where dates are shown; None: the machine's local time zone.
    zone: tzinfo | None = None
    plain: bool = False

    def __call__(self, text: str) -> str:
        text = _DATE.sub(self._date, text)
        text = _USER.sub(lambda m: self._person(m.group(1), m.group(2)), text)
        text = _GROUP.sub(lambda m: self._person(m.group(1), m.group(2)), text)
        text = _CHANNEL.sub(lambda m: "#" + (m.group(2) or m.group(1)), text)
        text = _SPECIAL.sub(lambda m: "@" + m.group(1), text)
        text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
        text = _EMOJI.sub(self._emoji, text)
        if self.plain:
            # Twice: bold around italic (`*the _canary_ stage*`) loses both.
            text = _EMPHASIS.sub(r"\2", _EMPHASIS.sub(r"\2", text))
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        return ascii_text(text) if self.plain else text

    def _date(self, m: re.Match[str]) -> str:
        try:
            when = datetime.fromtimestamp(int(m.group(1)), self.zone).astimezone(self.zone)
        except (OverflowError, OSError, ValueError):
            return m.group(2) or m.group(1)
        return when.strftime("%Y-%m-%d %H:%M %Z").strip()

    def _person(self, ident: str, label: str | None) -> str:
        name = self.names.get(ident) or (label or "").lstrip("@")
        return f"@{name or ident}"

    def _emoji(self, m: re.Match[str]) -> str:
        known = EMOJI.get(m.group(1))
        if known is None:
            return m.group(0)
        return known[1] if self.plain else known[0]


def ascii_text(text: str) -> str:
    """`text` with the bot's own non-ASCII characters in ASCII, and any other as `?`."""
    out = "".join(ASCII.get(ch, ch) for ch in text)
    # Emoji characters that came as such (not as shortcodes), by the same table.
    for char, word in ((c, w) for c, w in EMOJI.values()):
        out = out.replace(char, word)
    return out.encode("ascii", "replace").decode("ascii")


class TerminalOut:
    """A text stream that renders everything written to it (`TerminalText`) before writing it:
    the rehearsal writes whole messages and lines, never a token split in two."""

    def __init__(self, out: TextIO, render: TerminalText) -> None:
        self._out = out
        self._render = render

    def write(self, text: str) -> int:
        return self._out.write(self._render(text))

    def flush(self) -> None:
        self._out.flush()


def mentioned(text: str) -> list[str]:
    """The Slack user ids `text` mentions (`<@U…>`), each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in _USER.finditer(text)))
