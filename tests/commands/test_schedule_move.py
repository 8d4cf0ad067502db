"""`/upgrade schedule move`: a pending schedule moves to another window under the same checks as
`schedule`; the old window's pending announcements are withdrawn, `delayed` is posted once (with
the old window and the reason), and the new window's announcements follow. Real slack_sdk client
against the stub, injected clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.schedules import CONFIG, FRIDAY_NOON_IN_TOKYO, PLAN, TOKYO, suggested
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub


def token(moment: datetime) -> str:
    return f"<!date^{int(moment.timestamp())}^"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(FRIDAY_NOON_IN_TOKYO)


@pytest.fixture
def services(
    write_config: Callable[..., Path], clock: FakeClock, slack_stub: SlackStub
) -> Iterator[Services]:
    env = slack_env(slack_stub.api_url, app_token=False)
    built = assemble(load_settings(write_config(CONFIG, roster=False), env), clock=clock)
    built.store.save_plan(name="tokyo-upgrade", text=PLAN, loaded_by="U0PRIMARY", loaded_at=clock())
    yield built
    built.close()


def cmd(services: Services, text: str, user: str = "U0PRIMARY") -> Outcome:
    return services.router.handle(CommandRequest(text=text, user_id=user, channel_id="C0OPS"))


def posts(stub: SlackStub) -> list[str]:
    return [str(c.params["text"]) for c in stub.calls_to("chat.postMessage") if c.response.get("ok")]


def delayed(stub: SlackStub) -> list[str]:
    return [t for t in posts(stub) if t.startswith(":hourglass_flowing_sand:")]


def test_a_move_withdraws_the_old_window_posts_delayed_once_and_schedules_the_new_one(
    services: Services, slack_stub: SlackStub, clock: FakeClock
) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"', user="U0COORD").ok
    (old,) = services.store.schedules()
    assert len(posts(slack_stub)) == 1  # `scheduled`

    out = cmd(services, f'schedule move {old.id} --at "2026-12-03 15:00" --reason "vendor <patch> is late"')
    assert out.ok, out.rendered.text
    assert f"Moved `#{old.id}` → `#{old.id + 1}`" in out.rendered.text
    assert "3 pending announcements of the old window withdrawn" in out.rendered.text
    (text,) = delayed(slack_stub)
    assert len(posts(slack_stub)) == 2
    old_start, new_start = datetime(2026, 12, 1, 14, tzinfo=TOKYO), datetime(2026, 12, 3, 15, tzinfo=TOKYO)
    assert f"*Was:* {token(old_start)}" in text
    assert f"*New window:* {token(new_start)}" in text
    assert "*Reason:* vendor &lt;patch&gt; is late" in text
    (call,) = [c for c in slack_stub.calls_to("chat.postMessage") if c.params["text"] == text]
    assert call.params["channel"] == "C0ANNOUNCE"

    moved, new = services.store.schedule(old.id), services.store.schedule(old.id + 1)
    assert moved is not None
    assert moved.state == "moved"
    assert new is not None
    assert (new.state, new.moved_from, new.window_start) == (
        "scheduled",
        old.id,
        new_start,
    )
    assert new.move_reason == "vendor <patch> is late"
    assert new.tz == "Asia/Tokyo"
    withdrawn = services.store.scheduled_announcements(schedule_id=old.id)
    assert [(r.template, r.state) for r in withdrawn] == [
        ("scheduled", "sent"),
        ("reminder", "cancelled"),
        ("reminder", "cancelled"),
        ("starting", "cancelled"),
    ]
    rows = services.store.scheduled_announcements(schedule_id=new.id)
    assert [(r.template, r.state) for r in rows] == [
        ("delayed", "sent"),
        ("reminder", "scheduled"),
        ("reminder", "scheduled"),
        ("starting", "scheduled"),
    ]
    # The old window's reminder instant passes: nothing; the new one's: its reminder, once.
    clock.set(datetime(2026, 11, 30, 5, tzinfo=UTC))
    assert services.announcements.run_due() == []
    clock.set(datetime(2026, 12, 2, 6, tzinfo=UTC))  # T-24h of 15:00 Tokyo
    assert [f.action for f in services.announcements.run_due()] == ["sent"]
    assert [f.action for f in services.announcements.run_due()] == []
    # A restart catching up finds the delayed announcement sent: still exactly one.
    assert [f.action for f in services.announcements.catch_up(clock())] == []
    assert len(delayed(slack_stub)) == 1
    assert len(posts(slack_stub)) == 3
    listed = cmd(services, "schedule list", user="U0SHADOW").rendered.text
    assert f"moved from `#{old.id}`: vendor &lt;patch&gt; is late" in listed
    assert "— moved" in listed
    audited = [e for e in services.store.audit_entries() if e.kind == "schedule" and e.subcommand == "move"]
    assert len(audited) == 1
    # The window it moved from, in the plan's zone as it was scheduled (never UTC beside +09:00).
    assert audited[0].detail.startswith("from 2026-12-01T14:00:00+09:00 – 2026-12-01T"), audited[0].detail
    assert audited[0].detail.endswith("+09:00 Asia/Tokyo: vendor <patch> is late")


def test_a_move_outside_the_windows_is_refused_with_slots_and_only_the_coordinator_overrides(
    services: Services, slack_stub: SlackStub
) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"').ok
    (old,) = services.store.schedules()
    refused = cmd(services, f'schedule move {old.id} --at "2026-12-01 18:00" --reason "later"')
    assert refused.audit_outcome == "refused"
    assert refused.reply.ephemeral
    slots = suggested(refused.rendered.text)
    assert slots
    assert all(services.settings.windows.check(s, s + (old.window_end - old.window_start)).ok for s in slots)
    at = f'schedule move {old.id} --at "2026-12-01 18:00" --override --reason "vendor deadline"'
    denied = cmd(services, at, user="U0PRIMARY")
    assert denied.audit_outcome == "denied"
    assert "only the coordinator" in denied.rendered.text
    assert delayed(slack_stub) == []
    assert services.store.schedule(old.id).state == "scheduled"
    ok = cmd(services, at, user="U0COORD")
    assert ok.ok, ok.rendered.text
    assert (
        "Overridden by <@U0COORD>: outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo) — vendor deadline"
    ) in ok.rendered.text
    assert len(delayed(slack_stub)) == 1
    (override,) = [e for e in services.store.audit_entries() if e.kind == "override"]
    assert override.user_id == "U0COORD"
    assert override.subcommand == "schedule move"
    assert (
        override.detail
        == "moved outside the allowed windows (Mon–Fri 14:00–17:00 Asia/Tokyo) — vendor deadline"
    )


def test_a_move_needs_a_scheduler_a_reason_and_a_pending_schedule(
    services: Services, slack_stub: SlackStub
) -> None:
    assert cmd(services, 'schedule tokyo-upgrade --at "2026-12-01 14:00"').ok
    (old,) = services.store.schedules()
    move = f'schedule move {old.id} --at "2026-12-02 14:00"'
    shadow = cmd(services, f'{move} --reason "later"', user="U0SHADOW")
    assert shadow.audit_outcome == "denied"
    no_reason = cmd(services, move)
    assert no_reason.audit_outcome == "usage"
    assert "say why it moves" in no_reason.rendered.text
    no_at = cmd(services, f'schedule move {old.id} --reason "later"')
    assert no_at.audit_outcome == "usage"
    assert "--at" in no_at.rendered.text
    unknown = cmd(services, 'schedule move 99 --at "2026-12-02 14:00" --reason "later"')
    assert unknown.audit_outcome in ("error", "refused")
    assert "no schedule #99" in unknown.rendered.text
    earlier = cmd(services, f'schedule move {old.id} --at "2026-11-30 14:00" --reason "sooner"')
    assert not earlier.ok
    assert "`schedule move` postpones" in earlier.rendered.text
    assert f"schedule cancel {old.id}" in earlier.rendered.text
    assert delayed(slack_stub) == []
    assert cmd(services, f'{move} --reason "later"').ok
    again = cmd(services, f'{move} --reason "even later"')
    assert not again.ok
    assert "was moved: it is #2 now (scheduled)" in again.rendered.text
    assert len(delayed(slack_stub)) == 1
