"""Logging set-up: correlation ids on every record and redaction of secrets.

A correlation id is bound for the duration of one command or action (a context variable, so worker
threads each carry their own) and appears in every log line and in the error shown in chat, which
is how an operator finds the detail behind a short chat message.

Tokens must never reach a log: the redaction filter removes the configured secret values and
anything shaped like a Slack token, whichever library logged it (slack_sdk logs request headers at
DEBUG).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import secrets
from collections.abc import Iterable, Iterator

_correlation: contextvars.ContextVar[str] = contextvars.ContextVar("correlation_id", default="-")

# xoxb- (bot), xoxp- (user), xoxa-/xoxr- (legacy), xapp- (app-level), xoxe- (rotation) tokens.
_TOKEN_SHAPE = re.compile(r"\b(xox[abeoprs]|xapp)-[A-Za-z0-9-]+")
_REDACTED = "[redacted]"


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
        return True


class RedactingFilter(logging.Filter):
    """Replaces secret values and token-shaped strings in the formatted message."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        super().__init__()
        # Very short "secrets" would redact ordinary words; real tokens are long.
        self.values = sorted({v for v in values if len(v) >= 8}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, _REDACTED)
        return _TOKEN_SHAPE.sub(_REDACTED, text)

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


FORMAT = "%(asctime)s %(levelname)s %(name)s [%(correlation_id)s] %(message)s"


def configure_logging(level: str = "INFO", secret_values: Iterable[str] = ()) -> None:
    """Install one stderr handler with correlation ids and redaction on the root logger."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_upgrade_bot", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler()
    handler._upgrade_bot = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter(FORMAT))
    install_filters(handler, secret_values)
    root.addHandler(handler)
    root.setLevel(level)
    # urllib3 warns of every retried connection before the adapter says what it means for the
    # cluster; below DEBUG that is noise next to the adapter's own line.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.DEBUG if level == "DEBUG" else logging.ERROR)


def install_filters(handler: logging.Handler, secret_values: Iterable[str] = ()) -> None:
    """Add the correlation and redaction filters to a handler (also used by tests' handlers)."""
    handler.addFilter(CorrelationFilter())
    handler.addFilter(RedactingFilter(secret_values))
