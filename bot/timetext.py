"""Times a cloud writes (ISO 8601) as the bot says them, `2027-01-04 00:00 UTC`: a leaf (it
imports nothing of the bot) so that the provider port (`bot.core.providers`, which re-exports
these) and its adapters (a GKE maintenance window's first span) say them the same way.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

#: An ISO 8601 duration of hours, minutes and seconds, as GKE gives a daily window's (`PT4H0M0S`).
_DURATION = re.compile(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?", re.IGNORECASE)


def said_time(text: str) -> str:
    """A time a cloud gives or takes (ISO 8601, `2027-01-04T00:00:00Z`) as the posts say times:
    `2027-01-04 00:00 UTC`, the zone named, as the jobs' other lines do; a text that is not a time
    is given back as it is."""
    try:
        moment = datetime.fromisoformat(str(text).strip())
    except ValueError:
        return str(text)
    # A time the cloud wrote without a zone is UTC (ARM's and GKE's are).
    return f"{(moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def said_span(start: str, end: str) -> str:
    """A maintenance span as the posts say it: `2026-12-24 00:00 – 2027-01-04 00:00 UTC`."""
    begins, ends = said_time(start), said_time(end)
    if begins.endswith(" UTC") and ends.endswith(" UTC"):
        return f"{begins.removesuffix(' UTC')} – {ends}"
    return f"{begins} – {ends}"


def said_duration(text: str) -> str:
    """An ISO 8601 duration (`PT4H0M0S`, `PT30M`) as the bot says spans, `4h`, `30m`, `1h30m`; a
    text that is not one is given back as it is."""
    match = _DURATION.fullmatch(str(text).strip())
    if match is None or not any(match.groups()):
        return str(text)
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n]
    return "".join(parts) or "0s"
