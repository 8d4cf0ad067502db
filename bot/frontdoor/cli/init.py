"""`upgrade-bot init [--slack-manifest] [--out PATH] [--force]`: write the annotated example
configuration, the first step of a new team's set-up (docs/install.md), or the Slack app's
manifest. Both ship inside the package, so a plain `pip install` has them (and no docs/ folder or
repository files: what `init` says points at what it wrote); neither is written over an existing
file unless `--force` says so."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot import configschema
from bot.frontdoor.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Handler, Subparsers
from bot.resources import EXAMPLE_CONFIG, SLACK_MANIFEST
from bot.settings import DEFAULT_CONFIG_NAME


def register(subparsers: Subparsers) -> Handler:
    init = subparsers.add_parser(
        "init",
        help="write the annotated example configuration to start from (./upgrade-bot.yaml)",
        description="Write the annotated example configuration, to edit (its clusters, roster, "
        "channels and windows are the example team's), with its JSON Schema beside it: every key, what "
        "it means, its default and limits; or, with --slack-manifest, the Slack app's manifest. "
        "`--out -` writes it to standard output.",
    )
    init.add_argument(
        "--slack-manifest",
        action="store_true",
        help=f"write the Slack app's manifest instead (default: ./{MANIFEST_NAME}), to create the app from "
        "(api.slack.com/apps → Create New App → From a manifest) or to compare its scopes with",
    )
    init.add_argument(
        "--out",
        metavar="PATH",
        help=f"where to write it (default: {DEFAULT_CONFIG_NAME}, or {MANIFEST_NAME})",
    )
    init.add_argument("--force", action="store_true", help="replace a file that is already there")
    return _init


#: The example's first line in the repository: the schema an editor checks it with, in `schemas/`.
CHECKOUT_SCHEMA = "$schema=schemas/upgrade-bot.schema.json"
#: Where `init` writes that schema for a configuration it writes: beside it (a plain `pip install`
#: has no `schemas/` folder), from the installed bot's own key table.
SCHEMA_NAME = "upgrade-bot.schema.json"
#: Where `init --slack-manifest` writes the Slack app's manifest (the repository's file name).
MANIFEST_NAME = "slack-app-manifest.yaml"


def _init(args: argparse.Namespace) -> int:
    source, name = (
        (SLACK_MANIFEST, MANIFEST_NAME) if args.slack_manifest else (EXAMPLE_CONFIG, DEFAULT_CONFIG_NAME)
    )
    text = source.read_text(encoding="utf-8")
    if args.out == "-":
        sys.stdout.write(text)
        return EXIT_OK
    out = Path(args.out or name)
    if out.is_dir():
        out = out / name
    if out.exists() and not args.force:
        print(f"upgrade-bot: {out} already exists; pass --force to replace it", file=sys.stderr)
        return EXIT_USAGE
    schema = out.parent / SCHEMA_NAME
    try:
        if args.slack_manifest:
            out.write_text(text, encoding="utf-8")
        else:
            out.write_text(text.replace(CHECKOUT_SCHEMA, f"$schema={SCHEMA_NAME}", 1), encoding="utf-8")
            schema.write_text(configschema.render(), encoding="utf-8")
    except OSError as exc:
        print(f"upgrade-bot: cannot write {exc.filename or out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.slack_manifest:
        print(
            f"wrote {out}, the Slack app's manifest: at api.slack.com/apps, Create New App → From a manifest, "
            "paste it (its first lines say what to change for HTTP mode); an app made before keeps its "
            "scopes until you add the manifest's and reinstall it."
        )
        return EXIT_OK
    # An installed copy has no docs/ folder: the schema written beside it is the reference it has
    # (every key, what it means, its default and limits: the table docs/reference/configuration.md
    # is made from, and the installed bot's own).
    print(
        f"wrote {out}, the example team's configuration: set your clusters, channel IDs and roster; the "
        f"first command that reads it names any mistake with its line. Beside it, {schema}: every key "
        "with what it means, its default and its limits, the JSON Schema an editor (its YAML language "
        "server, named on the file's first line) checks it with as you type. The Slack app to create: "
        "`upgrade-bot init --slack-manifest` writes its manifest."
    )
    return EXIT_OK
