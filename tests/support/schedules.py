"""The Tokyo team of the schedule tests: its config (weekday windows, a year-end freeze), its plan,
the instant the tests start at, and how to read the slots a refusal suggests."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings

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


@contextlib.contextmanager
def tokyo_team(
    write_config: Callable[..., Path], clock: Callable[[], datetime], extra: str = ""
) -> Iterator[Services]:
    """The team's bot (no Slack), its plan `tokyo-upgrade` loaded; `extra`: more configuration."""
    built = assemble(
        load_settings(write_config(CONFIG + extra, roster=False), {}), with_slack=False, clock=clock
    )
    try:
        built.store.save_plan(name="tokyo-upgrade", text=PLAN, loaded_by="U0PRIMARY", loaded_at=clock())
        yield built
    finally:
        built.close()


def command(services: Services, text: str, user: str = "U0PRIMARY", cid: str = "") -> Outcome:
    """`/upgrade TEXT` as `user` in the operations channel (`cid`: the request's correlation id)."""
    return services.router.handle(
        CommandRequest(text=text, user_id=user, channel_id="C0OPS", correlation_id=cid or None)
    )
