"""The YAML output (`-o yaml`) of the commands whose JSON output is their data: the same keys, in
the same order."""

from __future__ import annotations

import json

import yaml


def as_yaml(json_text: str) -> str:
    """The JSON output's data as YAML (the same keys, in the same order)."""
    return str(yaml.safe_dump(json.loads(json_text), sort_keys=False, allow_unicode=True))
