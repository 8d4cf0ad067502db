"""Patterns from outside as data: every rule pattern is compiled here, matched on bounded text, and
matching as a whole runs on a wall-clock budget.

Why RE2 (PyPI `google-re2`, module `re2`) and not Python's `re`: a rules file is written by a team
and the text it runs on (event messages, log lines, image names) by the cluster's workloads. `re`
backtracks: `(a+)+$` against 34 a's and a "!" takes minutes, holding the interpreter lock the whole
time, so one line in a rules file and one log line froze the bot (no ack, no SIGTERM). RE2 compiles a
pattern to an automaton and matches in time linear in the text (times the pattern's size), with no
backtracking; and it releases the interpreter lock while it matches, so the threads that
acknowledge Slack keep running (`benchmarks/bench_rules.py` measures both). The price is what RE2
cannot do in linear time: backreferences (`\\1`) and lookaround (`(?=`, `(?!`, `(?<=`, `(?<!`), and a
few spellings (`\\Z` is `\\z`). `compile_pattern` refuses those when the rules file is loaded, with
RE2's reason, so `upgrade-bot rules check` names the file and line; nothing falls back to `re`.

Linear is not free, so two more bounds hold: `search` looks at most `MAX_TEXT_CHARS` characters of a
text (the start of a message, the end of a log tail), and `MatchBudget` is the time one run of the
rules (a check, a diagnose, one summary of a watch) may spend matching; the engine asks it between
matches and stops when it is spent, and the run says so instead of hanging.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import re2

from bot.errors import ConfigError

#: A rule's pattern is a line or two; longer ones are mistakes (and cost matching time).
MAX_PATTERN_CHARS = 500
#: The most characters of one text a pattern looks at: the first of a message or an image, the
#: last of a log tail. RE2 is linear, so this (with `MAX_PROGRAM_SIZE`) bounds one search: most
#: patterns take well under 20 ms here, the worst `bench_rules.py` knows about 0.6 s.
MAX_TEXT_CHARS = 64 * 1024
#: The largest RE2 program a rule may compile to (instructions; a rule's pattern is a few dozen,
#: `.{0,400}` is 2,800). Bigger ones are still linear, but when RE2's DFA outgrows its memory it
#: falls back to its NFA, whose cost per character grows with the program: the worst measured here,
#: `(?:a{0,100}){10}b` (2,005 instructions), takes about 0.6 s on 64 KiB of a's once it has; a
#: 18,000-instruction pattern would take several seconds per search.
MAX_PROGRAM_SIZE = 3000
#: What one run of the rules may spend matching, in seconds.
DEFAULT_BUDGET_SECONDS = 10.0


_CUT = "…"


class PatternError(ConfigError):
    """A pattern RE2 will not compile; the message says why (without the pattern)."""


def _options() -> Any:
    options = re2.Options()
    # RE2 would also write each refusal to stderr through absl logging; the caller reports it.
    options.log_errors = False
    return options


_OPTIONS = _options()

#: Hints for what RE2 refuses that a Python regex allows.
_HINTS = (
    ("invalid escape sequence: \\1", "backreferences are not supported (they need backtracking)"),
    ("invalid escape sequence: \\2", "backreferences are not supported (they need backtracking)"),
    ("invalid perl operator: (?=", "lookahead is not supported (it needs backtracking)"),
    ("invalid perl operator: (?!", "lookahead is not supported (it needs backtracking)"),
    ("invalid perl operator: (?<", "lookbehind is not supported (it needs backtracking)"),
    ("invalid escape sequence: \\Z", "write \\z for the end of the text"),
)


@dataclass(frozen=True, slots=True)
class Found:
    """Where a pattern matched: `text` is the (bounded) text it searched; `groups` the named
    groups (`(?P<field>…)`) that took part in the match, as `upgrade-bot rules test` shows them."""

    text: str
    start: int
    end: int
    groups: Mapping[str, str] = field(default_factory=dict)

    @property
    def line_start(self) -> int:
        """Where the line that holds the match begins in `text`."""
        return self.text.rfind("\n", 0, self.start) + 1

    @property
    def line(self) -> str:
        """The whole line that holds the match (a log's line, as evidence shows it)."""
        end = self.text.find("\n", self.end)
        return self.text[self.line_start : end if end >= 0 else len(self.text)]


@dataclass(frozen=True, eq=False)
class SafePattern:
    """A rule's pattern compiled by RE2; `^`/`$` match at line ends (multi-line), `.` not a newline."""

    pattern: str
    _compiled: Any = field(repr=False)

    def search(self, text: str, *, keep_end: bool = False) -> Found | None:
        """The first match in `text`, or None; only `MAX_TEXT_CHARS` of it are looked at: the first
        ones, or the last ones with `keep_end` (a log tail's newest lines)."""
        if len(text) > MAX_TEXT_CHARS:
            # The mark where the text was cut keeps `$` (or `^`) from matching at the cut.
            text = _CUT + text[-MAX_TEXT_CHARS:] if keep_end else text[:MAX_TEXT_CHARS] + _CUT
        found = self._compiled.search(text)
        if found is None:
            return None
        start, end = found.span()
        groups = {k: v for k, v in found.groupdict().items() if v is not None} if self._named else {}
        return Found(text=text, start=start, end=end, groups=groups)

    @property
    def _named(self) -> bool:
        return bool(self._compiled.groupindex)


def compile_pattern(text: str) -> SafePattern:
    """`text` compiled for matching untrusted text in linear time; PatternError says why not."""
    if len(text) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern longer than {MAX_PATTERN_CHARS} characters is not a sensible rule")
    try:
        compiled = re2.compile("(?m)" + text, _OPTIONS)
    except re2.error as exc:
        raise PatternError(_reason(exc, text)) from None
    size = compiled._regexp.ProgramSize()
    if size > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"too complex for a rule: RE2 compiles it to {size} instructions (at most {MAX_PROGRAM_SIZE};"
            " each copy of a bounded repetition like {1,500} counts)"
        )
    return SafePattern(pattern=text, _compiled=compiled)


def _reason(exc: Exception, text: str) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    reason = reason.replace("(?m)" + text, text)
    for prefix, hint in _HINTS:
        if reason.startswith(prefix):
            return f"{reason} — {hint}"
    return reason


class MatchBudget:
    """The wall-clock time one run of the rules may spend matching, spread over its calls.

    Only time inside `running()` counts (a check that reads a large cluster for a minute matches for
    a fraction of it). The engine asks `left()` between matches; once the budget is spent it stops
    matching pattern rules and records which rules it cut short (`cut`), and the run reports
    `describe()`. One search is bounded by `MAX_TEXT_CHARS`, so a run overshoots by at most one.
    """

    def __init__(self, seconds: float = DEFAULT_BUDGET_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self._spent = 0.0
        self._since: float | None = None
        self.cut: set[str] = set()

    @contextmanager
    def running(self) -> Iterator[MatchBudget]:
        outer = self._since is None
        if outer:
            self._since = self._clock()
        try:
            yield self
        finally:
            if outer and self._since is not None:
                self._spent += self._clock() - self._since
                self._since = None

    @property
    def spent(self) -> float:
        running = self._clock() - self._since if self._since is not None else 0.0
        return self._spent + running

    def left(self) -> bool:
        return self.spent < self.seconds

    @property
    def exhausted(self) -> bool:
        return bool(self.cut)

    def describe(self) -> str:
        """What the run reports when the budget ran out ("" when it did not)."""
        if not self.cut:
            return ""
        rules = ", ".join(sorted(self.cut))
        return (
            f"known-issue rules stopped matching after their {self.seconds:g} s budget: "
            f"{rules} did not look at every pod or event (findings may be missing)"
        )
