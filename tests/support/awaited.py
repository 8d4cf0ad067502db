"""The in-process bot (`tests/support/front.py`) with its worker pool's jobs awaited: a command or a
click returns once the work it queued is done, so a test reads the outcome without sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from bot.frontdoor.assemble import Services
from bot.frontdoor.workers import WorkerPool
from tests.support.front import Front
from tests.support.slack_stub import SlackStub

PRIMARY = "U0PRIMARY"


class TrackedPool(WorkerPool):
    """The bot's pool, remembering its jobs so a test can wait for them instead of sleeping."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.futures: list[Future[Any]] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], Any], *, name: str) -> Future[Any]:
        future = super().submit(job, name=name)
        with self._lock:
            self.futures.append(future)
        return future

    def count(self) -> int:
        with self._lock:
            return len(self.futures)

    def wait_idle(self, after: int, timeout: float = 60.0) -> None:
        """Wait until a job beyond the first `after` was submitted, then until all have finished."""
        deadline = time.monotonic() + timeout
        while self.count() <= after:
            assert time.monotonic() < deadline, "the bot never queued the work"
            time.sleep(0.01)
        while True:
            with self._lock:
                pending = [f for f in self.futures if not f.done()]
            if not pending:
                return
            for f in pending:
                f.exception(timeout=timeout)


@dataclass
class Bot:
    """The in-process bot with its pool's jobs awaited: a command or click returns once its work is done."""

    front: Front
    pool: TrackedPool

    @property
    def services(self) -> Services:
        return self.front.services

    @property
    def stub(self) -> SlackStub:
        return self.front.stub

    def command(self, text: str, user: str = PRIMARY) -> str:
        """Run a slash command; its reply (ephemeral, or posted in the channel)."""
        before, posted, jobs = len(self.stub.responses), len(self.posts()), self.pool.count()
        assert self.front.command(text, user).status == 200
        self.pool.wait_idle(jobs)
        self.wait_edits()
        if len(self.stub.responses) > before:
            return str(self.stub.responses[-1]["text"])
        replies = [p for p in self.posts()[posted:] if p.get("channel") == "C0OPS" and not p.get("thread_ts")]
        return str(replies[-1]["text"])

    def click(self, user: str, value: str, action: str = "gate_approve") -> str | None:
        """Click a button; the ephemeral refusal if there was one, else None."""
        before, jobs = len(self.stub.responses), self.pool.count()
        assert self.front.click(user, value, action).status == 200
        self.pool.wait_idle(jobs)
        self.wait_edits()
        if len(self.stub.responses) > before:
            return str(self.stub.responses[-1]["text"])
        return None

    def wait_edits(self, timeout: float = 30.0) -> None:
        """Wait until the card edits the work handed over are sent: they are paced (one per card per
        `edit_interval`), so the last one may wait for its slot after the work is done."""
        edits = self.services.edits
        if edits is None:
            return
        deadline = time.monotonic() + timeout
        while not edits.settled:
            assert time.monotonic() < deadline, "a card edit was never sent"
            time.sleep(0.02)

    def submit_confirmation(self, user: str, private_metadata: str, typed: str) -> str:
        """Submit the destructive-step modal; the HTTP answer (errors show in the modal)."""
        result = self.front.submit_view(
            user,
            callback_id="gate_confirm",
            private_metadata=private_metadata,
            values={"confirm": {"typed": {"type": "plain_text_input", "value": typed}}},
        )
        assert result.status == 200
        return result.body

    def posts(self) -> list[dict[str, Any]]:
        return self.front.posts()

    def gate(self, step: str) -> str:
        return self.front.gate(step)

    def cards(self) -> list[dict[str, Any]]:
        return self.front.cards()

    def card(self) -> str:
        return self.front.card()
