"""Reading a small file someone named, safely: a regular file only, at most so many bytes.

A leaf (it imports nothing of the bot) so that the configuration and plan loaders in core and the
kube adapter's kubeconfig check share one reader. A path a person names may be a FIFO (opening it
blocks until a writer appears), a device (`/dev/zero` never ends), a directory or a huge file; each
is refused with a short reason before anything reads it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class Unreadable(Exception):
    """Why the file was not read: `reason` is short, lower-case, and names no path (the caller
    puts the path and what the file is for in front of it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotRegular(Unreadable):
    """A FIFO, a device, a directory or a socket; `kind` says which ("a FIFO")."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"not a regular file ({kind})" if kind != "not a regular file" else kind)
        self.kind = kind


class TooLarge(Unreadable):
    """More than the limit's bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"larger than {size_text(limit)}")
        self.limit = limit


def size_text(limit: int) -> str:
    """`4 MiB`, `256 KiB`, `900 bytes`: a limit as a person reads it."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a device", …)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bounded(path: Path | str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    FileNotFoundError passes through (callers word it); a file that is not regular is NotRegular,
    a longer one TooLarge, any other OSError Unreadable with the system's reason.
    """
    try:
        # stat before open: opening a FIFO blocks until a writer appears, /dev/zero never ends.
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise NotRegular(kind_of(mode))
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not wait.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(kind_of(mode))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(limit)
    return data
