"""The repository's Python sources, parsed once per test process.

The structure tests (the layers, the hook check, the one home of a default, the declared
dependencies, the verb package) walk the same ~400 modules of `bot/` and `commands/` again and
again; a parse of them all is over a second of CPU. A tree is shared between its callers, so they
only read it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.support.collector import kept

#: The tests that parse the whole tree run on one pytest-xdist worker (`--dist loadgroup`), which
#: parses it once: spread over four workers each parsed it (about 3 s of CPU each on 2 cores).
WHOLE_TREE = pytest.mark.xdist_group("sources")


@functools.cache
def parsed(source: str) -> ast.Module:
    """`source` parsed: the same text is one tree, whether a test read it by path or as text. The
    trees are kept for the session: out of the collector's walks (`collector.kept`)."""
    return kept(ast.parse(source))


def tree(path: Path) -> ast.Module:
    """The module at `path`, parsed."""
    return parsed(path.read_text(encoding="utf-8"))
