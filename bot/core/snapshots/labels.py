"""A snapshot's label as people type it: one short printable word, never read as an id.

Below the service: the `snapshot` action checks a plan's labels with it when the plan is read, and
the `snapshot` command (Slack's and the terminal's) before it reads the cluster. Only a new label
is checked (`new_label`): `diff` finds a stored one as it was stored (a label with a space, from
before labels were one word, is still found when quoted), and a run whose plan was read before
still takes its step's snapshot under the label it gave (`clean_label`).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.errors import UserError, clip

#: Labels are typed by people and shown in tables and Slack: one short printable line.
MAX_LABEL = 100

#: What `snapshot` with no label stores it under.
DEFAULT_LABEL = "manual"


def clean_label(label: str) -> str:
    """The label without control characters (a pasted tab, an escape sequence), one line, bounded.
    What a snapshot is stored under: a plan stored before labels were one word still runs."""
    cleaned = " ".join(_words(label))[:MAX_LABEL]
    if not cleaned:
        raise UserError("a snapshot label needs at least one printable character")
    if cleaned.startswith("#") or (cleaned.isascii() and cleaned.isdigit()):
        # `diff 12` and `diff #12` name snapshot #12: a label spelled so could never be found.
        raise UserError(
            f"a snapshot label cannot be a number or start with #: `{clip(cleaned, 40)}` would be read as a "
            "snapshot's id; use a word, like `pre-2`"
        )
    return cleaned


def new_label(label: str) -> str:
    """A label a person gives now (the `snapshot` command, a plan's step when the plan is read):
    `clean_label`'s, and one word: `diff pre upgrade` names two snapshots, so a label with a space
    could be named only in quotes, awkward to type in Slack."""
    cleaned = clean_label(label)
    if " " in cleaned:
        raise UserError(
            f"a snapshot label is one word: `{clip(cleaned, 40)}` has a space, which `diff` could name only "
            f"in quotes; use `{_one_word(cleaned)}`"
        )
    return cleaned


def label_of(words: Sequence[str]) -> str:
    """The label the `snapshot` command's words give (`snapshot pre`; `manual` for none). The
    command's words are split at spaces, so `snapshot pre upgrade` gives two: refused, saying so,
    with the one word it may have meant."""
    if not words:
        return DEFAULT_LABEL
    if len(words) > 1:
        typed = " ".join(words)
        raise UserError(
            f"`snapshot` takes one label, one word: `{clip(typed, 40)}` is {len(words)} words; "
            f"use `{_one_word(typed)}`"
        )
    return new_label(words[0])


def _one_word(text: str) -> str:
    """`pre upgrade` → `pre-upgrade`: the label meant, as one word."""
    return "-".join(_words(text))[:MAX_LABEL]


def _words(text: str) -> list[str]:
    """The words of `text`, a control character (a pasted tab, an escape sequence) a space."""
    return "".join(ch if ch.isprintable() else " " for ch in text).split()


__all__ = ["DEFAULT_LABEL", "MAX_LABEL", "clean_label", "label_of", "new_label"]
