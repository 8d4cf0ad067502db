"""A snapshot's label as people type it: one short printable line, never read as an id.

Below the service: the `snapshot` action checks a plan's labels with it when the plan is read.
"""

from __future__ import annotations

from bot.errors import UserError, clip

#: Labels are typed by people and shown in tables and Slack: one short printable line.
MAX_LABEL = 100


def clean_label(label: str) -> str:
    """The label without control characters (a pasted tab, an escape sequence), one line, bounded."""
    printable = "".join(ch if ch.isprintable() else " " for ch in label)
    cleaned = " ".join(printable.split())[:MAX_LABEL]
    if not cleaned:
        raise UserError("a snapshot label needs at least one printable character")
    if cleaned.startswith("#") or (cleaned.isascii() and cleaned.isdigit()):
        # `diff 12` and `diff #12` name snapshot #12: a label spelled so could never be found.
        raise UserError(
            f"a snapshot label cannot be a number or start with #: `{clip(cleaned, 40)}` would be read as a "
            "snapshot's id; use a word, like `pre-2`"
        )
    return cleaned


__all__ = ["MAX_LABEL", "clean_label"]
