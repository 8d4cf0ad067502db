"""`upgrade-bot init [--out PATH] [--force]`: write the annotated example configuration, the first
step of a new team's set-up (docs/install.md). The example ships inside the package, so a plain
`pip install` has it; it is never written over an existing file unless `--force` says so."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot import configschema
from bot.frontdoor.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Handler, Subparsers
from bot.resources import EXAMPLE_CONFIG
from bot.settings import DEFAULT_CONFIG_NAME


def register(subparsers: Subparsers) -> Handler:
    init = subparsers.add_parser(
        "init",
        help="write the annotated example configuration to start from (./upgrade-bot.yaml)",
        description="Write the annotated example configuration, to edit: its clusters, roster, "
        "channels and windows are the example team's. `-` writes it to standard output.",
    )
    init.add_argument(
        "--out",
        metavar="PATH",
        default=DEFAULT_CONFIG_NAME,
        help=f"where to write it (default: {DEFAULT_CONFIG_NAME})",
    )
    init.add_argument("--force", action="store_true", help="replace a file that is already there")
    return _init


#: The example's first line in the repository: the schema an editor checks it with, in `schemas/`.
CHECKOUT_SCHEMA = "$schema=schemas/upgrade-bot.schema.json"
#: Where `init` writes that schema for a configuration it writes: beside it (a plain `pip install`
#: has no `schemas/` folder), from the installed bot's own key table.
SCHEMA_NAME = "upgrade-bot.schema.json"


def _init(args: argparse.Namespace) -> int:
    text = EXAMPLE_CONFIG.read_text(encoding="utf-8")
    if args.out == "-":
        sys.stdout.write(text)
        return EXIT_OK
    out = Path(args.out)
    if out.is_dir():
        out = out / DEFAULT_CONFIG_NAME
    if out.exists() and not args.force:
        print(f"upgrade-bot: {out} already exists; pass --force to replace it", file=sys.stderr)
        return EXIT_USAGE
    schema = out.parent / SCHEMA_NAME
    try:
        out.write_text(text.replace(CHECKOUT_SCHEMA, f"$schema={SCHEMA_NAME}", 1), encoding="utf-8")
        schema.write_text(configschema.render(), encoding="utf-8")
    except OSError as exc:
        print(f"upgrade-bot: cannot write {exc.filename or out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    print(
        f"wrote {out}, the example team's configuration: set your clusters, channel IDs and roster "
        "(every key: docs/configuration.md); the first command that reads it names any mistake with "
        f"its line. Beside it, {schema}: the JSON Schema an editor (its YAML language server, named "
        "on the file's first line) checks it with as you type."
    )
    return EXIT_OK
