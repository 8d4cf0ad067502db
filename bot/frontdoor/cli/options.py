"""What every verb of the terminal shares and `upgrade-bot --help` shows: the exit statuses, the
options every command takes, kubectl's two flags, and the shape of a verb's handler.

Kept light (argparse and the standard library only): `main` imports it before it knows which verb
runs, and `upgrade-bot --help` imports nothing else of the bot.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable
from typing import TypeAlias

# Light (traceback and pathlib only): `--help` may import it.
from bot.errors import BotError, ConfigError, StoreUnreachable, UsageError
from bot.logsetup import mask_tokens

#: What a verb's `register(subparsers)` returns and `main` calls with the parsed arguments: the
#: command's exit status.
Handler = Callable[[argparse.Namespace], int]
#: `register`'s argument: the top-level parser's subcommands (generic only to the type checker).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: 0 clean; 1 could not do it; 2 usage or configuration error; 3 worked and found something.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3

EXIT_STATUSES = """\
exit status (the same for every command):
  0  done, nothing found
  1  could not do it: cluster unreachable, Slack or store error, unknown snapshot or plan; a diff
     that could not compare the nodes, pods or workloads (not readable in one of the snapshots)
  2  usage or configuration error: a bad flag or argument, a missing or invalid configuration key,
     an invalid plan, rules or templates file
  3  done, and found something: check (Required findings), diff (regressions), rehearse (completed
     with failed steps skipped, steps not all done or past a safeguard people chose — a cloud's
     refusal overridden, evidence waived —, or paused)
  141  the output's reader went away before all of it was written (`| head`), as a shell says of
     a command a SIGPIPE ended; nothing more is printed
"""
#: 128 + SIGPIPE: what a shell reports for a command whose output's reader went away.
EXIT_PIPE = 141

#: The levels `--log-level` takes.
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def common_options() -> argparse.ArgumentParser:
    """The parent parser of every command that reads the configuration."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        help="configuration file (default: $UPGRADE_BOT_CONFIG or ./upgrade-bot.yaml; without one, "
        "snapshot, diff and check use the current kube context, as kubectl does)",
    )
    common.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        help="default: INFO for run, WARNING otherwise",
    )
    common.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for a log collector (default: text)",
    )
    return common


def verb_parser(
    subparsers: Subparsers, name: str, help: str, *, configured: bool = True
) -> argparse.ArgumentParser:
    """A command whose help ends with the exit statuses; `configured`: it reads the configuration
    (`common_options`)."""
    return subparsers.add_parser(
        name,
        parents=[common_options()] if configured else [],
        help=help,
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def own_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The parser of a command that parses its own arguments (`sim fidelity`, `sim scenario`): its
    help ends with the exit statuses; `own_options` adds `--config` and `--log-level` after the
    command's own."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def own_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` (an `own_parser`) with `--config` and `--log-level`."""
    parser.add_argument("--config", metavar="PATH")
    parser.add_argument("--log-level", choices=LOG_LEVELS)
    return parser


def parse_own(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """`argv` parsed, or the exit status of `--help` or of a usage error (argparse has printed it)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def formats(parser: argparse.ArgumentParser, choices: list[str], default: str) -> None:
    """`-o/--output FORMAT`, as kubectl, pluto and kubent spell it; `--format` still works."""
    parser.add_argument(
        "-o",
        "--output",
        dest="output",
        choices=choices,
        default=default,
        metavar="FORMAT",
        help=f"{'|'.join(choices)} (default: {default})",
    )
    parser.add_argument("--format", dest="output", choices=choices, help=argparse.SUPPRESS)


def cluster_flag(parser: argparse.ArgumentParser) -> None:
    """`--cluster NAME`: which configured cluster the command reads (`pick_cluster`: the only one
    when there is only one)."""
    parser.add_argument("--cluster", help="a configured cluster (default: the only one)")


def as_person(parser: argparse.ArgumentParser) -> None:
    """`--as USER_ID`: whom a verb that runs an /upgrade command acts as (the roster decides what
    they may do); without it, the person at the terminal (`terminal_user`)."""
    parser.add_argument(
        "--as", dest="as_user", metavar="USER_ID", help="act as this Slack user ID (for roles)"
    )


def plain_reply(parser: argparse.ArgumentParser) -> None:
    """`--plain`: the reply `answered` prints, in ASCII."""
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print plain ASCII: emoji as words like [ok], no arrows or dashes (logs, CI)",
    )


def kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file(s), as kubectl reads them (default: $KUBECONFIG, then ~/.kube/config)",
    )
    parser.add_argument("--context", help="the kubeconfig context (default: its current context)")


def dead_letter_verb(
    subparsers: Subparsers,
    name: str,
    help: str,
    *,
    listed: str,
    retry: str,
    key: str,
    key_type: Callable[[str], object],
    key_help: str,
) -> None:
    """A verb over a queue's dead letters: `NAME list` (`listed`: what it shows), `NAME retry KEY`
    (`retry`: what happens then) and `NAME drop KEY`; the action is in `args.NAME_command`."""
    verb = subparsers.add_parser(name, help=help)
    actions = verb.add_subparsers(dest=f"{name}_command", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common_options()], help=listed)
    for action, what in (("retry", retry), ("drop", "give up on it for good")):
        sub = actions.add_parser(action, parents=[common_options()], help=what)
        sub.add_argument(key, type=key_type, help=key_help)


def terminal_user() -> str:
    """Who is at the terminal, as the audit log and a snapshot's `taken_by` name them."""
    return f"terminal:{os.environ.get('USER', 'unknown')}"


def stdout_reader_gone() -> bool:
    """Is stdout a pipe whose reader has gone (`| head -1` read its line and closed it)? poll()
    says POLLERR of such a pipe's end; a BrokenPipeError of a socket (Slack, a cluster, the
    database) is a connection's failure, not this."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def end_quietly() -> int:
    """End a command whose output's reader went away as other commands do, without a word (the
    Python documentation's "Note on SIGPIPE"): stdout goes to /dev/null, so the interpreter's
    last flush does not fail again at exit; the status is EXIT_PIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE


def refused(exc: BotError) -> int:
    """Say why the bot refused, with no traceback: one line, or one line per problem of a file;
    and the exit status: a usage error (a configuration or the command's words) is 2, anything else
    1 — a database that did not accept a connection too, though it is a configuration's error
    (`StoreUnreachable`). A Slack token a message quotes (a path or URL of the configuration that
    holds one) is masked: under Helm stderr is a pod's log."""
    problems = exc.problems if isinstance(exc, ConfigError) else ()
    if len(problems) > 1:
        # Every problem of the file at once (as `plan validate` gives a plan's), not the first alone.
        print(f"upgrade-bot: {len(problems)} problems:", file=sys.stderr)
        for problem in problems:
            print(f"  {mask_tokens(problem)}", file=sys.stderr)
    else:
        print(f"upgrade-bot: {mask_tokens(exc.user_message)}", file=sys.stderr)
    usage = isinstance(exc, (ConfigError, UsageError)) and not isinstance(exc, StoreUnreachable)
    return EXIT_USAGE if usage else EXIT_FAILED
