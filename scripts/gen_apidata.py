"""Writes bot/core/checks/served_kinds.json: the group/version/kinds each Kubernetes release serves.

Run at development time, never by the bot: `.venv/bin/python scripts/gen_apidata.py` after the
dev group's kubernetes-validate is upgraded (tests/core/checks/test_served_kinds.py fails until the
file is regenerated). The bot reads only the JSON (bot/core/checks/apidata.py), so the 108 MB of
schemas stay out of its install.

kubernetes-validate ships the JSON schemas of every release from 1.25 on, one `v1.N.0-local`
folder per release. Each folder's `_definitions.json` tags every top-level type with
`x-kubernetes-group-version-kind`; decoding only that tag gives the exact set of served kinds.
Types tagged with several kinds (DeleteOptions, WatchEvent, …), apimachinery's own (Status) and
lists are not objects and are left out.

The output is deterministic (sorted, no time stamp), so regenerating from the same package version
changes nothing: one line per group-version and release, for a readable diff when a release lands.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path

import msgspec

DATA_PACKAGE = "kubernetes_validate"
DATA_DISTRIBUTION = "kubernetes-validate"
OUTPUT = Path(__file__).resolve().parent.parent / "bot" / "core" / "checks" / "served_kinds.json"


class _Definition(msgspec.Struct):
    gvk: list[dict[str, str]] | None = msgspec.field(default=None, name="x-kubernetes-group-version-kind")


class _Definitions(msgspec.Struct):
    defs: dict[str, _Definition] = msgspec.field(default_factory=dict, name="$defs")


def schema_root() -> Path:
    """The package's schema folder, found without importing it (its own imports are heavy)."""
    spec = importlib.util.find_spec(DATA_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            f"gen_apidata: {DATA_DISTRIBUTION} is not installed (it is in the dev group: scripts/setup)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


def served_kinds(root: Path) -> dict[int, dict[str, list[str]]]:
    """Release minor → group-version ("v1", "apps/v1") → sorted kinds."""
    decoder = msgspec.json.Decoder(_Definitions)
    releases: dict[int, dict[str, list[str]]] = {}
    for folder in sorted(root.glob("v1.*-local")):
        m = re.match(r"^v1\.(\d+)\.\d+-local$", folder.name)
        if m is None:
            continue
        doc = decoder.decode((folder / "_definitions.json").read_bytes())
        by_gv: dict[str, set[str]] = {}
        for type_name, definition in doc.defs.items():
            tags = definition.gvk or []
            if len(tags) != 1 or type_name.startswith("io.k8s.apimachinery."):
                continue
            tag = tags[0]
            kind, group, version = tag.get("kind", ""), tag.get("group", ""), tag.get("version", "")
            if kind and not kind.endswith("List"):
                by_gv.setdefault(f"{group}/{version}" if group else version, set()).add(kind)
        releases[int(m.group(1))] = {gv: sorted(kinds) for gv, kinds in sorted(by_gv.items())}
    if not releases:
        raise SystemExit(f"gen_apidata: no v1.N.0-local folders under {root}")
    return releases


def render(releases: dict[int, dict[str, list[str]]], version: str) -> str:
    """The file's text: a header saying where the data came from, then one line per group-version
    per release (kinds joined by spaces)."""
    lines = [
        "{",
        f'  "source": {json.dumps(DATA_DISTRIBUTION)},',
        f'  "version": {json.dumps(version)},',
        '  "generated_by": "scripts/gen_apidata.py",',
        '  "format": "release minor -> group-version -> space-separated kinds served",',
        '  "releases": {',
    ]
    minors = sorted(releases)
    for i, minor in enumerate(minors):
        lines.append(f'    "{minor}": {{')
        items = list(releases[minor].items())
        for j, (gv, kinds) in enumerate(items):
            comma = "," if j < len(items) - 1 else ""
            lines.append(f"      {json.dumps(gv)}: {json.dumps(' '.join(kinds))}{comma}")
        lines.append("    }" + ("," if i < len(minors) - 1 else ""))
    lines += ["  }", "}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})")
    args = parser.parse_args(argv)
    text = render(served_kinds(schema_root()), importlib.metadata.version(DATA_DISTRIBUTION))
    json.loads(text)  # the hand-laid layout is still JSON
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text.encode()):,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
