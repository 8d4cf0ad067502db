"""Rendering replies from template files: one sandboxed Jinja2 environment for the whole bot.

Slack's mrkdwn needs only `&`, `<` and `>` escaped, so HTML autoescaping is off (it would show
`&#39;` to readers) and a `finalize` hook escapes every value a template prints instead, unless the
value is already Slack markup (`Markup`, as the mention and date helpers return). A template that
names a variable its context lacks fails loudly (StrictUndefined) with the file and line, never a
half-rendered post.

A reply named `NAME` renders `NAME.txt.j2` (mrkdwn text, also what the terminal prints) and, when
present, `NAME.blocks.json.j2` (Block Kit JSON). Files in the team's templates directory override
built-ins of the same name.

Team templates are untrusted code, so the sandbox bounds their work as well as what they may touch
(`BoundedEnvironment`; one instance per search path, shared by replies and announcements):

- time: each file renders within `MAX_RENDER_SECONDS` of its thread's CPU time (1 s; a real reply
  takes milliseconds). CPU time, not the clock: a runaway loop burns it, while a thread waiting
  for a busy or CPU-throttled machine does not, so a loaded pod never drops an announcement. Nor
  does the garbage collector's time: a full collection of a large process runs in whichever thread
  allocated last and can take longer than the bound itself, and it is not the template's work
  (`_collecting`). The deadline is checked at every loop iteration, call, operator, attribute and
  output chunk (the CPU clock is read only once the wall clock says the budget could be spent,
  `_Budget`): no signals or threads, so it is safe in any worker thread;
- output: at most `MAX_OUTPUT` characters (200,000) per file; Slack takes 40,000 of text and about
  12,000 of blocks, so anything past this is a mistake;
- values: a string or list a template builds weighs at most `MAX_SIZE` characters (200,000), and
  size is predicted *before* building it where the size is a product (`*`, `+`, `~`, `%` and
  `format` widths, `replace`, `join`, `indent`, `wordwrap`); `range()` yields at most `MAX_RANGE`
  (10,000) numbers; a number argument to a string method or filter is at most `MAX_SIZE`; an integer
  has at most `MAX_INT_BITS` (4,096) bits; `lipsum()` makes at most 5 paragraphs of 100 words;
- no mutation: the immutable sandbox refuses `append`, `update`, `pop`… (a list appended to in its
  own loop would never end);
- recursion: a macro or include that calls itself stops at Python's own recursion limit (left
  unchanged) and is reported as such.

Output captured outside the stream (`{% set x %}…{% endset %}`, a macro's body) is bounded by the
deadline rather than by the output cap. Every failure becomes one `TemplateError` whose message is
`FILE:LINE: reason`, naming the included file when the error is inside an include, and the
including file and line when the include itself is missing.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import re
import string
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, cast
from zoneinfo import ZoneInfo

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum
from markupsafe import Markup

from bot.adapters.blockkit import fit_text, safe_cut
from bot.core.people import CHANNEL_ID, GROUP_ID, USER_ID
from bot.core.safetext import BIDI_CONTROLS as BIDI_CONTROLS  # re-exported for its callers
from bot.core.safetext import inert as inert
from bot.errors import TemplateError


@dataclass(frozen=True, kw_only=True)
class Rendered:
    text: str
    blocks: list[dict[str, Any]] | None = None


def slack_escape(value: object) -> str:
    """`inert(value)`: what every value a template prints goes through (the finalize hook)."""
    return inert(value)


def _finalize(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, bool | int | float):
        return value
    return inert(value)


# Only well-formed IDs become mentions: anything else (a terminal user, a typo, text that tries to
# smuggle `<!channel>` in) is shown as escaped text, so it can never ping anyone.


def mention(entry: str) -> Markup:
    """`U…`/`W…` → a user mention, `S…` → a user-group mention; anything else → escaped text."""
    entry = str(entry)
    if GROUP_ID.match(entry):
        return Markup(f"<!subteam^{entry}>")
    if USER_ID.match(entry):
        return Markup(f"<@{entry}>")
    return Markup(slack_escape(entry))


def subteam(group_id: str) -> Markup:
    """A user-group mention `<!subteam^S…>` (escaped text if it is not a group ID)."""
    group_id = str(group_id)
    return Markup(f"<!subteam^{group_id}>") if GROUP_ID.match(group_id) else Markup(slack_escape(group_id))


def mentions(entries: Iterable[str] | None, empty: str = "nobody") -> Markup:
    """A roster role's people and groups as mentions, comma-separated (`empty` when none)."""
    items = [mention(e) for e in entries or ()]
    return Markup(", ".join(items)) if items else Markup(slack_escape(empty))


def channel(channel_id: str) -> Markup:
    channel_id = str(channel_id)
    return Markup(f"<#{channel_id}>") if CHANNEL_ID.match(channel_id) else Markup(slack_escape(channel_id))


def slack_date(moment: datetime, zone: str = "UTC", fmt: str = "{date_short_pretty} {time}") -> Markup:
    """A Slack date token: each reader sees their own zone; the fallback names the plan's zone."""
    fallback = moment.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M {zone}")
    return Markup(f"<!date^{int(moment.timestamp())}^{fmt}|{slack_escape(fallback)}>")


def when(moment: datetime, zone: str = "UTC", fmt: str = "{date_short_pretty} {time}") -> Markup:
    """A Slack date token whose text fallback shows the plan's zone and UTC.

    Slack renders the token in each reader's own zone (a Tokyo window read in Berlin shows Berlin
    time); clients that cannot render tokens, notifications and the terminal show the fallback:
    `2026-12-01 14:00 Asia/Tokyo (05:00 UTC)`, with the UTC date too when it differs.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a time shown to readers must be timezone-aware")
    local = moment.astimezone(ZoneInfo(zone))
    utc = moment.astimezone(ZoneInfo("UTC"))
    fallback = f"{local:%Y-%m-%d %H:%M} {zone}"
    if zone != "UTC":
        fallback += f" ({utc:%H:%M} UTC)" if utc.date() == local.date() else f" ({utc:%Y-%m-%d %H:%M} UTC)"
    # The token's `^` and `|` separators never occur in the fallback: it is digits, a zone and UTC.
    return Markup(f"<!date^{int(moment.timestamp())}^{fmt}|{slack_escape(fallback)}>")


#: A window at least this long shows its end's date as well as its time.
_LONG_WINDOW = timedelta(hours=12)


def until(end: datetime, start: datetime, zone: str = "UTC") -> Markup:
    """A window's end after its start (`when`): the time alone when the window is short and ends on
    the day it starts in `zone`, else with its date ("Mar 29 09:00 – 09:00" was a 3-day window,
    and 23:00 – 02:00 hid the next day)."""
    local = ZoneInfo(zone)
    same_day = end.astimezone(local).date() == start.astimezone(local).date()
    short = end.astimezone(UTC) - start.astimezone(UTC) < _LONG_WINDOW
    return when(end, zone, "{time}" if same_day and short else "{date_short_pretty} {time}")


_URL = re.compile(r"^https?://[^\s<>|]+$")


def link(item: object, title: str | None = None) -> Markup:
    """`<https://…|title>` for an http(s) URL; anything else is shown as escaped text, not a link.

    `item` is a URL string or an object with `url` and `title` (a plan's links).
    """
    url = str(getattr(item, "url", None) or (item.get("url") if isinstance(item, Mapping) else item))
    if title is None:
        title = getattr(item, "title", None) or (item.get("title") if isinstance(item, Mapping) else None)
    # A title already escaped (clipped: Markup) is not escaped twice ("&amp;gt;" shown as "&gt;").
    label = (title if isinstance(title, Markup) else slack_escape(str(title or url))).replace("|", "¦")
    if not _URL.match(url):
        return Markup(label if title else slack_escape(url))
    return Markup(f"<{slack_escape(url)}|{label}>")


def clip(value: object, limit: int) -> Markup:
    """Escape `value` for Slack and cut it to `limit` characters (with "…"), never inside an
    `&amp;`, an emoji code or a code span (`bot.adapters.blockkit.safe_cut`).

    Block Kit refuses a section over 3,000 characters; text from users (a plan's impact) is clipped
    so a long paragraph cannot make the whole announcement fail.
    """
    return Markup(safe_cut(slack_escape(value), max(int(limit), 1)))


#: A Slack user id inside text the bot wrote ("rejected by U0SHADOW", "skipped by U1+U2"): a U or
#: W, then at least six capitals and digits, one of them a digit (so "UTC" or "UPGRADES" is not).
_USER_IN_TEXT = re.compile(r"\b[UW](?=[A-Z0-9]*[0-9])[A-Z0-9]{6,}\b")
#: A mention already made (left as it is), or a user id in the text (made one).
_USER_OR_TYPED = re.compile(r"<[@#!][^<>\s]+>|" + _USER_IN_TEXT.pattern)


def people(text: object, of: Mapping[str, Iterable[str]] | None = None) -> Markup:
    """Text the bot wrote that names people by id (a step's note: "skipped by U1+U2: …"), escaped
    (or as it is, when already Markup: `clip`'s), with each id as a mention, which Slack shows as
    the person's name — and the mentions people typed in it (`typed`). For a card (an edit pings
    nobody) and the run's thread lines in the bot's words about people who took part ("failed:
    reported failed by U1"), not for a post that should not ping. `of` (a run's roster): only its
    people's ids, for a line that also carries what a person typed ("Run paused: …"), where a word
    shaped like an id ("USWEST2") is not one."""
    escaped = typed(text)
    known = None if of is None else {p for entries in of.values() for p in entries}

    def named(m: re.Match[str]) -> str:
        return m[0] if m[0].startswith("<") or (known is not None and m[0] not in known) else f"<@{m[0]}>"

    shown = _USER_OR_TYPED.sub(named, str(escaped))
    return Markup(re.sub(r"(?<=>)\+(?=<@)", " and ", shown))


def inert_naming(text: object, people: Iterable[str]) -> str:
    """`inert(text)`, but for the bot's own mentions `<@ID>` of `people` (who answered a job's
    question), which stay mentions, and their ids the bot wrote bare ("asked by U0PRIMARY", as the
    audit keeps it), which become mentions: any other `<…>` in it (a pod's name, a person's
    reason) is shown as text."""
    shown = inert(text)
    for person in dict.fromkeys(people):
        if USER_ID.match(person):
            shown = shown.replace(inert(f"<@{person}>"), f"<@{person}>")
            # Not inside a mention (`@` before it), whether the bot's or one people typed (inert).
            shown = re.sub(rf"(?<![@\w]){re.escape(person)}\b", f"<@{person}>", shown)
    return shown


def typed(text: object) -> Markup:
    """People's own words (a note, a reason) escaped (or as they are, when already Markup:
    `clip`'s), but for the mentions they typed — a person `<@U…>`, a channel `<#C…>`, a user
    group `<!subteam^S…>` — which stay mentions, as in a message of their own. `<!channel>`,
    `<!here>` and links stay text."""
    escaped = text if isinstance(text, Markup) else Markup(slack_escape(text))
    return Markup(_TYPED.sub(lambda m: f"<{m[1]}>", str(escaped)))


#: A mention people typed, as `slack_escape` left it.
_TYPED = re.compile(r"&lt;(@[UW][A-Z0-9]{2,}|#C[A-Z0-9]{2,}|!subteam\^S[A-Z0-9]{2,})&gt;")


def fit(text: object, limit: int, keep: str = "start", more: str = "…and {n} more") -> Markup:
    """Rendered text (already Slack markup) within `limit` characters, by whole lines: the
    lines left out are counted ("…and 3 more"), and nothing is cut inside an emoji code, a
    mention, a date token or a code span (`bot.adapters.blockkit.fit_text`). Not for raw values
    from users: those go through `clip`, which escapes them."""
    return Markup(fit_text(str(text), int(limit), keep=keep, more=more))


def utc_text(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S UTC")


# ---------------------------------------------------------------------------------------------
# Bounds on a template's work (see the module docstring)

MAX_RENDER_SECONDS = 1.0
MAX_OUTPUT = 200_000
MAX_SIZE = 200_000
MAX_RANGE = 10_000
MAX_INT_BITS = 4_096
MAX_LIPSUM_PARAGRAPHS = 5
MAX_LIPSUM_WORDS = 100

log = logging.getLogger(__name__)


class LimitExceeded(jinja2.TemplateRuntimeError):
    """A template asked for more work than a reply may take; the message is the reason."""


class _Budget:
    """The time budget of the render running in this thread: its deadline in `_work_time`, and
    where that clock stood when last read, with the monotonic clock then. A thread's CPU time
    grows no faster than the clock on the wall, so while less wall time has passed since that
    reading than the budget had left, the deadline cannot have passed and the CPU clock (a system
    call, ten times the wall clock's price) is not read: a card's render checks its time at
    thousands of operations, and reading it at each was a few percent of a rehearsal's CPU."""

    __slots__ = ("deadline", "read", "read_at")

    def __init__(self, seconds: float) -> None:
        self.read = _work_time()
        self.read_at = time.monotonic()
        self.deadline = self.read + seconds


#: The budget of the render running in this thread (None outside a render: only sizes are bounded).
_deadline: ContextVar[_Budget | None] = ContextVar("template_deadline", default=None)


class _Collecting(threading.local):
    """The CPU time each thread has spent in the garbage collector while renders ran
    (`gc.callbacks` run in the thread that collects, between its "start" and "stop")."""

    started: float | None = None
    seconds: float = 0.0


_collecting = _Collecting()


def _on_collect(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _collecting.started = time.thread_time()
    elif _collecting.started is not None:
        _collecting.seconds += time.thread_time() - _collecting.started
        _collecting.started = None


class _Timing:
    """`_on_collect` is a callback only while a render runs: every collection calls it, the young
    generation's many times a second when a process allocates, and a snapshot or a burst of
    watch events should not pay for a clock no render reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renders = 0

    def __enter__(self) -> None:
        with self._lock:
            if self._renders == 0:
                gc.callbacks.append(_on_collect)
            self._renders += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._renders -= 1
            if self._renders == 0:
                gc.callbacks.remove(_on_collect)


_timing = _Timing()


def _work_time() -> float:
    """This thread's CPU time less what it spent collecting garbage."""
    return time.thread_time() - _collecting.seconds


def _tick() -> None:
    budget = _deadline.get()
    if budget is None:
        return
    now = time.monotonic()
    if now - budget.read_at < budget.deadline - budget.read:
        return  # too little time has passed to have spent the budget left at the last reading
    budget.read, budget.read_at = _work_time(), now
    if budget.read > budget.deadline:
        raise LimitExceeded(
            f"rendering took longer than {MAX_RENDER_SECONDS:g} s (a loop or recursion too large?)"
        )


def _weight(value: object, limit: int = MAX_SIZE, depth: int = 0) -> int:
    """About how many characters `value` prints as; counting stops just past `limit`."""
    if isinstance(value, str | bytes):
        return len(value)
    items: Iterable[object]
    if isinstance(value, Mapping):
        items = (part for pair in value.items() for part in pair)
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        return 1
    total = len(value)
    if depth > 20:
        return total
    for item in items:
        total += _weight(item, limit, depth + 1)
        if total > limit:
            break
    return total


def _too_big(value: object, size: int) -> NoReturn:
    kind = "a string" if isinstance(value, str | bytes) else "a list"
    raise LimitExceeded(f"builds {kind} of {size:,} characters (at most {MAX_SIZE:,})")


def _checked(value: Any) -> Any:
    """`value`, unless it is bigger than a template may build."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise LimitExceeded(f"builds a number of more than {MAX_INT_BITS:,} bits")
    size = _weight(value)
    if size > MAX_SIZE:
        _too_big(value, size)
    return value


def _check_number_arguments(args: Iterable[object]) -> None:
    # A width, count or size argument is what turns a short string into a huge one.
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and arg > MAX_SIZE:
            raise LimitExceeded(f"a number argument of {arg:,} (at most {MAX_SIZE:,})")


def _check_width(width: str | None) -> int:
    if width is None or width == "":
        return 0
    if width == "*":
        raise LimitExceeded("a format width taken from an argument (`*`) is not allowed")
    if int(width) > MAX_SIZE:
        raise LimitExceeded(f"a format width of {int(width):,} (at most {MAX_SIZE:,})")
    return int(width)


_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def _arguments_of(args: object) -> list[object]:
    if isinstance(args, tuple):
        return list(args)
    if isinstance(args, Mapping):
        return list(args.values())
    return [args]


def _check_percent(text: str, args: object) -> None:
    """`text % args` stays within MAX_SIZE: widths are bounded and every field is counted."""
    fields = 0
    size = len(text)
    for match in _PERCENT.finditer(text):
        size += _check_width(match.group(1)) + _check_width(match.group(2))
        fields += match.group(3) != "%"
    size += fields * max((_weight(a) for a in _arguments_of(args)), default=0)
    if size > MAX_SIZE:
        _too_big(text, size)


def _check_format(text: str, args: Sequence[object], kwargs: Mapping[str, object]) -> None:
    """`text.format(...)` stays within MAX_SIZE: widths are bounded and every field is counted."""
    values = [*args, *kwargs.values()]
    values += [v for a in args if isinstance(a, Mapping) for v in a.values()]
    biggest = max((_weight(v) for v in values), default=0)
    size = 0
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return  # the real call reports the malformed format
    for literal, field_name, spec, _conversion in parsed:
        size += len(literal)
        if field_name is None:
            continue
        if spec and "{" in spec:
            raise LimitExceeded("a format width taken from an argument is not allowed")
        widths = re.findall(r"\d+", spec or "")
        size += biggest + sum(_check_width(w) for w in widths)
    if size > MAX_SIZE:
        _too_big(text, size)


def _check_replace(text: str, old: object, new: object, count: object = -1) -> None:
    if not isinstance(old, str) or not isinstance(new, str):
        return
    times = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    size = len(text) + times * max(len(new) - len(old), 0)
    if size > MAX_SIZE:
        _too_big(text, size)


def _check_join(items: Sequence[object], separator: object) -> None:
    size = _weight(list(items)) + len(items) * len(str(separator))
    if size > MAX_SIZE:
        _too_big("", size)


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise LimitExceeded(f"builds a number of more than {MAX_INT_BITS:,} bits")
            return
        sequence, times = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(sequence, str | bytes | list | tuple) and isinstance(times, int):
            size = _weight(sequence) * max(times, 0)
            if size > MAX_SIZE:
                _too_big(sequence, size)
    elif operator == "+":
        both = (str, bytes, list, tuple)
        if isinstance(left, both) and isinstance(right, both):
            size = _weight(left) + _weight(right)
            if size > MAX_SIZE:
                _too_big(left, size)
    elif operator == "**":
        # 0 and ±1 stay small whatever the exponent; a float overflows with its own error.
        ints = isinstance(left, int) and isinstance(right, int) and abs(left) > 1
        if ints and abs(left).bit_length() * right > MAX_INT_BITS:
            raise LimitExceeded(f"builds a number of more than {MAX_INT_BITS:,} bits")
    elif operator == "%" and isinstance(left, str):
        _check_percent(left, right)


_STR_TYPES = (str, bytes)


def _check_method_call(method: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Predict the size of a built-in string method's result; the (possibly listed) arguments."""
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, str | bytes | list | tuple | dict):
        return args
    _check_number_arguments(args)
    name = getattr(method, "__name__", "")
    if isinstance(owner, str) and name == "replace" and len(args) >= 2:
        _check_replace(owner, *args[:3])
    elif isinstance(owner, str) and name == "join" and args:
        items = list(args[0])
        _tick()
        _check_join(items, owner)
        return (items, *args[1:])
    elif isinstance(owner, str) and name == "expandtabs":
        tab = args[0] if args and isinstance(args[0], int) else 8
        size = len(owner) + owner.count("\t") * max(tab, 0)
        if size > MAX_SIZE:
            _too_big(owner, size)
    elif isinstance(owner, str) and name == "translate" and args and isinstance(args[0], Mapping):
        size = len(owner) * max((_weight(v) for v in args[0].values()), default=1)
        if size > MAX_SIZE:
            _too_big(owner, size)
    return args


def _check_filter(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Predict the size of a filter's result where it is a product of its inputs."""
    _check_number_arguments([*args, *kwargs.values()])
    if name == "replace" and len(args) >= 2:
        _check_replace(str(value), *args[:3])
    elif name == "join" and isinstance(value, list):
        _check_join(value, args[0] if args else kwargs.get("d", ""))
    elif name == "indent":
        width = args[0] if args else kwargs.get("width", 4)
        pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 4
        text = str(value)
        size = len(text) + (text.count("\n") + 1) * max(pad, 0)
        if size > MAX_SIZE:
            _too_big(text, size)
    elif name == "format":
        _check_percent(str(value), kwargs or args)
    elif name == "wordwrap":
        width = args[0] if args else kwargs.get("width", 79)
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring", "\n")
        text = str(value)
        breaks = len(text) // max(width if isinstance(width, int) else 79, 1) + 1
        size = len(text) + breaks * len(str(wrap or "\n"))
        if size > MAX_SIZE:
            _too_big(text, size)


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    # Filters are called directly by compiled templates, never through the sandbox's `call`.
    passes_first = getattr(func, "jinja_pass_arg", None) is not None
    at = 1 if passes_first else 0

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        if name == "join" and len(args) > at and not isinstance(args[at], list | str):
            args = (*args[:at], list(args[at]), *args[at + 1 :])
        if len(args) > at:
            _check_filter(name, args[at], args[at + 1 :], kwargs)
        return _checked(func(*args, **kwargs))

    return bounded


def _bounded_range(*args: int) -> range:
    numbers = range(*args)
    # len() of a range past sys.maxsize raises OverflowError: count it with Python ints instead.
    step, span = numbers.step, numbers.stop - numbers.start
    count = max(0, (span + step - (1 if step > 0 else -1)) // step)
    if count > MAX_RANGE:
        raise LimitExceeded(f"range() of {count:,} items (at most {MAX_RANGE:,})")
    return numbers


def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    if n > MAX_LIPSUM_PARAGRAPHS:
        raise LimitExceeded(f"lipsum() of {n:,} paragraphs (at most {MAX_LIPSUM_PARAGRAPHS})")
    if min > MAX_LIPSUM_WORDS or max > MAX_LIPSUM_WORDS:
        raise LimitExceeded(f"lipsum() of more than {MAX_LIPSUM_WORDS} words a paragraph")
    return generate_lorem_ipsum(n, html, min, max)


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles loops and `~` so that the sandbox sees them: neither is an intercepted operation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The iterables of `{% for %}` loops; Jinja allows no custom node types, so they are
        # recognised by identity when the loop's code visits them.
        self._loop_iterables: set[int] = set()

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if id(node) not in self._loop_iterables:
            return super().visit(node, *args, **kwargs)
        self.write("environment.bounded_iter(")
        result = super().visit(node, *args, **kwargs)
        self.write(")")
        return result

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        self._loop_iterables.add(id(node.iter))
        super().visit_For(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox, bounded in time and size (see the module docstring)."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _bounded_range
        self.globals["lipsum"] = _bounded_lipsum
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}

    def bounded_iter(self, iterable: Any) -> Iterator[Any]:
        iterator = iter(iterable)  # now, so that an undefined iterable fails on its own line

        def ticking() -> Iterator[Any]:
            for item in iterator:
                _tick()
                yield item

        return ticking()

    def bounded_concat(self, values: tuple[Any, ...]) -> str:
        parts = [str(v) for v in values]
        size = sum(len(p) for p in parts)
        if size > MAX_SIZE:
            _too_big("", size)
        return "".join(parts)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        _check_binop(operator, left, right)
        return _checked(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        args = _check_method_call(__obj, args)
        return _checked(super().call(__context, __obj, *args, **kwargs))

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text: str = value.__self__
        is_map = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            _check_format(text, args, kwargs if not is_map else {})
            return str(_checked(wrapped(*args, **kwargs)))

        return bounded


@functools.lru_cache(maxsize=32)
def _environment(template_dirs: tuple[str, ...]) -> BoundedEnvironment:
    """The one environment of a search path: its compiled templates are shared by every renderer
    of that path (Jinja's environment is safe to render from several threads, and reloads a file
    that changed on disk)."""
    env = BoundedEnvironment(
        loader=jinja2.FileSystemLoader(list(template_dirs)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters.update(
        mention=mention,
        mentions=mentions,
        subteam=subteam,
        channel=channel,
        slack_date=slack_date,
        when=when,
        until=until,
        clip=clip,
        people=people,
        typed=typed,
        fit=fit,
        link=link,
        utc=utc_text,
        # Block Kit templates embed values as JSON strings, escaped for mrkdwn first.
        slack=slack_escape,
    )
    env.globals.update(mention=mention, subteam=subteam, channel=channel)
    return env


class Renderer:
    """Renders reply templates from a search path (team overrides first)."""

    def __init__(self, template_dirs: Sequence[Path]) -> None:
        self.env = _environment(tuple(str(d) for d in template_dirs))

    def warm(self) -> int:
        """Compile every template of the search path now, rather than in the first reply that
        needs it (a served bot calls this as it starts: 76 built-in templates take about 0.4 s,
        which would otherwise come due all at once when the first events of many watches do).
        A file that does not compile is left for its render to report. How many compiled."""
        compiled = 0
        for name in self.env.list_templates(filter_func=lambda n: n.endswith(".j2")):
            try:
                self.env.get_template(name)
            except jinja2.TemplateError:
                continue
            compiled += 1
        return compiled

    def exists(self, name: str) -> bool:
        try:
            self.env.get_template(name)
        except jinja2.TemplateNotFound:
            return False
        except jinja2.TemplateError:
            return True
        return True

    def path_of(self, name: str) -> str:
        """The file `name` resolves to (its name when it cannot be loaded)."""
        try:
            return self.env.get_template(name).filename or name
        except jinja2.TemplateError:
            return name

    def render_file(self, name: str, context: Mapping[str, Any]) -> str:
        """`name` rendered within the bounds, or TemplateError `FILE:LINE: reason`."""
        try:
            template = self.env.get_template(name)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"{name}: template not found") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                _where(exc.filename or name, exc.lineno, exc.message or "syntax error")
            ) from None
        top = template.filename or name
        try:
            return _render_bounded(template, context)
        except jinja2.TemplateSyntaxError as exc:
            # An included file that does not parse: its own file and line.
            raise TemplateError(
                _where(exc.filename or exc.name or top, exc.lineno, exc.message or "syntax error")
            ) from None
        except jinja2.TemplateNotFound as exc:
            # Raised by the `{% include %}` (or extends/import): blame the file that names it.
            names = ", ".join(str(t) for t in exc.templates) or str(exc.name)
            raise TemplateError(
                _where(*_innermost(exc, top), f"includes {names}, which does not exist")
            ) from None
        except RecursionError as exc:
            raise TemplateError(
                _where(*_recurring(exc, top), "nested too deeply (a macro or include that calls itself?)")
            ) from None
        except jinja2.TemplateError as exc:
            raise TemplateError(
                _where(*_innermost(exc, top), _plain(exc.message or type(exc).__name__))
            ) from None
        except Exception as exc:
            # Template code is the team's: `1/0`, `1 + 'a'` and the like are its mistakes, shown
            # with their reason; the traceback goes to the debug log only.
            log.debug("template %s failed", name, exc_info=True)
            raise TemplateError(_where(*_innermost(exc, top), str(exc) or type(exc).__name__)) from None

    def render(self, template: str, context: Mapping[str, Any]) -> Rendered:
        text = self.render_file(f"{template}.txt.j2", context).strip()
        blocks = None
        blocks_name = f"{template}.blocks.json.j2"
        if self.exists(blocks_name):
            raw = self.render_file(blocks_name, context)
            try:
                loaded = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise TemplateError(
                    f"{self.path_of(blocks_name)}: not valid JSON once rendered (its line "
                    f"{exc.lineno}: {exc.msg})"
                ) from None
            blocks = loaded["blocks"] if isinstance(loaded, dict) else loaded
        return Rendered(text=text, blocks=blocks)


def _render_bounded(template: jinja2.Template, context: Mapping[str, Any]) -> str:
    """Render through the stream, counting output and watching the clock between chunks."""
    with _timing:
        token = _deadline.set(_Budget(MAX_RENDER_SECONDS))
        # A generator, not just an iterator: it can be closed, and thrown into.
        stream = cast(Generator[str, None, None], template.generate(**context))
        try:
            chunks: list[str] = []
            size = 0
            for chunk in stream:
                size += len(chunk)
                if size > MAX_OUTPUT:
                    # Thrown in where the template is, so the error carries the template's line.
                    stream.throw(LimitExceeded(f"output longer than {MAX_OUTPUT:,} characters"))
                _tick_stream(stream)
                chunks.append(chunk)
            return "".join(chunks)
        finally:
            stream.close()
            _deadline.reset(token)


def _tick_stream(stream: Generator[str, None, None]) -> None:
    try:
        _tick()
    except LimitExceeded as exc:
        stream.throw(exc)


def _where(filename: str, line: int | None, reason: str) -> str:
    reason = " ".join(str(reason).split())
    if len(reason) > 300:
        reason = reason[:299] + "…"
    return f"{filename}:{line}: {reason}" if line else f"{filename}: {reason}"


def _template_frames(exc: BaseException) -> list[tuple[str, int | None]]:
    """The template files and lines in a traceback Jinja has rewritten, outermost first.

    Jinja replaces each frame of compiled template code with one whose code is named after the
    template file and whose line is the template's line; those frames carry `__jinja_exception__`.
    """
    frames: list[tuple[str, int | None]] = []
    tb = exc.__traceback__
    while tb is not None:
        if "__jinja_exception__" in tb.tb_frame.f_globals:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def _innermost(exc: BaseException, fallback: str) -> tuple[str, int | None]:
    frames = _template_frames(exc)
    return frames[-1] if frames else (fallback, None)


def _recurring(exc: BaseException, fallback: str) -> tuple[str, int | None]:
    """For runaway recursion, the call that repeats: the file and line seen most often."""
    frames = _template_frames(exc)
    return Counter(frames).most_common(1)[0][0] if frames else (fallback, None)


_OBJECT = re.compile(r"'(?:[A-Za-z_][A-Za-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*) object'")


def _plain(message: str) -> str:
    """A template error without the bot's module paths: "'bot.core….RunInfo object' has no
    attribute 'stepp'" reads "'RunInfo' has no attribute 'stepp'" (the team's template, not ours)."""
    return _OBJECT.sub(lambda m: f"'{m.group(1)}'", message)
