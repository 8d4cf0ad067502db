"""Logging set-up: correlation ids on every record and redaction of secrets.

A correlation id is bound for the duration of one command or action (a context variable, so worker
threads each carry their own) and appears in every log line and in the error shown in chat, which
is how an operator finds the detail behind a short chat message.

With `--log-format json` each line is one JSON object (time, level, logger, message, correlation
id, run id, step, job, replica id, and the traceback if any) for a log collector; the text format
adds `run=… step=… job=…` after the correlation id when they are bound. They are bound through the
logging context, never written into messages by hand: `log_context` (context variables) while a
run service method works on one run (`run_scoped`) or one of its steps, and for the whole life of
a duty's driver thread (a cluster job: its run, step and job; a watch: its run and step), which
runs in a copy of the context of the scan that started it. The replica id is set once per process.

In the text format one record is one line: control characters (newlines, ANSI escape sequences,
C1 controls) and bidirectional overrides in a message, which may carry a user's command text or a
cluster's names, are written as visible escapes (`\n`, `\x1b`, `\u202e`), so a command cannot
forge a log line or send an escape sequence to the terminal that shows the log. A traceback
follows its record as lines indented by four spaces, escaped the same way.

Tokens must never reach a log: the redaction filter removes the configured secret values and
anything shaped like a Slack token, whichever library logged it (slack_sdk logs request headers at
DEBUG).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import logging
import re
import secrets
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

_correlation: contextvars.ContextVar[str] = contextvars.ContextVar("correlation_id", default="-")
_run_id: contextvars.ContextVar[str] = contextvars.ContextVar("run_id", default="-")
_step: contextvars.ContextVar[str] = contextvars.ContextVar("step", default="-")
_job: contextvars.ContextVar[str] = contextvars.ContextVar("job", default="-")
#: This process's name among the replicas (set once by the serving front door).
_replica = {"id": "-"}

# xoxb- (bot), xoxp- (user), xoxa-/xoxr- (legacy), xapp- (app-level), xoxe- (rotation) tokens.
_TOKEN_SHAPE = re.compile(r"\b(xox[abeoprs]|xapp)-[A-Za-z0-9-]+")
_REDACTED = "[redacted]"
#: What a token is replaced by in a message a person reads: its kind stays, so "xoxb-…(redacted)"
#: still tells them which token they pasted where.
_MASKED = r"\1-…(redacted)"


def redact_tokens(text: str) -> str:
    """`text` with every Slack-token-shaped string replaced by `[redacted]`, as the log filter
    does: for what is stored (an audit row's arguments)."""
    return _TOKEN_SHAPE.sub(_REDACTED, text)


def mask_tokens(text: str) -> str:
    """`text` with every Slack-token-shaped string (the shapes the log filter redacts) cut to its
    kind: `xoxb-…(redacted)`. For messages that are printed rather than logged, such as a
    configuration's problems."""
    return _TOKEN_SHAPE.sub(_MASKED, text)


def new_correlation_id() -> str:
    """Short enough to read aloud in a channel, long enough not to collide within a day."""
    return secrets.token_hex(4)


def current_correlation_id() -> str:
    return _correlation.get()


@contextlib.contextmanager
def correlation(cid: str | None = None) -> Iterator[str]:
    """Bind a correlation id for the block (reusing the caller's when given)."""
    cid = cid or new_correlation_id()
    token = _correlation.set(cid)
    try:
        yield cid
    finally:
        _correlation.reset(token)


class CorrelationFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.correlation_id = _correlation.get()
        run_id, step, job = _run_id.get(), _step.get(), _job.get()
        record.run_id = run_id
        record.step = step
        record.job = job
        record.replica_id = _replica["id"]
        record.run_fields = _run_fields(run_id, step, job)
        return True


def _run_fields(run_id: str, step: str, job: str) -> str:
    """` run=r-12 step=drain job=7` for the text format: only what is bound, nothing outside a run."""
    bound = [(n, v) for n, v in (("run", run_id), ("step", step), ("job", job)) if v != "-"]
    return "".join(f" {n}={v}" for n, v in bound)


class RedactingFilter(logging.Filter):
    """Replaces secret values and token-shaped strings in the formatted message."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        super().__init__()
        # Very short "secrets" would redact ordinary words; real tokens are long.
        self.values = sorted({v for v in values if len(v) >= 8}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, _REDACTED)
        return redact_tokens(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = self.scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        return True


FORMAT = "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s]%(run_fields)s %(message)s"

#: C0 controls (tab and newline included: a record is one line), DEL, C1 controls (U+009B is a
#: terminal's CSI on its own), the bidirectional marks that make text read backwards, and the
#: line and paragraph separators some terminals and viewers break lines at.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """`text` on one line with every control character written as an escape (`\\n`, `\\x1b`,
    `\\u202e`). A backslash typed as such stays one: the aim is one line and an inert terminal,
    not a reversible encoding (the json format is exact)."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class TextFormatter(logging.Formatter):
    """FORMAT, one line per record; the traceback (if any) on indented lines below it."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if not hasattr(record, "run_fields"):  # a handler without CorrelationFilter
            record.correlation_id = getattr(record, "correlation_id", _correlation.get())
            record.run_fields = _run_fields(_run_id.get(), _step.get(), _job.get())
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = visible(self.formatMessage(record))
        extra: list[str] = []
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            # Split at newlines only: a carriage return or U+2028 inside is escaped, not a break.
            extra += record.exc_text.split("\n")
        if record.stack_info:
            extra += self.formatStack(record.stack_info).split("\n")
        return "\n".join([line, *(f"    {visible(text)}" for text in extra)])


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler writing to whatever `sys.stderr` is when a line is logged, not to the stream it
    was when the handler was made (as logging's own last-resort handler does): a process that
    replaces its stderr (a daemon's redirection, pytest's capture between tests) never has a
    thread log into a closed file."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current stderr


def configure_logging(
    level: str = "INFO", secret_values: Iterable[str] = (), *, log_format: str = "text"
) -> None:
    """Install one stderr handler with correlation ids and redaction on the root logger;
    `log_format` is `text` (one readable line) or `json` (one JSON object per line)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_upgrade_bot", False):
            root.removeHandler(handler)
    handler = _Stderr()
    handler._upgrade_bot = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    install_filters(handler, secret_values)
    root.addHandler(handler)
    root.setLevel(level)
    # A thread's uncaught exception goes through the same handler (redacted, and one JSON object
    # in the json format) rather than straight to stderr.
    threading.excepthook = _log_thread_exception
    # urllib3 warns of every retried connection before the adapter says what it means for the
    # cluster; below DEBUG that is noise next to the adapter's own line.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.DEBUG if level == "DEBUG" else logging.ERROR)
    # Alembic says its context at every start; the store logs each revision it applies itself.
    logging.getLogger("alembic").setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)


def install_filters(handler: logging.Handler, secret_values: Iterable[str] = ()) -> None:
    """Add the correlation and redaction filters to a handler (also used by tests' handlers)."""
    handler.addFilter(CorrelationFilter())
    handler.addFilter(RedactingFilter(secret_values))


# ---------------------------------------------------------------------------------------------
# Run and replica ids, and the JSON format

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


def set_replica_id(replica_id: str) -> None:
    """Name this process in every log line from now on (e.g. the pod's name and the pid)."""
    _replica["id"] = replica_id or "-"


def current_run_id() -> str:
    return _run_id.get()


@contextlib.contextmanager
def run_context(run_id: str) -> Iterator[None]:
    """Bind a run id for the block."""
    with log_context(run_id=run_id):
        yield


@contextlib.contextmanager
def log_context(
    *, run_id: str | None = None, step: str | None = None, job: str | None = None
) -> Iterator[None]:
    """Bind what is given of a run's id, its step and its job for the block (None: left as the
    caller bound it; "": unbound), so every line logged inside carries them."""
    tokens = [
        (var, var.set(str(value) or "-"))
        for var, value in ((_run_id, run_id), (_step, step), (_job, job))
        if value is not None
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def run_scoped(method: Callable[Concatenate[S, Any, P], R]) -> Callable[Concatenate[S, Any, P], R]:
    """For a method whose first argument is a run, its id or a button of it (`run_id`, `step_id`):
    log lines inside carry the run id, and the step when the button or a `step_id` argument names it."""
    names = list(inspect.signature(method).parameters)
    # Where `step_id` is among the arguments after (self, run), if the method takes one.
    step_at = names.index("step_id") - 2 if "step_id" in names[2:] else None

    @functools.wraps(method)
    def wrapper(self: S, run: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if isinstance(run, str):
            run_id = run
        else:
            run_id = str(getattr(run, "run_id", "") or getattr(run, "id", "") or "")
        step = kwargs.get("step_id", getattr(run, "step_id", None))
        if step_at is not None and len(args) > step_at:
            step = args[step_at]
        with log_context(run_id=run_id, step=step if isinstance(step, str) else None):
            return method(self, run, *args, **kwargs)

    return wrapper


class JsonFormatter(logging.Formatter):
    """One JSON object per line; the message and traceback are already redacted by the filters."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            # null where not known (the text format shows "-").
            "correlation_id": _known(getattr(record, "correlation_id", _correlation.get())),
            "run_id": _known(getattr(record, "run_id", _run_id.get())),
            "step": _known(getattr(record, "step", _step.get())),
            "job": _known(getattr(record, "job", _job.get())),
            "replica_id": _known(getattr(record, "replica_id", _replica["id"])),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def _known(value: str) -> str | None:
    return None if value == "-" else value


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    logging.getLogger("bot.threads").error("uncaught exception in thread %s", name, exc_info=exc_info)
