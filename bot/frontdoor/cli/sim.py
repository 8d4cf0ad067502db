"""`upgrade-bot sim serve|scenarios …`: the simulated cluster (bot/sim), a separate subsystem with
its own arguments; the bot never imports it. (`sim scenario` is the bot's: `sim_scenario`.)"""

from __future__ import annotations

from bot.frontdoor.cli.options import Handler, Subparsers
from bot.sim.cli import main as sim_main


def register(subparsers: Subparsers) -> Handler:
    """Only `--help`'s line: `main` hands `sim …` to `main` here before parsing anything."""
    subparsers.add_parser("sim", help="the simulated cluster: `upgrade-bot sim --help`", add_help=False)
    return lambda args: main([])


def main(argv: list[str]) -> int:
    """`sim`'s arguments (after that word)."""
    return int(sim_main(argv))
