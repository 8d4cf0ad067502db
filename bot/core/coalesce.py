"""Card edits coalesced on the trailing edge: at most one `chat.update` per message per interval.

`CoalescingPoster` wraps a `Poster`. Posts (new messages, thread replies) and searches pass
straight through. `update_message` only records the latest body for its (channel, ts) and returns;
`flush_due` (called by the flusher thread, or directly by tests with a fake clock) sends each
pending body whose message was last edited at least `interval` ago. A body is replaced by a newer
one (counted as *coalesced*), never thrown away: the last state is always delivered. A body whose
edit fails for a while (Slack unavailable, budget used up) stays pending and is tried at the next
interval. When Slack says the message is gone (`message_not_found`), `on_gone` (Deliveries'
re-post) is called with the body and answers the message's new ts, under which later edits go.

`thread_lines` batches thread replies that piled up into a few replies under a size bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.delivery import Poster
from bot.errors import BotError, SlackCallFailed

log = logging.getLogger(__name__)

#: Slack's answer to an edit of a message someone deleted.
GONE = "message_not_found"


@dataclass
class _Pending:
    text: str
    blocks: Sequence[dict[str, Any]] | None


class CoalescingPoster:
    """A `Poster` whose `update_message` is coalesced per message and sent by `flush_due`."""

    def __init__(
        self,
        poster: Poster,
        *,
        interval: float = 2.0,
        clock: Callable[[], float],
        on_gone: Callable[[str, str, str, Sequence[dict[str, Any]] | None], str | None] | None = None,
        on_outcome: Callable[[str], object] | None = None,
    ) -> None:
        self.inner = poster
        # Posts, searches and uploads pass straight through: only edits are coalesced.
        self.post_message = poster.post_message
        self.find_posted = poster.find_posted
        self.upload_file = poster.upload_file
        self.interval = interval
        self.clock = clock
        self.on_gone = on_gone
        self._lock = threading.Condition()
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._last_sent: dict[tuple[str, str], float] = {}
        self._sending: set[tuple[str, str]] = set()
        #: Edits delayed in a row, by message: the first of a streak is logged as a warning, the
        #: rest at debug, and the one that goes through says how many came before it.
        self._delays: dict[tuple[str, str], int] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: Figures for the metrics exporter: edits sent, replaced by a newer body, dropped (stays 0),
        #: failed and kept for a retry, refused for good by Slack, and messages found deleted.
        self.sent = self.coalesced = self.dropped = self.retried = self.refused = self.gone = 0
        #: Told each outcome as it happens (`sent`, `coalesced`): the telemetry's `card_update`.
        self.on_outcome = on_outcome

    # -- the Poster protocol: only `update_message` is the coalescer's own -------------------------

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None:
        with self._lock:
            key = (channel, ts)
            replaced = key in self._pending
            if replaced:
                self.coalesced += 1
            self._pending[key] = _Pending(text, blocks)
            self._lock.notify_all()
        if replaced and self.on_outcome is not None:
            self.on_outcome("coalesced")

    # -- flushing ------------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    @property
    def settled(self) -> bool:
        """Whether every edit handed over has been sent (none waits for its slot or is on its way)."""
        with self._lock:
            return not self._pending and not self._sending

    def next_due(self) -> float | None:
        """When the earliest pending edit may be sent (clock seconds), None when nothing waits."""
        with self._lock:
            due = [
                self._last_sent.get(k, float("-inf")) + self.interval
                for k in self._pending
                if k not in self._sending
            ]
        return min(due) if due else None

    def slot_in(self, channel: str, ts: str) -> float:
        """Seconds until the message's next edit may be sent (≤ 0: now). A caller that makes its
        edits periodically (a watch's publish) times the body it hands over to land just as the
        slot opens, so the edit carries the newest state rather than one up to a period old."""
        with self._lock:
            key = (channel, ts)
            if key in self._sending:
                return self.interval  # on its way: the next slot is an interval after it is done
            last = self._last_sent.get(key)
        return float("-inf") if last is None else last + self.interval - self.clock()

    def flush_due(self) -> int:
        """Send every pending edit whose interval has passed; the number sent."""
        now = self.clock()
        with self._lock:
            due = [
                k
                for k in self._pending
                if k not in self._sending and now - self._last_sent.get(k, float("-inf")) >= self.interval
            ]
            self._sending.update(due)
        sent = 0
        for key in due:
            sent += self._send(key)
        return sent

    def flush(self) -> int:
        """Send every pending edit now, whatever its interval (at shutdown); the number sent."""
        with self._lock:
            keys = [k for k in self._pending if k not in self._sending]
            self._sending.update(keys)
        return sum(self._send(k) for k in keys)

    def _send(self, key: tuple[str, str]) -> int:
        channel, ts = key
        with self._lock:
            body = self._pending.pop(key)
        try:
            self.inner.update_message(channel, ts, body.text, blocks=body.blocks)
        except SlackCallFailed as exc:
            if exc.code == GONE and self.on_gone is not None:
                return self._moved(key, body)
            # msg_too_long, cant_update_message, …: Slack refuses this body for good.
            log.warning("Slack refused the edit of %s/%s: %s", channel, ts, exc.code)
            with self._lock:
                self.refused += 1
                self._done(key)
            return 0
        except BotError as exc:
            with self._lock:
                delays = self._delays[key] = self._delays.get(key, 0) + 1
            if delays == 1:
                log.warning(
                    "edit of %s/%s delayed (retried each interval, said once): %s",
                    channel,
                    ts,
                    exc.user_message,
                )
            else:
                log.debug(
                    "edit of %s/%s delayed again (%s in a row): %s", channel, ts, delays, exc.user_message
                )
            with self._lock:
                self.retried += 1
                self._pending.setdefault(key, body)  # a newer body, if one came, wins
                self._done(key)
            return 0
        except BaseException:
            with self._lock:
                self._pending.setdefault(key, body)
                self._done(key)
            raise
        with self._lock:
            self.sent += 1
            self._done(key)
            delays = self._delays.pop(key, 0)
        if delays:
            log.info("edit of %s/%s went through after %s delayed attempt(s)", channel, ts, delays)
        if self.on_outcome is not None:
            self.on_outcome("sent")
        return 1

    def _moved(self, key: tuple[str, str], body: _Pending) -> int:
        assert self.on_gone is not None
        channel, ts = key
        try:
            new_ts = self.on_gone(channel, ts, body.text, body.blocks)
        except BotError as exc:
            log.warning("could not post %s/%s again: %s", channel, ts, exc.user_message)
            with self._lock:
                self.retried += 1
                self._pending.setdefault(key, body)
                self._done(key)
            return 0
        with self._lock:
            self.gone += 1
            newer = self._pending.pop(key, None)
            self._done(key)
            if new_ts and newer is not None:
                # Edits that came for the deleted message while it was posted again follow it.
                self._pending.setdefault((channel, new_ts), newer)
            self._last_sent[(channel, new_ts or ts)] = self.clock()
        return 1 if new_ts else 0

    def _done(self, key: tuple[str, str]) -> None:
        self._sending.discard(key)
        self._last_sent[key] = self.clock()
        self._lock.notify_all()

    # -- the flusher thread (started and stopped by the front door) -------------------------------

    def start(
        self,
        *,
        tick: float = 0.05,
        on_gone: Callable[[str, str, str, Sequence[dict[str, Any]] | None], str | None] | None = None,
    ) -> None:
        """Flush in a thread of its own until `stop`. The thread sleeps until the earliest pending
        edit is due and is woken by every new body, so an edit handed over while its slot is open
        goes at once; `tick` bounds the sleep (a clock that is not `time.monotonic`, in tests).
        `on_gone`: who posts a message Slack says is gone again (`Deliveries.repost_gone`, which
        posts through this poster: so it is given here, once both exist)."""
        if on_gone is not None:
            self.on_gone = on_gone
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(tick,), name="card-edits", daemon=True)
        self._thread.start()

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the thread, then send what is still pending (the last state of every card)."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
        self.flush()

    def _run(self, tick: float) -> None:
        while not self._stop.is_set():
            try:
                self.flush_due()
            except Exception:  # a bug in one edit must not stop every card's edits
                log.exception("flushing card edits failed")
            with self._lock:
                if self._stop.is_set():
                    return
                if not self._pending:
                    self._lock.wait(1.0)
                    continue
                now = self.clock()
                due = [
                    self._last_sent.get(k, float("-inf")) + self.interval
                    for k in self._pending
                    if k not in self._sending
                ]
                wait = min(due) - now if due else tick
                if wait > 0:
                    # Until the earliest slot opens, or a new body comes (`update_message` notifies).
                    self._lock.wait(min(wait, tick))


def thread_lines(lines: Iterable[str], *, limit: int = 3000) -> list[str]:
    """Lines that piled up, joined into as few replies as fit `limit` characters each, in order."""
    replies: list[str] = []
    current = ""
    for line in lines:
        line = line[:limit]
        if current and len(current) + 1 + len(line) > limit:
            replies.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    if current:
        replies.append(current)
    return replies
