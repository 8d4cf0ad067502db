"""`/upgrade announce`: previews for the roster, posting for the coordinator or primary."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.core.announcements.templates import AnnouncementRenderer, sample_context
from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings


@pytest.fixture
def services(write_config: Callable[..., Path]) -> Iterator[Services]:
    built = assemble(
        load_settings(write_config("channels:\n  announcements: C0ANNOUNCE\n"), {}), with_slack=False
    )
    yield built
    built.close()


def test_a_preview_shows_the_rendered_announcement_to_the_asker_alone(services: Services) -> None:
    outcome = services.router.handle(
        CommandRequest(text="announce preview reminder", user_id="U0SHADOW", channel_id="C0OPS")
    )
    assert outcome.ok
    assert outcome.reply.ephemeral
    expected = AnnouncementRenderer().render("reminder", sample_context())
    assert outcome.rendered.text.startswith(":eyes: Preview of `reminder` (built-in, sample plan)")
    assert expected.text in outcome.rendered.text
    assert outcome.rendered.blocks is not None
    assert expected.blocks is not None
    assert outcome.rendered.blocks[1:] == expected.blocks
    # Nothing was double-escaped on the way through the reply template.
    assert "&amp;amp;" not in outcome.rendered.text
    assert "&lt;!channel&gt;" in outcome.rendered.text


def test_an_unknown_template_is_a_usage_error_listing_the_names(services: Services) -> None:
    outcome = services.router.handle(CommandRequest(text="announce preview remindr", user_id="U0PRIMARY"))
    assert outcome.audit_outcome == "usage"
    assert "unknown announcement `remindr`" in outcome.rendered.text
    assert "reminder" in outcome.rendered.text


def test_posting_needs_the_coordinator_or_primary_role(services: Services) -> None:
    outcome = services.router.handle(CommandRequest(text="announce scheduled --sample", user_id="U0SHADOW"))
    assert outcome.audit_outcome == "denied"
    assert "needs the coordinator or primary role; you are shadow" in outcome.rendered.text


def test_posting_without_a_plan_needs_sample_to_be_said_out_loud(services: Services) -> None:
    outcome = services.router.handle(CommandRequest(text="announce scheduled", user_id="U0PRIMARY"))
    assert outcome.audit_outcome == "usage"
    assert "--sample" in outcome.rendered.text


def test_posting_goes_to_the_announcement_channel_unless_another_is_named(services: Services) -> None:
    default = services.router.handle(CommandRequest(text="announce completed --sample", user_id="U0PRIMARY"))
    assert default.ok
    assert not default.reply.ephemeral
    assert default.reply.channel == "C0ANNOUNCE"
    named = services.router.handle(
        CommandRequest(text="announce completed --sample --channel <#C0TEST|test>", user_id="U0PRIMARY")
    )
    assert named.reply.channel == "C0TEST"
    # The sample is no announcement the store knows: it carries no Verified button nor lines.
    assert (
        named.rendered.text
        == AnnouncementRenderer().render("completed", sample_context(announcement=None)).text
    )
    assert "Verified" not in named.rendered.text
    assert "announcement_verified" not in str(named.rendered.blocks)


def test_a_channel_name_without_a_link_is_refused(services: Services) -> None:
    outcome = services.router.handle(
        CommandRequest(text="announce completed --sample --channel #general", user_id="U0PRIMARY")
    )
    assert outcome.audit_outcome == "usage"
    assert "is not a channel" in outcome.rendered.text
