"""A command's output: a reply's Slack text as a terminal shows it (`for_terminal`), the YAML
(`-o yaml`) of the commands whose JSON output is their data (the same keys, in the same order),
and where it goes (`--out FILE` or standard output)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from bot.core.people import Directory, NameCache, display_names
from bot.frontdoor.termtext import TerminalText, mentioned


def for_terminal(text: str, names: NameCache, directory: Directory | None, *, plain: bool = False) -> str:
    """A reply's Slack text for a person at a terminal (`TerminalText`): people by their Slack
    display names (cached in `names`, looked up with the bot's token when it has one), else their
    ids; dates in local time; emoji as characters (or, `plain`, ASCII words and no emphasis)."""
    known = display_names(names, mentioned(text), now=datetime.now(UTC), directory=directory)
    return TerminalText(names=known, plain=plain)(text)


def as_yaml(json_text: str) -> str:
    """The JSON output's data as YAML (the same keys, in the same order)."""
    return str(yaml.safe_dump(json.loads(json_text), sort_keys=False, allow_unicode=True))


def write_out(text: str, out: str | None, wrote: str) -> None:
    """`text` to the file `out` (then `wrote`, what it holds, on standard error), or else to
    standard output."""
    if out:
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {wrote} to {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
