"""The rehearsal's stand-in for Slack: the card and the thread printed to the terminal.

A rehearsal posts what the bot would post in Slack, in Slack's text (`TerminalOut` renders it for a
terminal); the card's edits are kept, and the card is printed when the rehearsal shows it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from bot.core.delivery import Body
from bot.errors import BotError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Posted:
    channel: str
    ts: str


class TextPoster:
    """Prints the card and the thread; Slack's ids are made up, one per message. The text is
    Slack's: `rehearse` hands it a stream that renders it for a terminal (`TerminalOut`)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._ts = itertools.count(1)
        self._card = ""
        #: The card's last edit, not rendered yet (`update_message_later`): rendered when printed.
        self._card_body: Body | None = None
        # Edits come from the run's threads (a job's driver, a click) while the end reads the card.
        self._lock = threading.Lock()

    @property
    def card(self) -> str:
        """The card's text as its last edit made it: printed at the rehearsal's end."""
        with self._lock:
            body, text = self._card_body, self._card
        if body is None:
            return text
        try:
            text = body()[0]
        except BotError as exc:
            # As a publish that failed: the card stays as it was, the edit kept for the next read.
            log.warning("could not render the card's last edit: %s", exc.user_message)
            return text
        with self._lock:
            if self._card_body is body:  # else an edit came meanwhile: that one is the card now
                self._card, self._card_body = text, None
        return text

    def _set_card(self, text: str) -> None:
        with self._lock:
            self._card, self._card_body = text, None

    def post_message(
        self,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
        dedup_key: str | None = None,
    ) -> _Posted:
        if thread_ts:
            marker = "  ↳ (also in the channel) " if reply_broadcast else "  ↳ "
            self.out.write(marker + text.replace("\n", "\n    ") + "\n")
        else:
            self._set_card(text)
            self.out.write(framed(text))
        return _Posted(channel=channel, ts=f"{next(self._ts)}.0")

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None:
        if ts == "1.0":
            self._set_card(text)  # the card; printed at the end

    def update_message_later(self, channel: str, ts: str, body: Body) -> None:
        # Only the card's last edit is ever printed: the ones before it are never rendered.
        if ts == "1.0":
            with self._lock:
                self._card_body = body

    def find_posted(
        self, channel: str, dedup_key: str, *, thread_ts: str, oldest: datetime
    ) -> _Posted | None:
        # A rehearsal is one process with a fresh database: it never has a post to find again.
        return None

    def upload_file(
        self,
        channel: str,
        filename: str,
        content: bytes,
        *,
        title: str = "",
        thread_ts: str | None = None,
        comment: str | None = None,
    ) -> str:
        self.out.write(f"  ↳ file attached: {filename} ({title or filename}, {len(content):,} bytes)\n")
        return f"F{next(self._ts)}"


def framed(text: str) -> str:
    """`text` between two rules, as the terminal shows the card."""
    rule = "─" * 78
    return f"{rule}\n{text}\n{rule}\n"
