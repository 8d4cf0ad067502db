"""The Tokyo team of the schedule tests: its config (weekday windows, a year-end freeze), its plan,
the instant the tests start at, and how to read the slots a refusal suggests."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

TOKYO = ZoneInfo("Asia/Tokyo")
FRIDAY_NOON_IN_TOKYO = datetime(2026, 11, 20, 3, tzinfo=UTC)

PLAN = (
    (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml")
    .read_text(encoding="utf-8")
    .replace("name: eks-nodegroups", "name: tokyo-upgrade")
    # Two hours, so that a refusal's slots can be checked against a window they fit with room.
    .replace('end: "2026-12-01T17:00"', 'end: "2026-12-01T16:00"')
)
CONFIG = """\
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [U0COORD]
channels: {announcements: C0ANNOUNCE, operations: C0OPS}
timezone: Asia/Tokyo
windows:
  - {days: mon-fri, start: "14:00", end: "17:00", zone: Asia/Tokyo}
freezes:
  - {from: 2026-12-24, to: 2027-01-04, reason: year-end freeze}
announcements: {grace: 30m}
"""


def suggested(text: str) -> list[datetime]:
    """The slots on a refusal's `Next allowed:` line, in Tokyo time."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith("Next allowed:")]
    return [
        datetime.strptime(m, "%Y-%m-%d %H:%M").replace(tzinfo=TOKYO)
        for m in re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", line)
    ]
