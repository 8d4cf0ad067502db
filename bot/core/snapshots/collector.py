"""Pausing Python's cyclic garbage collector around work on a whole snapshot."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (decoding or folding a 150,000-pod snapshot).

    Such work allocates a container per pod; every few hundred allocations start a collection, and
    the older generations' collections walk the hundreds of thousands of row lists that the
    snapshots hold: half the time of decoding a stored snapshot, a third of the diff's. Nothing that
    work makes is cyclic garbage. Re-enabled on the way out, also after an error (unless it was
    off already); another thread's block ending first turns it back on early, which only costs time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
