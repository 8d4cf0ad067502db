"""The audit log: the one builder of audit entries, `--since`, summaries and CSV/Markdown exports.

Every mutation writes an audit entry, and every entry is built by `audit_entry`, which clips the
free-text fields to what the table holds and drops text a database refuses (lone surrogates from a
forged payload), so an audit write never fails on what a user typed.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.core.durations import parse_duration
from bot.core.markdown import md_text
from bot.core.safetext import printable
from bot.errors import UsageError, valid_text
from bot.logsetup import current_correlation_id
from bot.records import AuditEntry

#: Longest free text kept in one audit field; the table's text columns hold more, a chat less.
MAX_TEXT = 2000


class Who(Protocol):
    """Who did it and through which door (`bot.core.runs.service.Actor` is one)."""

    @property
    def user_id(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def channel_id(self) -> str: ...

    @property
    def correlation_id(self) -> str: ...


def _text(value: str, limit: int = MAX_TEXT) -> str:
    # A lone surrogate would make the database refuse the whole row.
    return valid_text(value)[:limit]


def audit_entry(
    who: Who | None = None,
    *,
    at: datetime,
    kind: str,
    subcommand: str,
    arguments: str = "",
    outcome: str = "ok",
    detail: str = "",
    user_id: str | None = None,
    channel_id: str | None = None,
    source: str | None = None,
    correlation_id: str | None = None,
    run_id: str = "",
) -> AuditEntry:
    """One audit entry; `who` supplies the person, door, channel and correlation id unless given.
    A row with no correlation id of its own (the bot's, written by a job's driver or a timer) takes
    the one bound to the work that writes it (`bot.logsetup.correlation`), which its log lines carry."""
    return AuditEntry(
        at=at,
        user_id=_text(user_id if user_id is not None else (who.user_id if who else "bot"), 64),
        channel_id=_text(channel_id if channel_id is not None else (who.channel_id if who else ""), 64),
        source=source if source is not None else (who.source if who else "bot"),
        kind=kind,
        subcommand=_text(subcommand, 64),
        arguments=_text(arguments),
        outcome=outcome,
        detail=_text(detail),
        correlation_id=correlation_id
        if correlation_id is not None
        else ((who.correlation_id if who else "") or _bound_correlation_id()),
        run_id=run_id,
    )


def _bound_correlation_id() -> str:
    cid = current_correlation_id()
    return "" if cid == "-" else cid  # "-": no work bound one (what a log line shows then)


COLUMNS = (
    "at_utc",
    "user_id",
    "channel_id",
    "source",
    "kind",
    "subcommand",
    "arguments",
    "outcome",
    "detail",
    "correlation_id",
    "run_id",
)


def parse_since(text: str, now: datetime, zone: str = "UTC") -> datetime:
    """`30m`, `1h30m`, `7d`, `2w`, a date (`2026-11-01`, midnight in `zone`) or an ISO time."""
    text = text.strip()
    if text[:1].isdigit() and not re.match(r"^\d{4}-", text, re.ASCII):
        try:
            return now - parse_duration(text)
        except ValueError as exc:
            raise UsageError(f"--since: {exc}") from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a duration (30m, 24h, 7d) nor a date (2026-11-01)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(zone))
    return moment.astimezone(UTC)


def row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at_utc": entry.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "user_id": entry.user_id,
        "channel_id": entry.channel_id,
        "source": entry.source,
        "kind": entry.kind,
        "subcommand": entry.subcommand,
        "arguments": entry.arguments,
        "outcome": entry.outcome,
        "detail": entry.detail,
        "correlation_id": entry.correlation_id,
        "run_id": entry.run_id,
    }


def to_csv(entries: Sequence[AuditEntry]) -> str:
    """The rows as CSV for a spreadsheet: no control characters or direction marks, and a cell a
    spreadsheet would run as a formula (`=HYPERLINK(…)` in a note, `+`, `-`, `@`) starts with `'`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for entry in entries:
        writer.writerow({k: _csv_cell(v) for k, v in row(entry).items()})
    return out.getvalue()


def _csv_cell(value: object) -> object:
    if not isinstance(value, str):
        return value
    text = printable(value)
    return "'" + text if text[:1] in _FORMULA else text


#: What a spreadsheet reads as the start of a formula (OWASP's CSV injection list).
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def to_json(entries: Sequence[AuditEntry]) -> str:
    """A JSON array of the rows, the CSV's columns as keys."""
    return json.dumps([row(entry) for entry in entries], indent=1, ensure_ascii=False) + "\n"


def _md_cell(value: object) -> str:
    return md_text(value)


def to_markdown(entries: Sequence[AuditEntry], *, title: str = "Audit log") -> str:
    lines = [f"# {title}", "", f"{len(entries)} entries.", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for entry in entries:
        r = row(entry)
        lines.append("| " + " | ".join(_md_cell(r[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def summarise(entries: Sequence[AuditEntry], *, latest: int = 10) -> dict[str, Any]:
    """Counts by outcome and subcommand plus the most recent entries, newest first."""
    return {
        "total": len(entries),
        "by_outcome": sorted(Counter(e.outcome for e in entries).items()),
        "by_subcommand": Counter(e.subcommand for e in entries).most_common(5),
        "latest": [row(e) for e in reversed(entries[-latest:])],
    }
