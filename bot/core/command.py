"""The contract between the router and the subcommands in `commands/`.

A subcommand is a function `(CommandContext, Args) -> Reply`; its docstring is its help text and
its arguments are declared on a `CommandParser` that raises `UsageError` instead of exiting. It
never talks to Slack: it returns data and names the template that renders it. Each module in
`commands/` registers its subcommands on the `Registry` it is given.
"""

from __future__ import annotations

import argparse
import difflib
import html
import inspect
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any, NoReturn

from bot.errors import UsageError, clip
from bot.records import FileAttachment

if TYPE_CHECKING:
    from bot.adapters.store import Store
    from bot.core.announcements.service import AnnouncementService
    from bot.core.fleets.service import FleetService
    from bot.core.jobs.service import JobService
    from bot.core.people import Directory
    from bot.core.runs.service import RunService
    from bot.core.snapshots.projection import ClusterReader
    from bot.core.watches.service import WatchService
    from bot.records import ClusterConfig
    from bot.settings import Settings

Args = argparse.Namespace

__all__ = ["FileAttachment"]  # where commands have always found it; it lives in the records leaf


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What a subcommand returns: a template name and its context, not text."""

    template: str
    context: Mapping[str, Any] = field(default_factory=dict)
    ephemeral: bool = True
    files: tuple[FileAttachment, ...] = ()
    #: Post in this channel instead of the one the command came from (non-ephemeral replies only).
    channel: str = ""
    #: The command worked and found something (check: Required findings not waived; diff:
    #: regressions): the terminal's `exec` exits 3 for it, as `upgrade-bot check` and `diff` do.
    found: bool = False


@dataclass(frozen=True, kw_only=True)
class CommandContext:
    """Everything a subcommand may use. Built per request by the router."""

    user_id: str
    channel_id: str
    source: str  # "slack" | "terminal"
    correlation_id: str
    settings: Settings
    store: Store
    registry: Registry
    directory: Directory
    clock: Callable[[], datetime]
    #: Opens a reader on a configured cluster (the kube adapter in production).
    connect_cluster: Callable[[ClusterConfig], ClusterReader]
    #: Upgrade runs (store + card in Slack); None where a front door has none.
    runs: RunService | None = None
    #: Downloads a file shared in Slack (its url_private) with the bot's token; None without Slack.
    fetch_file: Callable[[str], bytes] | None = None
    #: Scheduled announcements (store + Slack); None where a front door has none.
    announcements: AnnouncementService | None = None
    #: Watches of a cluster's rollout status (store + Slack); None where a front door has none.
    watches: WatchService | None = None
    #: Cluster jobs (answers to their questions); None where a front door has none.
    jobs: JobService | None = None
    #: Fleet runs (issue 41); None where a front door has none.
    fleets: FleetService | None = None


Handler = Callable[[CommandContext, Args], Reply]


#: argparse's "argument --for: expected one argument" (or "-f/--for").
_EXPECTED = re.compile(r"argument (\S+): expected (?:one|at least one) argument")


class CommandParser(argparse.ArgumentParser):
    """argparse that raises UsageError (with usage text) instead of printing and exiting.

    Its usage is one line (`synopsis`): argparse wraps long usages at the terminal's width, and a
    line break inside a chat code span shows as a broken command.
    """

    def __init__(self, prog: str, **kwargs: Any) -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False, **kwargs)
        #: The words being parsed, for an error to point at one.
        self._words: list[str] = []

    def format_usage(self) -> str:
        return f"usage: {synopsis(self)}\n"

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """A positional of any number of words (`[OBJECTS …]`) is optional: argparse counts one with
        no default among "the following arguments are required", so `/upgrade waive` alone named
        `objects` as missing beside `finding`."""
        if args and not str(args[0]).startswith("-") and kwargs.get("nargs") == "*":
            kwargs.setdefault("default", [])
        return super().add_argument(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._words = list(args or ())
        parsed, rest = super().parse_known_args(args, namespace)
        # Python 3.11's argparse gives a one-word positional an empty list where `--` stands for
        # it (`handoff shadow -- --`): the word is missing, and said so, not read as a list.
        empty = [
            a.dest
            for a in self._actions
            if not a.option_strings and a.nargs in (None, "?") and getattr(parsed, a.dest, None) == []
        ]
        if empty:
            self.error(f"the following arguments are required: {', '.join(empty)}")
        return parsed, rest

    def error(self, message: str) -> NoReturn:
        raise UsageError(message + self._dash_value(message), usage=self.format_usage().strip())

    def _dash_value(self, message: str) -> str:
        """Why an option "expected one argument" when one was given: argparse reads a value that
        starts with a dash (`--for -1h`) as an option of its own."""
        missing = _EXPECTED.match(message)
        for flag, value in pairwise(self._words):
            if missing and flag in missing.group(1).split("/") and value.startswith("-"):
                return f" (`{clip(value, 40)}` starts with a dash, so it is read as an option, not as {flag}'s value)"
        return ""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or "invalid arguments", usage=self.format_usage().strip())


@dataclass(frozen=True, kw_only=True)
class Subcommand:
    name: str
    handler: Handler
    parser: CommandParser
    #: Roles allowed to run it; empty means anyone in the workspace.
    roles: frozenset[str] = frozenset()
    #: Who may run it, in words, when the handler decides (a run's roster): the reference says so.
    who: str = ""
    #: Sub-verbs (`schedule list|cancel|move`), each with its own usage and help; they take the
    #: parent's roles. The parent's own handler runs when the first word names no verb.
    verbs: dict[str, Subcommand] = field(default_factory=dict)

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.handler) or ""

    @property
    def paragraphs(self) -> list[str]:
        """The docstring's paragraphs, unwrapped (chat wraps text itself), without its examples."""
        return [p for p in unwrap(self.doc) if not p.startswith(EXAMPLE)]

    @property
    def summary(self) -> str:
        """The docstring's first sentence: one line in `/upgrade help`."""
        paragraphs = self.paragraphs
        return first_sentence(paragraphs[0]) if paragraphs else ""

    @property
    def usage(self) -> str:
        """The whole usage on one line: `/upgrade NAME ARGS [--option VALUE]`."""
        return synopsis(self.parser)

    @property
    def short_usage(self) -> str:
        """The usage with its optional options folded into `[options]`, for the list of commands."""
        return synopsis(self.parser, short=True)

    @property
    def arguments(self) -> list[tuple[str, str]]:
        """(how it is written, what it means) for each argument and option, from its parser."""
        return [(_written(a), a.help or "") for a in self.parser._actions if a.help != argparse.SUPPRESS]

    @property
    def examples(self) -> list[str]:
        """The docstring's `Example: `/upgrade …`` lines: commands as someone would type them."""
        return [
            m.group(1)
            for p in unwrap(self.doc)
            if p.startswith(EXAMPLE)
            for m in re.finditer(r"`(/upgrade [^`]+)`", p)
        ]


#: A docstring paragraph that starts with this holds examples (code spans), shown apart in help.
EXAMPLE = "Example:"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def unwrap(doc: str) -> list[str]:
    """A docstring's paragraphs with their line breaks joined; list items stay one per line."""
    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", doc.strip()):
        lines: list[str] = []
        for line in block.splitlines():
            line = line.strip()
            if lines and not re.match(r"^(?:[•*-] |\d+\. |Example:)", line):
                lines[-1] += " " + line
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return [p for p in paragraphs if p]


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.splitlines()[0] if text else "", maxsplit=1)[0]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "|".join(str(c) for c in action.choices)
    return action.dest.upper()


def _written(action: argparse.Action) -> str:
    """How an argument is typed: `RUN`, `PARAMS …`, `--reason TEXT …`, `--dry-run`."""
    word = _metavar(action)
    if action.nargs in ("*", "+"):
        word += " …"
    if not action.option_strings:
        return word
    flag = max(action.option_strings, key=len)
    return flag if action.nargs == 0 else f"{flag} {word}"


def synopsis(parser: argparse.ArgumentParser, *, short: bool = False) -> str:
    """`prog ARG [OPT] [--flag VALUE]` on one line: positionals first, as people type them."""
    if parser.usage:
        return parser.usage.replace("%(prog)s", parser.prog).removeprefix("usage: ")
    parts = [parser.prog]
    folded = False
    actions = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    for action in sorted(actions, key=lambda a: bool(a.option_strings)):
        written = _written(action)
        if action.option_strings:
            if action.required:
                parts.append(written)
            elif short:
                folded = True
            else:
                parts.append(f"[{written}]")
        elif action.nargs in ("?", "*"):
            parts.append(f"[{written}]")
        else:
            parts.append(written)
    if folded:
        parts.append("[options]")
    return " ".join(parts)


def _subcommand(
    what: str,
    name: str,
    handler: Handler,
    arguments: Callable[[CommandParser], None] | None,
    roles: frozenset[str],
    who: str = "",
) -> Subcommand:
    """A subcommand or a verb (`what`, as errors name it) with its own parser, `/upgrade NAME`;
    its handler's docstring is its help, so one without is refused."""
    if not inspect.getdoc(handler):
        raise ValueError(f"{what} has no docstring; the docstring is its help")
    parser = CommandParser(prog=f"/upgrade {name}")
    if arguments is not None:
        arguments(parser)
    return Subcommand(name=name, handler=handler, parser=parser, roles=roles, who=who)


class Registry:
    """Subcommands by name. Passed to each `commands/` module's `register`."""

    def __init__(self) -> None:
        self._commands: dict[str, Subcommand] = {}

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        arguments: Callable[[CommandParser], None] | None = None,
        roles: frozenset[str] | set[str] = frozenset(),
        who: str = "",
    ) -> Subcommand:
        if name in self._commands:
            raise ValueError(f"subcommand {name!r} is registered twice")
        sub = _subcommand(f"subcommand {name!r}", name, handler, arguments, frozenset(roles), who)
        self._commands[name] = sub
        return sub

    def add_verb(
        self,
        parent: str,
        verb: str,
        handler: Handler,
        *,
        arguments: Callable[[CommandParser], None] | None = None,
    ) -> Subcommand:
        """`/upgrade PARENT VERB …`: a sub-verb with its own parser, usage and docstring help."""
        owner = self._commands[parent]
        if verb in owner.verbs:
            raise ValueError(f"verb {parent} {verb!r} is registered twice")
        sub = _subcommand(f"verb {parent} {verb!r}", f"{parent} {verb}", handler, arguments, owner.roles)
        owner.verbs[verb] = sub
        return sub

    def get(self, name: str) -> Subcommand | None:
        return self._commands.get(name)

    def resolve(self, name: str, words: Sequence[str]) -> tuple[Subcommand, list[str]] | None:
        """The subcommand (or its sub-verb named by the first word) and the words left to parse."""
        sub = self._commands.get(name)
        if sub is None:
            return None
        if words and words[0].lower() in sub.verbs:
            return sub.verbs[words[0].lower()], list(words[1:])
        return sub, list(words)

    def names(self) -> list[str]:
        return sorted(self._commands)

    def __iter__(self) -> Iterator[Subcommand]:
        return iter(self._commands[n] for n in self.names())

    def suggest(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)


# ---------------------------------------------------------------------------------------------
# Chat-safe parsing

# Chat clients "improve" what people type: smart quotes, and `--` turned into an en or em dash.
_PUNCTUATION = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u00a0": " ",
    }
)
_DASHES = re.compile(r"[\u2013\u2014](?=\S)")
_SLACK_LINK = re.compile(r"<([@#!][^|>]*)\|[^>]*>")


def normalise(text: str) -> str:
    """Undo chat typography and Slack's escaping so the text parses as typed."""
    text = html.unescape(text.translate(_PUNCTUATION))
    # `—reason` came from `--reason`; a dash standing alone is left as it is.
    text = _DASHES.sub("--", text)
    # `<@U123|alice>` → `<@U123>`: the label is display text, the ID is what we keep.
    text = _SLACK_LINK.sub(lambda m: f"<{m.group(1)}>", text)
    return text.strip()


#: The longest user-given name that becomes a file name (`plans/NAME.yaml`): filesystems allow
#: 255 bytes, and a name this long is a paste gone wrong, not a plan.
MAX_FILE_NAME = 100


def file_name(what: str, name: str) -> str:
    """`name` if it can be a file name's stem; a usage error naming the limit otherwise (checked
    before any file is looked for: the OS's own refusal is "File name too long", a traceback)."""
    if len(name) > MAX_FILE_NAME or len(name.encode("utf-8", "replace")) > 2 * MAX_FILE_NAME:
        raise UsageError(f"{what} too long: at most {MAX_FILE_NAME} characters")
    return name


#: A whole number as people type it: ASCII digits only (`str.isdigit` and `int()` also take "²"
#: or "١٢", which are not what anyone meant), an optional sign, at most 12 digits.
WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,12}", re.ASCII)


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, refused with that range otherwise."""

    def parse(text: str) -> int:
        if not WHOLE_NUMBER.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}")
        return value

    return parse


#: A row's number (a watch, a job, a waiver): ASCII digits only, no sign, no more than 12 of them.
_NUMBER_ID = re.compile(r"[0-9]{1,12}", re.ASCII)


def number_id(text: str) -> int:
    """An argparse type for a row's number: `int` would read "١" (Arabic-Indic one) or "１" as 1,
    so `/upgrade unwatch ١` ended watch 1."""
    if not _NUMBER_ID.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a number (like 3)")
    return int(text)


def split_words(text: str) -> list[str]:
    try:
        return shlex.split(normalise(text))
    except ValueError as exc:  # unbalanced quotes
        raise UsageError(f"could not read the arguments: {exc}") from None


_MENTION = re.compile(r"^<@([UW][A-Z0-9]+)>$|^@?([UW][A-Z0-9]{2,})$")


def parse_user(word: str) -> str:
    """A user given as `<@U123>`, `@U123` or `U123` → `U123`."""
    match = _MENTION.match(word.strip())
    if not match:
        raise UsageError(
            f"{word!r} is not a Slack mention: pick the person from the list Slack shows as you type @ "
            "(it then sends their user id), or give the id itself (U…)"
        )
    return match.group(1) or match.group(2)
