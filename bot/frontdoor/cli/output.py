"""A command's output: the YAML (`-o yaml`) of the commands whose JSON output is their data (the
same keys, in the same order), and where it goes (`--out FILE` or standard output)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


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
