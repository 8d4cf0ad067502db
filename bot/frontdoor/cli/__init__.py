"""The terminal front door: `upgrade-bot …` (also `python -m bot`).

    upgrade-bot init [--out PATH] [--force]             write the example configuration to edit
    upgrade-bot run [--http [--host H] [--port N]] [--health-port N]   serve Slack (Socket Mode unless --http)
    upgrade-bot exec "SUBCOMMAND ARGS" [--as USER_ID] [--plain]   run one /upgrade subcommand, print the reply
    upgrade-bot audit export [-o csv|md|json] [--since …] [--out FILE]
    upgrade-bot sim serve|scenarios …                    the simulated cluster (bot/sim)
    upgrade-bot templates check [DIR]                    render every announcement template (CI)
    upgrade-bot plan validate FILE [--check-slack] [--check-cluster]   check an upgrade plan (exit 2: problems)
    upgrade-bot plan draft --to V [--out FILE]           a commented plan from what the cluster shows
    upgrade-bot fleet validate|start|status|approve|pause|resume|skip|retry|abort …   fleet runs
    upgrade-bot rehearse PLAN [--scenario S] [--auto-approve | --interactive] [--plain]   a whole plan on the sim
    upgrade-bot rehearse-fleet FLEET [--auto-approve] [--fail CLUSTER:STEP]   a whole fleet on sims
    upgrade-bot check [--cluster C] [--to V] [--manifests PATH|-] [--images] [-o …]   pre-flight
    upgrade-bot rules check FILE                         validate a known-issue rules file
    upgrade-bot rules test [FILE] --log LINE | --event M which rules match a line (exit 3: a match)
    upgrade-bot inbox list|retry ID|drop ID              requests set aside as dead letters
    upgrade-bot outbox list|retry ROW|drop ROW           thread posts set aside as dead letters
    upgrade-bot report RUN [-o html|md|json|png] [--out FILE]   a run's report (timeline picture)
    upgrade-bot completion bash|zsh                      the shell completion script (shtab)

Every command takes `--config PATH`. Configuration problems exit with status 2 and one line that
names the key or line; no traceback is printed for an error the user can fix. The exit statuses are
the same for every command (`EXIT_STATUSES`, shown by `--help`). Without a configuration file the
read-only commands (snapshot, diff, check, and `exec` of snapshot, snapshots, diff, check or
diagnose) use the current kube context as kubectl does (`--kubeconfig`, `--context`, $KUBECONFIG)
and keep their state under $XDG_STATE_HOME/upgrade-bot. `run`'s lifecycle (recovery, triggers,
the transport, shutdown) is `bot.frontdoor.serve`.

Each verb is a module of this package named after it, whose `register(subparsers)` adds its parser
and returns its handler. This module imports a verb's module only when that verb runs (`VERBS`),
and nothing else of the bot: `upgrade-bot --help` lists the verbs from the table, and a verb's
module imports what it needs at its top. The configuration, its errors and their exit statuses
are `config`; the store, the clusters and Slack are reached through `connect`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import sys
from collections.abc import Sequence
from functools import cache
from typing import Protocol, cast

from bot import __version__
from bot.frontdoor.cli.options import EXIT_STATUSES, Handler, Subparsers, end_quietly, stdout_reader_gone

#: The verbs, in `--help`'s order: the name (also its module's) → the line `--help` shows for it.
#: A verb's own `register` gives its parser the same line (tests/frontdoor/test_cli_verbs.py).
VERBS = {
    "init": "write the annotated example configuration to start from (./upgrade-bot.yaml)",
    "run": "serve Slack: Socket Mode, or HTTP with --http",
    "exec": "run one /upgrade subcommand from the terminal (exits as the command of the same name)",
    "audit": "the audit log",
    "snapshot": "take a snapshot (or: snapshot export ID)",
    "diff": "compare two snapshots; exit 3 on regressions",
    "report": "a run's report: the timeline picture, HTML, Markdown or JSON",
    "templates": "announcement templates: `templates check [DIR]`",
    "sim": "the simulated cluster: `upgrade-bot sim --help`",
    "rehearse": "run a whole plan on the simulated cluster, printing the card and thread",
    "rehearse-fleet": "run a whole fleet on simulated clusters, printing the cards and threads",
    "plan": "upgrade plans: `plan validate FILE`, `plan draft --to V`",
    "fleet": "fleet runs: clusters in stages, the first a canary",
    "check": "pre-flight checks for an upgrade; exit 3 when a Required one fails",
    "inbox": "acknowledged requests set aside after failing: list, retry, drop",
    "outbox": "thread posts Slack refused every time: list, retry, drop",
    "rules": "known-issue rules: `rules check FILE`, `rules test [FILE] --log LINE`",
    "completion": "print the shell completion script: `completion bash` or `completion zsh`",
}

#: Commands that parse their own arguments, by their first words → their module (its `main`):
#: the simulator is a separate subsystem; `sim scenario` writes a twin of a cluster for it and
#: `sim fidelity` measures how true that twin is; and `snapshot export ID` shares its first word with `snapshot [LABEL…]`. The longest match wins.
OWN_PARSERS = {
    ("sim", "scenario"): "sim_scenario",
    ("sim", "fidelity"): "sim_fidelity",
    ("sim",): "sim",
    ("snapshot", "export"): "snapshot_export",
}


#: The verbs that read a cluster or stored snapshots once and end. The cyclic garbage collector stays
#: off for their whole run: what they allocate (the kubernetes client's and SQLAlchemy's modules as
#: they are imported, then a snapshot's or a check's lists) is not cyclic garbage, but every few
#: hundred allocations start a collection, and the older generations' walk all of it. At the
#: `large` sim's 150,000 pods the collections took 0.3-0.4 s of a snapshot's 1.9 s in the command's
#: own process (`benchmarks/RESULTS.md`). The served bot (`run`) and the rehearsals keep it on.
BRIEF_VERBS = frozenset({"snapshot", "diff", "check"})


class Verb(Protocol):
    def register(self, subparsers: Subparsers) -> Handler: ...


class OwnParser(Protocol):
    def main(self, argv: list[str]) -> int: ...

    def parser(self) -> argparse.ArgumentParser: ...


def main(argv: Sequence[str] | None = None) -> int:
    _exit_without_collecting()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        # Back on as `main` ends, for a process that goes on (the tests).
        with _collecting(_verb(argv)):
            status = _dispatch(argv)
        # What is still buffered is written here, where a reader that went away can be told from
        # a failure, rather than at the interpreter's exit ("Exception ignored … BrokenPipeError").
        sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise
        return end_quietly()
    return status


def _collecting(verb: str | None) -> contextlib.AbstractContextManager[None]:
    """The cyclic collector paused for a brief verb (`BRIEF_VERBS`), left as it is otherwise."""
    if verb not in BRIEF_VERBS:
        return contextlib.nullcontext()
    from bot.core.snapshots.collector import collector_paused  # imported by each brief verb anyway

    return collector_paused()


def _verb(argv: list[str]) -> str | None:
    # The top-level parser has no option that takes a value: its first word is the verb.
    return next((word for word in argv if not word.startswith("-")), None)


def _dispatch(argv: list[str]) -> int:
    for words, module in OWN_PARSERS.items():
        if argv[: len(words)] == list(words):
            return cast(OwnParser, _module(module)).main(argv[len(words) :])
    verb = _verb(argv)
    parser, handler = parser_for(verb)
    args, unknown = parser.parse_known_args(argv)
    refusing = vars(args).pop(_REFUSED_BY, parser)
    if unknown:
        refusing.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None or handler is None:
        parser.error("the following arguments are required: COMMAND")
    return handler(args)


@cache
def _exit_without_collecting() -> None:
    """Freeze the heap as the process exits, after its threads are joined and before the
    interpreter's own last collections: those walk every object still alive (the kubernetes
    client's 800 model classes, a snapshot's lists), 0.4-0.6 s at the end of a 150,000-pod
    snapshot for nothing, since the process is going away. Frozen objects are still freed as
    modules are torn down, and the `atexit` functions registered before this one (logging's
    flush, `weakref.finalize`) still run after it."""
    atexit.register(gc.freeze)


#: Where `_Parser` names, in the namespace it fills, the parser that did not know an argument.
_REFUSED_BY = "_refused_by"


class _Parser(argparse.ArgumentParser):
    """A parser that names itself in what it parses when an argument is unknown to it. argparse
    hands a subcommand's unknown arguments up to the top-level parser, whose usage is not the one
    to show (`upgrade-bot snapshot --bogus`); the innermost parser that did not know one names
    itself first, and `main` reports with its usage. Its subcommands' parsers are of this class
    too (argparse makes them of their parent's)."""

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads: one signature is enough here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown and not hasattr(parsed, _REFUSED_BY):
            setattr(parsed, _REFUSED_BY, self)
        return parsed, unknown


def parser_for(verb: str | None) -> tuple[argparse.ArgumentParser, Handler | None]:
    """The top-level parser, with `verb`'s own parser and handler when it is one of `VERBS`; the
    others are only their names and `--help`'s line, enough to list them and to refuse a typo."""
    parser = _Parser(
        prog="upgrade-bot",
        description="Run Kubernetes upgrades with your team in Slack.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"upgrade-bot {__version__}")
    # Not required here: `main` says so after an unknown flag is named (argparse checks a required
    # subcommand first, and `upgrade-bot --bogus` would be told a COMMAND is missing).
    # Its parsers are `_Parser`s, which a verb's `register` adds to as `argparse.ArgumentParser`s.
    subparsers = cast(Subparsers, parser.add_subparsers(dest="command", metavar="COMMAND"))
    handler = None
    for name, line in VERBS.items():
        if name == verb or verb == EVERY_VERB:
            registered = cast(Verb, _module(name)).register(subparsers)
            handler = registered if name == verb else handler
        else:
            subparsers.add_parser(name, help=line)
    return parser, handler


#: `parser_for(EVERY_VERB)`: every verb's own parser (no handler), for the command reference.
EVERY_VERB = "*"


def full_parser() -> argparse.ArgumentParser:
    """The top-level parser with every verb's arguments: what `scripts/gen_docs.py` documents."""
    return parser_for(EVERY_VERB)[0]


def own_parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """The parser of each command that parses its own arguments, by its words (`OWN_PARSERS`),
    shortest first: what the completion script completes after those words."""
    return {
        words: cast(OwnParser, _module(name)).parser()
        for words, name in sorted(OWN_PARSERS.items(), key=lambda item: len(item[0]))
    }


def _module(name: str) -> object:
    """A verb's module, imported now: the one place the terminal imports lazily (`rehearse-fleet`
    is `rehearse_fleet.py`)."""
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
