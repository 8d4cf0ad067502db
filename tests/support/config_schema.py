"""The configuration's published JSON Schema, applied as editors and Helm apply it.

Editors and Helm see a YAML file as JSON: an unquoted date (`from: 2026-12-25`) is a string to
them, so `load` reads timestamps as text (PyYAML's SafeLoader would make them `date` objects,
which no JSON Schema type matches).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "upgrade-bot.schema.json"


class _JsonLikeLoader(yaml.SafeLoader):
    """SafeLoader without the timestamp resolver: dates stay strings, as in JSON."""


_JsonLikeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load(text: str) -> Any:
    return yaml.load(text, Loader=_JsonLikeLoader)


def schema_errors(document: Any) -> list[str]:
    """Every schema error of a configuration document, as `path: message`, most specific first."""
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    errors = sorted(validator.iter_errors({} if document is None else document), key=lambda e: e.path)
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}" for e in errors]
