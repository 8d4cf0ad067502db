"""The cyclic garbage collector in a test process: what survives a slow full collection is frozen.

A pytest process keeps what the session caches for its whole life: the parsed trees of every
module (`sources.parsed`, over a million objects), the imported bot and its libraries, the worlds of
the scenarios built in it. Every full collection walks all of it again: in the fast tier those took
0.3 s each at first and 2.3 s once a worker held two million objects, 10-15 s of each worker's
60-80 s of CPU (2026-12-02, `benchmarks/RESULTS.md`). After a full collection that took longer
than `SLOW`, what survived it is frozen (`gc.freeze`) as the test ends, and the later collections
walk only what came after. A frozen object is still freed by its reference count; only a cycle
that was alive when frozen and dropped later stays until the process ends.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

#: A full collection longer than this (CPU seconds) freezes the heap after the test.
SLOW = 0.05


class _Watch:
    def __init__(self) -> None:
        self.started = 0.0
        self.due = False

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.started = time.thread_time()
        elif time.thread_time() - self.started > SLOW:
            self.due = True


_WATCH = _Watch()


def kept(value: T) -> T:
    """`value`, which the process keeps for the session, frozen out of the collector's walks at
    once (with what else is alive now) rather than after the slow collections it would cause:
    a test that parses every module makes a million objects within itself."""
    gc.freeze()
    return value


def pytest_configure(config: pytest.Config) -> None:
    if _WATCH not in gc.callbacks:
        gc.callbacks.append(_WATCH)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The heap given back before the terminal's summary: Hypothesis's plugin is imported there
    when no test imported it, and looks for the referrers of the random generators registered
    with it (trio's), which `gc.get_referrers` does not find among frozen objects."""
    gc.unfreeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _WATCH in gc.callbacks:
        gc.callbacks.remove(_WATCH)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """No collections while the test modules are imported: each full one walked the growing heap
    of what they import, 0.2 s at the end. The first slow one after them freezes it all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    if _WATCH.due:
        _WATCH.due = False
        gc.freeze()
