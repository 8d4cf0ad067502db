"""`upgrade-bot rules check FILE` validates a known-issue rules file; `upgrade-bot rules test [FILE]
--log LINE | --event MESSAGE` says which rules match a line (neither needs a configuration; with
`--config` and no FILE, `rules test` tries the rules that configuration's bot matches)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bot.core.rules import load_rules, rules_problems
from bot.errors import BotError
from bot.frontdoor.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    Subparsers,
    common_options,
    refused,
    verb_parser,
)
from bot.frontdoor.rules_tester import run_rules_test
from bot.logsetup import configure_logging
from bot.settings import load_settings


def register(subparsers: Subparsers) -> Handler:
    rules = subparsers.add_parser(
        "rules", help="known-issue rules: `rules check FILE`, `rules test [FILE] --log LINE`"
    )
    actions = rules.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", parents=[common_options()], help="validate a rules file; exit 2 listing problems"
    )
    check.add_argument("file", help="the rules file (YAML)")
    test = verb_parser(
        actions,
        "test",
        "which rules match a log line or an event message; exit 3 on a match, 0 on none",
    )
    test.add_argument(
        "file", nargs="?", help="the rules file to test (default: --config's rules, else the shipped rules)"
    )
    line = test.add_mutually_exclusive_group(required=True)
    line.add_argument(
        "--log",
        metavar="LINE",
        help="a container's log line (or a pasted tail; --log=LINE if it starts with -)",
    )
    line.add_argument("--event", metavar="MESSAGE", help="an event's message")
    test.add_argument("--container", metavar="NAME", help="with --log: the container the line is from")
    test.add_argument(
        "--reason", metavar="REASON", help="with --event: the event's reason (FailedAttachVolume…)"
    )
    return _dispatch


def _dispatch(args: argparse.Namespace) -> int:
    if args.rules_command == "test":
        return _test(args)
    return _check(args)


def _test(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file) if args.file else None
    configured = None
    if path is None and args.config:
        # The rules the bot of that configuration matches: the shipped ones and the team's.
        try:
            settings = load_settings(Path(args.config), os.environ)
            paths = settings.rules_paths()
            configured = (
                load_rules(paths),
                f"the rules of {args.config} ({', '.join(str(p) for p in paths)})",
            )
        except BotError as exc:
            return refused(exc)
    return run_rules_test(
        path,
        args.log,
        args.container,
        args.event,
        sys.stdout,
        reason=args.reason,
        err=sys.stderr,
        configured=configured,
    )


def _check(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file)
    if not path.exists():
        print(f"upgrade-bot: {path}: no such file", file=sys.stderr)
        return EXIT_USAGE
    rules, problems = rules_problems(path)
    if problems:
        # Every problem, each with its line: a team fixes its file in one pass, not one per run.
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{path}: {len(problems)} problem{'s' if len(problems) != 1 else ''}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: {len(rules)} rules are valid: {', '.join(r.id for r in rules)}")
    return EXIT_OK
