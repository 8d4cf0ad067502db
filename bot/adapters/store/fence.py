"""Fencing: every transaction a duty opens checks first that its fence still holds the lease
(see the package docstring); `fencing(fence)` puts a fence in force on this thread or task."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from bot.adapters.store.schema import leadership
from bot.errors import Fenced
from bot.records import Fence

log = logging.getLogger(__name__)


_FENCE: contextvars.ContextVar[tuple[Fence, Callable[[Fenced], object] | None] | None] = (
    contextvars.ContextVar("upgrade_bot_fence", default=None)
)


@contextlib.contextmanager
def fencing(fence: Fence, on_fenced: Callable[[Fenced], object] | None = None) -> Iterator[None]:
    """Within this block (on this thread or task), every store transaction checks `fence` first.

    `on_fenced` is told at once when a check fails (the replica steps down), even when the caller
    swallows the error as one more failed post.
    """
    token = _FENCE.set((fence, on_fenced))
    try:
        yield
    finally:
        _FENCE.reset(token)


def current_fence() -> Fence | None:
    active = _FENCE.get()
    return active[0] if active is not None else None


class _FencingEngine(Engine):
    """The store's engine, whose `begin()` checks the fence of the duty in force, if any."""

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        with super().begin() as conn:
            active = _FENCE.get()
            if active is not None:
                _check_fence(conn, *active)
            yield conn


def _check_fence(conn: Connection, fence: Fence, on_fenced: Callable[[Fenced], object] | None) -> None:
    query = sa.select(leadership.c.holder, leadership.c.epoch).where(leadership.c.id == 1)
    if conn.dialect.name == "postgresql":
        # A shared row lock held to the commit: a takeover's UPDATE waits for this write, so no
        # write of the old epoch can land after the new leader's first one.
        query = query.with_for_update(read=True)
    row = conn.execute(query).first()
    holder, epoch = (str(row[0]), int(row[1])) if row is not None else ("", 0)
    if (holder, epoch) != (fence.holder, fence.epoch):
        error = Fenced(
            f"this replica's epoch {fence.epoch} is stale (the lease: {holder or 'nobody'}, epoch {epoch})"
        )
        log.warning("fenced: %s", error.user_message)
        if on_fenced is not None:
            on_fenced(error)
        raise error
