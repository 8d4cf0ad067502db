"""`upgrade-bot rules check FILE`: validate a known-issue rules file (no configuration needed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.core.checks.rules import read_rules
from bot.errors import ConfigError
from bot.frontdoor.cli.options import EXIT_OK, EXIT_USAGE, Handler, Subparsers, common_options
from bot.logsetup import configure_logging


def register(subparsers: Subparsers) -> Handler:
    rules = subparsers.add_parser("rules", help="known-issue rules: `rules check FILE`")
    actions = rules.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", parents=[common_options()], help="validate a rules file; exit 2 listing problems"
    )
    check.add_argument("file", help="the rules file (YAML)")
    return _check


def _check(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file)
    try:
        rules = read_rules(path)
    except FileNotFoundError:
        print(f"upgrade-bot: {path}: no such file", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: {len(rules)} rules are valid: {', '.join(r.id for r in rules)}")
    return EXIT_OK
