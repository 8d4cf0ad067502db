"""Audit log views: parsing `--since`, summaries, and CSV/Markdown exports of audit entries."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.adapters.store import AuditEntry
from bot.errors import UsageError

_DURATION = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

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
    """`30m`, `24h`, `7d`, `2w`, a date (`2026-11-01`, midnight in `zone`) or an ISO time."""
    text = text.strip()
    match = _DURATION.match(text.lower())
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
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
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for entry in entries:
        writer.writerow(row(entry))
    return out.getvalue()


def _md_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


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
