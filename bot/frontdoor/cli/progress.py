"""The terminal's progress display while a cluster's lists are read (snapshot, diff, check, plan
draft): a line per list on standard error, gone when done.

`rich` is imported inside `start_bars`, the first time a page is reported: its import (a tenth of a
second) then overlaps the lists' helper processes, and a command that fails first pays nothing.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as Bars
    from rich.progress import TaskID

    from bot.core.snapshots.projection import Progress


#: How often the progress display redraws; a list's pages report more often than that.
PROGRESS_REFRESH = 4.0


@contextlib.contextmanager
def progress_bar(*, quiet: bool = False) -> Iterator[Progress | None]:
    """A progress line per list being read, on standard error: items read (of the total when the
    server gives one, `remainingItemCount`), items per second and the time left; gone when done.
    Nothing (None) when standard error is not a terminal, or `quiet` (a machine-readable output)."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    display = Display()
    try:
        yield display
    finally:
        display.close()


class Display:
    """The progress display, started by the first page reported: `rich` is imported (a tenth of a
    second) while the lists' helper processes already work, and a command that fails before
    reading anything shows none. Pages report more often than it redraws; it keeps the last few
    a second of each list."""

    def __init__(self) -> None:
        self._bars: Bars | None = None
        self._tasks: dict[str, TaskID] = {}
        self._told: dict[str, float] = {}

    def __call__(self, resource: str, count: int, total: int | None = None) -> None:
        now = time.monotonic()
        bars = self._bars = self._bars or start_bars()
        task = self._tasks.get(resource)
        if task is None:
            self._tasks[resource] = bars.add_task(resource, total=total, completed=count)
        elif now - self._told[resource] >= 1 / PROGRESS_REFRESH or count == total:
            bars.update(task, completed=count, total=total)
        else:
            return
        self._told[resource] = now

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()  # transient: the lines are erased, the command's result follows


def start_bars() -> Bars:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bars
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")

    bars = Bars(
        TextColumn("  reading {task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
        refresh_per_second=PROGRESS_REFRESH,
    )
    bars.start()
    return bars
