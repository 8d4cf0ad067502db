"""Text typed by a user or read from a cluster, made safe to show in Slack: `inert`.

A leaf without Jinja, so that what only needs it — the diff's and the checks' Markdown, reached
from every terminal command through the settings and the snapshot service — does not import the
template engine (`bot.core.rendering`, which re-exports these names for its many callers).
"""

from __future__ import annotations

import re

#: Bidirectional embedding, override and isolate marks (and the implicit ones): they let text shown
#: in Slack read differently from what it is (`exe.txt` shown as `txt.exe`), so none is ever kept.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# C0 controls (but tab and newline), DEL and C1 controls: invisible, or terminal escapes.
_HIDDEN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")
_BREAKS = re.compile(r"[\t\n\r]+")


def printable(value: object, *, multiline: bool = True) -> str:
    """Text read from a cluster or typed by a user, made safe to print on a terminal or in a file
    (a report, an export): control characters (terminal escapes, NUL, BEL) and bidirectional marks
    removed, newlines and tabs kept where the context allows them (`multiline`), else a space. No
    Slack escaping: for Slack, `inert`."""
    text = str(value)
    if not multiline:
        text = _BREAKS.sub(" ", text)
    return _HIDDEN.sub("", text)


def inert(value: object, *, multiline: bool = True) -> str:
    """Text typed by a user or read from a cluster, made safe to put in a Slack message.

    `&`, `<` and `>` are escaped (so `<!channel>` or `<https://evil|docs>` is shown, never acted
    on), control characters and bidirectional overrides/isolates are removed. Newlines and tabs stay
    where the context allows them (`multiline`); in a one-line context they become a space.
    """
    text = printable(value, multiline=multiline)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
