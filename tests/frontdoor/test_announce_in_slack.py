"""`/upgrade announce` through Slack: the post reaches the stub once; a broken template never posts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.announcements.templates import AnnouncementRenderer, sample_context
from bot.settings import Settings, load_settings
from tests.support.front import Front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub


@pytest.fixture
def team_templates(tmp_path: Path) -> Path:
    team = tmp_path / "team-templates"
    (team / "announcements").mkdir(parents=True)
    return team


@pytest.fixture
def settings_for_stub(
    write_config: Callable[..., Path], slack_stub: SlackStub, team_templates: Path
) -> Settings:
    extra = f"channels:\n  announcements: C0ANNOUNCE\ntemplates_dir: {team_templates}\n"
    return load_settings(write_config(extra), slack_env(slack_stub.api_url))


def slash(front: Front, text: str, user: str = "U0PRIMARY") -> None:
    assert front.command(text, user).status == 200


def test_announce_posts_the_rendered_blocks_once_in_the_named_channel(
    make_front: Callable[..., Front],
) -> None:
    front = make_front()
    slash(front, "announce starting --sample --channel <#C0TEST|upgrades-test>")
    (call,) = front.stub.wait_for_calls("chat.postMessage")
    front.workers.shutdown(wait=True)
    expected = AnnouncementRenderer().render("starting", sample_context())
    assert call.params["channel"] == "C0TEST"
    assert call.params["text"] == expected.text
    assert call.params["blocks"] == expected.blocks
    assert len(front.stub.calls_to("chat.postMessage")) == 1
    assert [e.outcome for e in front.services.store.audit_entries()] == ["ok"]


def test_a_broken_team_template_is_an_ephemeral_error_and_nothing_is_posted(
    make_front: Callable[..., Front], team_templates: Path
) -> None:
    (team_templates / "announcements" / "scheduled.txt.j2").write_text("Upgrade of\n{{ plan.clustr }}\n")
    front = make_front()
    slash(front, "announce scheduled --sample")
    (response,) = front.stub.wait_for_responses(1)
    front.workers.shutdown(wait=True)
    assert response["response_type"] == "ephemeral"
    assert "scheduled.txt.j2:2: " in response["text"]
    assert "clustr" in response["text"]
    assert "ref " in response["text"]
    assert front.stub.calls_to("chat.postMessage") == []
    (entry,) = front.services.store.audit_entries()
    assert entry.outcome == "error"


PLAN = (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")


def test_a_plans_announcement_is_posted_with_its_impact_and_links(make_front: Callable[..., Front]) -> None:
    front = make_front()
    front.services.store.save_plan(
        name="eks-nodegroups", text=PLAN, loaded_by="U0PRIMARY", loaded_at=front.services.runs.clock()
    )
    slash(front, "announce scheduled eks-nodegroups")
    (call,) = front.stub.wait_for_calls("chat.postMessage")
    front.workers.shutdown(wait=True)
    assert call.params["channel"] == "C0ANNOUNCE"
    assert "The API server restarts twice" in call.params["text"]
    assert "<https://tickets.example.com/CHG-1125|Change ticket>" in call.params["text"]


def test_scheduling_with_a_broken_team_template_is_an_ephemeral_error_and_posts_nothing(
    make_front: Callable[..., Front], team_templates: Path
) -> None:
    # Only the reminder is broken: it is rendered at scheduling, not found out a day later.
    (team_templates / "announcements" / "reminder.txt.j2").write_text(
        "Reminder:\n{{ plan.name }}\n{{ plan.windw.start }}\n"
    )
    front = make_front()
    front.services.store.save_plan(
        name="eks-nodegroups", text=PLAN, loaded_by="U0PRIMARY", loaded_at=front.services.runs.clock()
    )
    slash(front, 'schedule eks-nodegroups --at "2027-12-06 14:00"')
    (response,) = front.stub.wait_for_responses(1)
    front.workers.shutdown(wait=True)
    assert response["response_type"] == "ephemeral"
    assert "reminder.txt.j2:3: " in response["text"]
    assert "windw" in response["text"]
    assert front.stub.calls_to("chat.postMessage") == []
    assert front.services.store.schedules() == []
