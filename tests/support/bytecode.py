"""Compiled bytecode for the Python processes the suite starts, when the environment forbids
writing it (`PYTHONDONTWRITEBYTECODE`, set on some shared machines to keep `__pycache__` out of
source trees and shared virtualenvs).

Without it every `upgrade-bot` process a test starts (a bot, a restart after `kill -9`, a replica,
a terminal command) compiles the bot's 80,000 lines again before it does anything: about a CPU
second each, hundreds of times a run. So the session lets Python write and read its bytecode in a
directory of its own outside every source tree (`PYTHONPYCACHEPREFIX`, mirrored by absolute path
so worktrees never share an entry); children inherit it, the workers of pytest-xdist included
(started after this). An environment that already names a prefix, or writes bytecode, is kept.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest


def cache_dir() -> Path:
    """The session's bytecode directory: one per user, kept between runs (Python checks each
    entry against its source's modification time and size)."""
    return Path(tempfile.gettempdir()) / f"upgrade-bot-pycache-{os.getuid()}"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if "PYTHONDONTWRITEBYTECODE" not in os.environ or "PYTHONPYCACHEPREFIX" in os.environ:
        return
    prefix = cache_dir()
    prefix.mkdir(mode=0o700, exist_ok=True)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    # This process too: the test modules and what they import are still to be collected.
    sys.pycache_prefix = str(prefix)
    sys.dont_write_bytecode = False
