"""`upgrade-bot sim scenario --from-snapshot LABEL | --builtin NAME`: a scenario file for the
simulated cluster, a twin of a cluster (the bot's stored snapshot, read here) or a built-in."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot.errors import BotError
from bot.frontdoor.cli.config import settings_for
from bot.frontdoor.cli.connect import stored_snapshot
from bot.frontdoor.cli.options import EXIT_OK, EXIT_USAGE, own_options, own_parser, parse_own, refused
from bot.logsetup import configure_logging
from bot.sim.world.scenario import builtin_dir, builtin_scenarios
from bot.sim.world.twin import dump_scenario, scenario_from_snapshot


def parser() -> argparse.ArgumentParser:
    """`sim scenario`'s arguments (also what the completion script completes)."""
    scenario = own_parser(
        "upgrade-bot sim scenario",
        "Write a scenario file: a twin of a cluster from a stored snapshot, or a built-in.",
    )
    source = scenario.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-snapshot", metavar="LABEL", help="a stored snapshot's id or label")
    source.add_argument("--builtin", metavar="NAME", help="a built-in scenario (`upgrade-bot sim scenarios`)")
    scenario.add_argument("--cluster", help="with a label: which cluster (default: the only one)")
    scenario.add_argument("--name", help="the scenario's name (default: CLUSTER-twin)")
    scenario.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    return own_options(scenario)


def main(argv: list[str]) -> int:
    """`sim scenario`'s arguments (after those two words): a scenario file on standard output."""
    args = parse_own(parser(), argv)
    if isinstance(args, int):
        return args
    configure_logging(args.log_level or "WARNING", [])
    if args.builtin:
        path = builtin_dir() / f"{args.builtin}.yaml"
        if not args.builtin.replace("-", "").isalnum() or not path.is_file():
            known = ", ".join(n for n, _ in builtin_scenarios())
            print(f"upgrade-bot: no built-in scenario {args.builtin!r} (known: {known})", file=sys.stderr)
            return EXIT_USAGE
        text = path.read_text(encoding="utf-8")
    else:
        try:
            _, stored = stored_snapshot(settings_for(args, read_only=True), args.cluster, args.from_snapshot)
        except BotError as exc:
            return refused(exc)
        text = dump_scenario(scenario_from_snapshot(stored.snap, name=args.name))
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"upgrade-bot: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"scenario written to {args.out}; serve it with `upgrade-bot sim serve --scenario {args.out}`",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return EXIT_OK
