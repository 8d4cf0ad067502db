"""The bot's own worker pool: slow work runs here, never on Bolt's listener threads.

Bolt's sync App shares five listener threads with lazy listeners; five slow commands there and the
next request misses its 3-second ack. Listeners only ack and enqueue; this pool does the work.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from bot.logsetup import correlation, current_correlation_id

log = logging.getLogger(__name__)


class WorkerPool:
    def __init__(self, size: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="upgrade-bot-worker")
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()

    @property
    def depth(self) -> int:
        """Jobs queued or running now."""
        with self._lock:
            return len(self._pending)

    def idle(self, timeout: float) -> bool:
        """Wait until every job submitted so far has finished; False if `timeout` passed first."""
        with self._lock:
            pending = set(self._pending)
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

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

        future = self._pool.submit(run)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def stop(self, grace: float) -> bool:
        """Drop the jobs still queued, give the running ones `grace` seconds; True if all ended.

        Only for work that is also in the inbox: what is dropped or cut short here is worked
        off again at the next start, so a shutdown need not wait for it.
        """
        self._pool.shutdown(wait=False, cancel_futures=True)
        return self.idle(timeout=grace)
