"""`upgrade-bot templates check [DIR]`: render every announcement template against a sample
context (the team's CI runs it on a templates directory alone, without a configuration file)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bot.core.announcements.templates import AnnouncementRenderer
from bot.errors import ConfigError
from bot.frontdoor.cli.config import settings_for
from bot.frontdoor.cli.options import EXIT_OK, EXIT_USAGE, Handler, Subparsers, common_options
from bot.logsetup import configure_logging
from bot.settings import resolve_config_path


def register(subparsers: Subparsers) -> Handler:
    templates = subparsers.add_parser("templates", help="announcement templates: `templates check [DIR]`")
    actions = templates.add_subparsers(dest="templates_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        parents=[common_options()],
        help="render every template against a sample context; exit 2 on errors",
    )
    check.add_argument(
        "dir", nargs="?", help="the team's templates directory (default: templates_dir from the config)"
    )
    return _check


def _check(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    directory = Path(args.dir) if args.dir else None
    if directory is None and resolve_config_path(args.config, os.environ, Path.cwd()).is_file():
        try:
            directory = settings_for(args).templates_dir
        except ConfigError as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_USAGE
    if directory is not None and not directory.is_dir():
        print(f"upgrade-bot: {directory}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    problems = AnnouncementRenderer(directory).check()
    for problem in problems:
        # `FILE:LINE: reason` at the start of the line, as editors and CI annotations expect.
        print(problem, file=sys.stderr)
    if problems:
        print(f"upgrade-bot: {len(problems)} template problem(s)", file=sys.stderr)
        return EXIT_USAGE  # the team's templates are configuration, as plans and rules files are
    source = f"built-in templates with overrides from {directory}" if directory else "built-in templates"
    print(f"templates ok: every announcement renders ({source})")
    return EXIT_OK
