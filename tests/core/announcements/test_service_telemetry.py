"""The announcement service records what each announcement came to through its `Telemetry`:
sent, delayed (sent late, within the grace) or skipped (past it); waiting is not an outcome."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.announcements.service import AnnouncementService
from bot.core.telemetry import NoTelemetry
from tests.support.clock import FakeClock
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

PLAN = (Path(__file__).parents[3] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")
TOKYO = ZoneInfo("Asia/Tokyo")


class Recorded(NoTelemetry):
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def announcement(self, outcome: str) -> None:
        self.outcomes.append(outcome)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    s.save_plan(
        name="eks-nodegroups", text=PLAN, loaded_by="U0PRIMARY", loaded_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    yield s
    s.close()


def service_at(store: Store, stub: SlackStub, now: datetime) -> tuple[AnnouncementService, Recorded]:
    service = AnnouncementService(
        store=store,
        clock=FakeClock(now),
        poster=SlackGateway(make_web_client(BOT_TOKEN, stub.api_url)),
        channel="C0ANNOUNCE",
        telemetry=(recorded := Recorded()),
    )
    return service, recorded


def test_sent_delayed_and_skipped_announcements_are_recorded(store: Store, slack_stub: SlackStub) -> None:
    service, recorded = service_at(store, slack_stub, datetime(2026, 11, 20, 3, tzinfo=UTC))
    service.schedule(
        "eks-nodegroups", start=datetime(2026, 12, 1, 14, tzinfo=TOKYO), tz="Asia/Tokyo", by="U0COORD"
    )
    service.run_due()
    assert recorded.outcomes == ["sent"]  # "scheduled", at once; the reminders wait (not recorded)

    # Back 20 minutes after the T-24h reminder: sent late.
    late, recorded = service_at(store, slack_stub, datetime(2026, 11, 30, 5, 20, tzinfo=UTC))
    late.catch_up(datetime(2026, 11, 30, 5, 20, tzinfo=UTC))
    assert recorded.outcomes == ["delayed"]

    # Back two hours after the start: the T-1h reminder and the start are past the grace.
    gone, recorded = service_at(store, slack_stub, datetime(2026, 12, 1, 7, tzinfo=UTC))
    gone.catch_up(datetime(2026, 12, 1, 7, tzinfo=UTC))
    assert recorded.outcomes == ["skipped", "skipped"]
