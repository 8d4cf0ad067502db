"""Scheduled announcements survive `kill -9`: a real `upgrade-bot run --http` is killed just before,
during and just after an announcement falls due, and started again on the same database. The
Slack stub's recorded `chat.postMessage` calls show each announcement exactly once.

"Due" without sleeping in the bot: the schedules open a few seconds ahead (`--at` with seconds,
offsets `[0]`), so the `starting` announcement falls due while the test watches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.records import AnnouncementRow
from bot.settings import load_settings
from tests.support.bot_process import BotProcess
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")


@dataclass
class Bot(BotProcess):
    def command(self, text: str) -> str:
        """Run a slash command as the primary in C0OPS; its reply (ephemeral, or posted there)."""
        before, in_ops = len(self.stub.responses), len(self.calls("C0OPS"))
        self.send_command(text, "U0PRIMARY")

        def reply() -> str | None:
            if len(self.stub.responses) > before:
                return str(self.stub.responses[before]["text"])
            posted = self.calls("C0OPS")[in_ops:]
            return str(posted[0]) if posted else None

        return str(self.stub.wait_for(reply, timeout=30))

    def calls(self, channel: str) -> list[str]:
        return [
            str(c.params["text"])
            for c in self.stub.calls_to("chat.postMessage")
            if c.params["channel"] == channel
        ]

    def rows(self, plan: str) -> list[AnnouncementRow]:
        store = Store.open(load_settings(self.config, {}).database_url)
        try:
            return [r for r in store.scheduled_announcements() if r.plan_name == plan]
        finally:
            store.close()

    def schedule(self, plan: str, seconds: float) -> datetime:
        """Schedule `plan` to open `seconds` from now; wait for its `scheduled` announcement."""
        assert "loaded" in self.command(f"plan load {plan}")
        due = (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)
        posted = self.posts()
        reply = self.command(f'schedule {plan} --at "{due:%Y-%m-%d %H:%M:%S}" --tz UTC')
        assert reply.startswith(":calendar: Scheduled"), reply
        self.stub.wait_for(lambda: self.posts() > posted, timeout=10)
        return due

    def posts(self) -> int:
        """Announcements: what reached the announcement channel."""
        return len(self.calls("C0ANNOUNCE"))


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str], tmp_path: Path
) -> Iterator[Bot]:
    plans = tmp_path / "team" / "plans"
    plans.mkdir(parents=True)
    for name in ("before", "during", "after"):
        (plans / f"{name}.yaml").write_text(
            PLAN.replace("name: eks-nodegroups", f"name: {name}"), encoding="utf-8"
        )
    config = write_config(
        "channels: {announcements: C0ANNOUNCE, operations: C0OPS}\n"
        f"templates_dir: {tmp_path / 'team'}\n"
        "announcements: {offsets: ['0'], grace: 30m}\n"
    )
    for user in ("U0PRIMARY", "U0SHADOW", "U0COORD"):
        slack_stub.users[user] = {"id": user}
    b = Bot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


def test_sigkill_before_during_and_after_a_due_announcement_posts_each_exactly_once(bot: Bot) -> None:
    # 1. Killed just before `starting` falls due: the restart posts it (on time: seconds late).
    due = bot.schedule("before", 5)
    bot.kill9()
    assert bot.posts() == 1
    wait_until(lambda: datetime.now(UTC) >= due, timeout=10, what="the announcement to fall due")
    bot.start()
    assert bot.posts() == 2  # posted while starting up, before the front door served
    assert [(r.template, r.state, r.delayed) for r in bot.rows("before")] == [
        ("scheduled", "sent", False),
        ("starting", "sent", False),
    ]

    # 2. Killed during the post: Slack has the message but the bot never hears back.
    bot.schedule("during", 4)
    bot.stub.fail_next("chat.postMessage", delay=15)
    bot.stub.wait_for(lambda: bot.posts() == 4, timeout=15)
    bot.kill9()
    bot.start()
    starting = bot.rows("during")[1]
    # Found in the channel by the key in its metadata: recorded with Slack's ts, not posted again.
    (in_slack,) = [
        m for m in bot.stub.posted("C0ANNOUNCE") if "Plan `during`" in m["text"] and m["ts"] == starting.ts
    ]
    assert starting.state == "sent"
    assert in_slack["metadata"]["event_type"] == "upgrade_bot_post"

    # 3. Killed just after the post was recorded.
    bot.schedule("after", 3)
    wait_until(lambda: bot.rows("after")[1].ts, timeout=15, what="the starting announcement's ts")
    bot.kill9()
    bot.start()
    assert bot.command("schedule list").count(" — sent") == 6

    texts = Counter(bot.calls("C0ANNOUNCE"))
    assert sum(texts.values()) == 6
    assert set(texts.values()) == {1}
    for plan in ("before", "during", "after"):
        assert [t.startswith(":calendar:") for t in texts if f"Plan `{plan}`" in t] in (
            [True, False],
            [False, True],
        )
