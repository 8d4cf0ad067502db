"""The bot's own worker pool: slow work runs here, never on Bolt's listener threads.

Bolt's sync App shares five listener threads with lazy listeners; five slow commands there and the
next request misses its 3-second ack. Listeners only ack and enqueue; this pool does the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from bot.logsetup import correlation, current_correlation_id

log = logging.getLogger(__name__)


class WorkerPool:
    def __init__(self, size: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="upgrade-bot-worker")

    def submit(self, job: Callable[[], Any], *, name: str) -> Future[Any]:
        cid = current_correlation_id()

        def run() -> Any:
            # Carry the request's correlation id into the worker thread's log lines.
            with correlation(cid if cid != "-" else None):
                try:
                    return job()
                except Exception:
                    log.exception("background job %s failed", name)
                    raise

        return self._pool.submit(run)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
