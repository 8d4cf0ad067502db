"""`upgrade-bot sim serve|scenarios …`: the simulated cluster (bot/sim), a separate subsystem with
its own arguments; the bot never imports it. (`sim scenario` is the bot's: `sim_scenario`.)"""

from __future__ import annotations

import argparse

from bot.frontdoor.cli.options import Handler, Subparsers
from bot.sim.cli import main as sim_main
from bot.sim.cli import parser as sim_parser


def register(subparsers: Subparsers) -> Handler:
    """Only `--help`'s line: `main` hands `sim …` to `main` here before parsing anything."""
    subparsers.add_parser("sim", help="the simulated cluster: `upgrade-bot sim --help`", add_help=False)
    return lambda args: main([])


def parser() -> argparse.ArgumentParser:
    """`sim`'s own parser: its subcommands, for the completion script."""
    return sim_parser()


def main(argv: list[str]) -> int:
    """`sim`'s arguments (after that word)."""
    return int(sim_main(argv))
