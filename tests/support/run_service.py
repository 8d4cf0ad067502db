"""The run service of the core tests: a fresh store with one small plan loaded, posting its card
and thread to the Slack stub, on a fake clock (`tiny`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.delivery import Deliveries
from bot.core.live import LiveSource
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs.cards import RunCards
from bot.core.runs.service import RunService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLAN = """\
name: tiny
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [S0LEADS]
steps:
  - id: first
    title: "Drain <!channel> & friends"
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
    escalate_after: 10m
    timeout: 1h
"""


@contextlib.contextmanager
def tiny(
    tmp_path: Path, slack_stub: SlackStub, plan: str = PLAN, live: LiveSource | None = None
) -> Iterator[tuple[RunService, FakeClock]]:
    """The run service on a fresh store with `plan` loaded as `tiny`, posting to the Slack stub;
    `live`: the live sections of its long actions (the cluster jobs' lines on the card)."""
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        store.save_plan(name="tiny", text=plan, loaded_by="U0PRIMARY", loaded_at=T0)
        clock = FakeClock(T0)
        cards = RunCards(
            deliveries=Deliveries(
                store=store,
                poster=SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)),
                clock=clock,
                owner="test",
            ),
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
            live=live,
        )
        yield RunService(store=store, directory=StaticDirectory(), clock=clock, cards=cards), clock
    finally:
        store.close()
