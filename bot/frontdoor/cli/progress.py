"""The terminal's progress display while a cluster's lists are read (snapshot, diff, check, plan
draft): a line per list on standard error, gone when done.

Drawn with `tqdm` (a few hundred kilobytes, no dependencies on Linux) rather than `rich`, which
with `pygments` was 13.6 MB, an eighth of the install, for these lines alone. `tqdm` is imported
inside `Display`, the first time a page is reported: a command that fails first pays nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.core.snapshots.projection import Progress


#: How often the progress display redraws; a list's pages report more often than that.
PROGRESS_REFRESH = 4.0
#: One list's line: what is read, the bar, items read (of the total when the server gives one),
#: items per second and the time left.
BAR_FORMAT = "  reading {desc:<22} {bar} {n_fmt}/{total_fmt} {rate_fmt} {remaining}"
#: Without a total (the server gave no `remainingItemCount`) there is no bar and no time left.
COUNT_FORMAT = "  reading {desc:<22} {n_fmt} {rate_fmt}"


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
    """The progress display: a line per list, opened by its first page. Pages report more often
    than it redraws; it keeps the last few a second of each list."""

    def __init__(self, file: Any = None) -> None:
        self._file = file
        self._bars: dict[str, Any] = {}
        self._told: dict[str, float] = {}

    def __call__(self, resource: str, count: int, total: int | None = None) -> None:
        now = time.monotonic()
        bar = self._bars.get(resource)
        if bar is None:
            from tqdm import tqdm

            file = self._file or sys.stderr
            # A terminal that reports no size (a pty nobody sized: `script`, CI's, a test's) would
            # make tqdm draw nothing — it hides every line past the terminal's 0 rows: 80 × 24
            # then, as `shutil.get_terminal_size` assumes.
            sized = _columns(file) > 0
            bar = self._bars[resource] = tqdm(
                desc=resource,
                total=total,
                initial=count,
                unit="",
                unit_scale=False,
                position=len(self._bars),
                leave=False,  # transient: the lines are erased, the command's result follows
                file=file,
                mininterval=1 / PROGRESS_REFRESH,
                bar_format=BAR_FORMAT if total else COUNT_FORMAT,
                dynamic_ncols=sized,
                ncols=None if sized else 80,
                nrows=None if sized else 24,
            )
        elif now - self._told[resource] >= 1 / PROGRESS_REFRESH or count == total:
            if total != bar.total:
                bar.total = total
                bar.bar_format = BAR_FORMAT if total else COUNT_FORMAT
            bar.update(count - bar.n)
            if count == total:
                bar.refresh()  # tqdm holds back a redraw inside its interval; the last page shows
        else:
            return
        self._told[resource] = now

    def close(self) -> None:
        for bar in reversed(list(self._bars.values())):
            bar.close()
        self._bars.clear()


def _columns(file: Any) -> int:
    """The width the terminal behind `file` reports (0: none, or not a terminal); a terminal that
    reports a width reports its rows too."""
    try:
        size = os.get_terminal_size(file.fileno())
        return size.columns if size.lines > 0 else 0
    except (AttributeError, OSError, ValueError):
        return 0
