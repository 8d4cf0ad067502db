"""The shipped examples agree: the example config's maintenance windows allow the example plan's
window, so the `schedule` example of the README and of the scheduling page finds a slot instead of
"No allowed slot"."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from bot.frontdoor.assemble import assemble
from bot.resources import BUILTIN_PLANS
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.clock import FakeClock

ROOT = Path(__file__).resolve().parent.parent
#: A week before the README's date: the schedule is in the future, as on a real planning day.
MONDAY_BEFORE = datetime(2026, 11, 23, 1, tzinfo=UTC)


def readme_schedule_example() -> str:
    """The `/upgrade schedule PLAN --at "…"` example of the README and of docs/announcements.md."""
    examples = set()
    for page in ("README.md", "docs/announcements.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        match = re.search(r'`/upgrade schedule PLAN (--at "[^"]+")`', text)
        assert match, f"{page} no longer shows a schedule example"
        examples.add(match.group(1))
    assert len(examples) == 1, f"the README and the scheduling page schedule different times: {examples}"
    return examples.pop()


def test_the_readme_schedule_example_finds_a_slot_with_the_example_config_and_plan(tmp_path: Path) -> None:
    config = tmp_path / "upgrade-bot.yaml"
    shutil.copy(ROOT / "upgrade-bot.example.yaml", config)
    settings = load_settings(config, {})
    plan = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text(encoding="utf-8")
    at = readme_schedule_example()
    assert at == '--at "2026-12-01 14:00"'
    services = assemble(settings, with_slack=False, clock=FakeClock(MONDAY_BEFORE))
    try:
        services.store.save_plan(
            name="eks-nodegroups", text=plan, loaded_by="U0PRIMARY", loaded_at=MONDAY_BEFORE
        )
        outcome = services.router.handle(
            CommandRequest(text=f"schedule eks-nodegroups {at}", user_id="U0PRIMARY", channel_id="C0UPGRADES")
        )
        assert outcome.ok, outcome.rendered.text
        assert "No allowed slot" not in outcome.rendered.text
        (schedule,) = services.store.schedules()
        # Tuesday 14:00–17:00 in Tokyo: the plan's three hours, inside Mon–Fri 14:00–17:00 JST.
        assert schedule.window_start == datetime(2026, 12, 1, 5, tzinfo=UTC)
        assert schedule.window_end == datetime(2026, 12, 1, 8, tzinfo=UTC)
        assert settings.windows.check(schedule.window_start, schedule.window_end).ok
    finally:
        services.close()
