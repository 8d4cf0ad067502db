"""Announcement templates: valid Block Kit within Slack's limits, escaped user text, team overrides."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.core.announcements import timing as announcements
from bot.core.announcements.templates import (
    BUILTIN_ANNOUNCEMENTS,
    AnnouncementRenderer,
    LateNote,
    check_limits,
    replace_plan,
    sample_context,
)
from bot.errors import TemplateError
from tests.support import blockkit

HOSTILE = "Payments <!channel> & <@U0EVIL> > nothing"


def all_texts(blocks: list[dict[str, object]]) -> list[str]:
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("mrkdwn", "plain_text") and isinstance(node.get("text"), str):
                found.append(str(node["text"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return found


def test_every_announcement_has_text_and_blocks_files() -> None:
    for name in announcements.TEMPLATES:
        assert (BUILTIN_ANNOUNCEMENTS / f"{name}.txt.j2").is_file()
        assert (BUILTIN_ANNOUNCEMENTS / f"{name}.blocks.json.j2").is_file()


@pytest.mark.parametrize("name", announcements.TEMPLATES)
def test_every_template_renders_valid_block_kit_within_slack_limits(name: str) -> None:
    rendered = AnnouncementRenderer().render(name, sample_context())
    assert rendered.blocks is not None
    # The blocks survive a JSON round trip as Slack receives them.
    assert json.loads(json.dumps({"blocks": rendered.blocks}))["blocks"] == rendered.blocks
    assert 1 <= len(rendered.blocks) <= 50
    for block in rendered.blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
    assert "prod" in rendered.text


@pytest.mark.parametrize("name", announcements.TEMPLATES)
def test_user_text_is_escaped_everywhere_and_cannot_ping_the_channel(name: str) -> None:
    context = replace_plan(sample_context(reason=HOSTILE), impact=HOSTILE, name="p<!here>")
    rendered = AnnouncementRenderer().render(name, context)
    assert rendered.blocks is not None
    for text in [rendered.text, *all_texts(rendered.blocks)]:
        assert "<!channel>" not in text
        assert "<!here>" not in text
        assert "<@U0EVIL>" not in text
    if name in ("scheduled", "reminder", "starting", "aborted", "delayed"):
        assert "Payments &lt;!channel&gt; &amp; &lt;@U0EVIL&gt; &gt; nothing" in rendered.text
        assert any("Payments &lt;!channel&gt; &amp;" in t for t in all_texts(rendered.blocks))


@pytest.mark.parametrize("name", announcements.TEMPLATES)
def test_a_huge_impact_and_reason_are_clipped_to_fit_a_section(name: str) -> None:
    huge = "&" * 5000  # escapes to 25,000 characters
    context = replace_plan(sample_context(reason=huge), impact=huge)
    rendered = AnnouncementRenderer().render(name, context)
    assert rendered.blocks is not None
    assert all(len(t) <= 3000 for t in all_texts(rendered.blocks))
    # `missed` says neither: the upgrade did not happen, and nobody gave a reason.
    assert "&amp;…" in rendered.text or name in ("step-complete", "completed", "missed")


def test_mentions_roles_and_user_groups() -> None:
    text = AnnouncementRenderer().render("scheduled", sample_context()).text
    assert "<@U0PRIMARY>" in text
    assert "<!subteam^S0SRELEADS>" in text


def test_a_role_without_people_says_nobody_and_malformed_ids_do_not_mention() -> None:
    context = sample_context(roster={"primary": ("U0A",), "shadow": ("<!channel>",), "coordinator": ()})
    text = AnnouncementRenderer().render("scheduled", context).text
    assert "*Shadow:* &lt;!channel&gt;" in text
    assert "*Coordinator:* nobody" in text


def test_the_window_shows_a_date_token_with_plan_zone_and_utc_fallback() -> None:
    text = AnnouncementRenderer().render("reminder", sample_context()).text
    assert "<!date^1796101200^{date_short_pretty} {time}|2026-12-01 14:00 Asia/Tokyo (05:00 UTC)>" in text


def test_links_become_slack_links_and_unsafe_urls_do_not() -> None:
    from bot.core.announcements.templates import Link

    context = replace_plan(
        sample_context(),
        links=(
            Link(title="Runbook", url="https://x.example/a?b=1&c=2"),
            Link(title="bad", url="javascript:alert(1)"),
        ),
    )
    text = AnnouncementRenderer().render("scheduled", context).text
    assert "<https://x.example/a?b=1&amp;c=2|Runbook>" in text
    assert "javascript" not in text


def test_rolled_back_and_aborted_read_differently() -> None:
    context = sample_context()
    aborted = AnnouncementRenderer().render("aborted", context).text
    rolled = (
        AnnouncementRenderer()
        .render("aborted", sample_context(run=dataclasses.replace(context["run"], state="rolled_back")))
        .text
    )
    assert "aborted* at step 3 of 7" in aborted
    assert "rolled back*: the cluster stays on `v1.29.4`" in rolled


def test_announcements_that_need_a_run_refuse_without_one() -> None:
    with pytest.raises(TemplateError, match="needs a run"):
        AnnouncementRenderer().render("completed", sample_context(run=None))
    # The ones before a run exists render without it.
    assert AnnouncementRenderer().render("scheduled", sample_context(run=None)).blocks


def test_a_late_announcement_is_marked_delayed_in_text_and_blocks() -> None:
    context = sample_context()
    late = LateNote(due=context["plan"].window.start, zone="Asia/Tokyo")
    rendered = AnnouncementRenderer().render("starting", context, late=late)
    assert rendered.text.startswith(":hourglass: _Delayed: this announcement was due <!date^1796101200^")
    assert rendered.blocks is not None
    assert rendered.blocks[0]["type"] == "context"


def test_a_team_override_in_the_announcements_subfolder_wins(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    (tmp_path / "announcements" / "reminder.txt.j2").write_text("Heads up: {{ plan.cluster }}")
    (tmp_path / "announcements" / "reminder.blocks.json.j2").write_text(
        '{% set t %}Heads up: {{ plan.impact }}{% endset %}{{ [{"type": "section", "text": {"type": "mrkdwn", "text": t}}] | tojson }}'
    )
    rendered = AnnouncementRenderer(tmp_path).render("reminder", replace_plan(sample_context(), impact="a<b"))
    assert rendered.text == "Heads up: prod"
    assert rendered.blocks == [{"type": "section", "text": {"type": "mrkdwn", "text": "Heads up: a&lt;b"}}]


def test_a_team_override_directly_in_the_templates_dir_wins(tmp_path: Path) -> None:
    (tmp_path / "completed.txt.j2").write_text("Done: {{ plan.cluster }} {{ roster.primary | mentions }}")
    renderer = AnnouncementRenderer(tmp_path)
    rendered = renderer.render("completed", sample_context())
    assert rendered.text == "Done: prod <@U0PRIMARY>"
    # Text overridden, blocks not: posted as text only so the team's wording is what people read.
    assert rendered.blocks is None
    # Other announcements still come from the built-ins, blocks and all.
    assert renderer.render("scheduled", sample_context()).blocks


def test_check_passes_on_the_builtins() -> None:
    assert AnnouncementRenderer().check() == []


def test_check_names_the_broken_override_file_line_and_variable(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    broken = tmp_path / "announcements" / "starting.txt.j2"
    broken.write_text("Starting\n{{ plan.clusterr }}\n")
    problems = AnnouncementRenderer(tmp_path).check()
    assert len(problems) == 1
    assert problems[0].path == broken
    assert problems[0].line == 2
    assert "clusterr" in problems[0].message
    assert str(problems[0]).startswith(f"{broken}:2: ")


def test_check_reports_a_syntax_error_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "delayed.blocks.json.j2").write_text('{"blocks": [\n{% if %}\n]}')
    problems = AnnouncementRenderer(tmp_path).check()
    assert [(p.path, p.line) for p in problems] == [(tmp_path / "delayed.blocks.json.j2", 2)]


def test_check_reports_blocks_that_are_not_json_or_too_long(tmp_path: Path) -> None:
    (tmp_path / "reminder.blocks.json.j2").write_text('{"blocks": [\n{"type": "section"\n]}')
    (tmp_path / "starting.blocks.json.j2").write_text(
        '{{ {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]} | tojson }}'
    )
    problems = {p.path.name: p.message for p in AnnouncementRenderer(tmp_path).check() if p.path}
    assert "not valid JSON" in problems["reminder.blocks.json.j2"]
    assert "3001 characters (at most 3000)" in problems["starting.blocks.json.j2"]


def test_check_refuses_the_same_override_in_two_places(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    (tmp_path / "announcements" / "completed.txt.j2").write_text("a {{ plan.cluster }}")
    (tmp_path / "completed.txt.j2").write_text("b {{ plan.cluster }}")
    problems = AnnouncementRenderer(tmp_path).check()
    assert [p.path for p in problems] == [tmp_path / "completed.txt.j2"]
    assert "keep only one" in problems[0].message


def test_more_than_fifty_blocks_is_refused() -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}] * 51
    with pytest.raises(TemplateError, match="51 blocks"):
        check_limits("scheduled", "x", blocks)


def test_check_blames_a_broken_partial_override_with_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "announcements").mkdir()
    partial = tmp_path / "announcements" / "_footer.txt.j2"
    partial.write_text("Plan {{ plan.name }}\n{{ run.nmber }}\n")
    problems = AnnouncementRenderer(tmp_path).check()
    # Every announcement includes the footer; each failure points at the partial's line 2.
    assert problems
    assert {(p.path, p.line) for p in problems} == {(partial, 2)}
    assert all("nmber" in p.message for p in problems)


def test_check_catches_an_override_that_only_works_when_a_run_exists(tmp_path: Path) -> None:
    # Fine with the full sample, broken for a schedule made before any run exists.
    (tmp_path / "scheduled.txt.j2").write_text("Upgrade {{ plan.cluster }} (run #{{ run.id }})")
    problems = AnnouncementRenderer(tmp_path).check()
    assert [(p.path, p.line) for p in problems] == [(tmp_path / "scheduled.txt.j2", 1)]
    assert "'None' has no attribute 'id'" in problems[0].message


def test_the_completed_announcement_carries_the_runs_evidence_escaped() -> None:
    rendered = AnnouncementRenderer().render("completed", sample_context())
    line = "Evidence: `settle` Alerts: 1 new since 14:02 UTC · 3 pre-existing · 0 silenced by this run &lt;!channel&gt; &amp; co (Failed)"
    assert line in rendered.text
    assert rendered.blocks is not None
    # The diff's regressions come first in the same section, escaped too.
    regressions = "Regressions the diff found (1): containers not ready — Deployment payments/&lt;api&gt; &lt;!channel&gt;"
    assert regressions in rendered.text
    # Then what people let past a safeguard (escaped), then the evidence.
    chosen = (
        "Past a safeguard by people's choice:\n• *Delete the stuck pods &lt;web&gt;* (`delete-pod`): approved with "
        "force by <@U0PRIMARY> (_the node is gone &amp; &lt;!channel&gt;_) and <@U0SHADOW>"
    )
    assert any(b.get("text", {}).get("text") == f"{regressions}\n{chosen}\n{line}" for b in rendered.blocks)
    blockkit.message_blocks({"blocks": rendered.blocks})
    clean = sample_context()
    clean["run"] = dataclasses.replace(
        clean["run"],
        failed_skipped=(),
        open_findings=(),
        evidence=(),
        regressions=(),
        left_behind=(),
        chosen=(),
    )
    text = AnnouncementRenderer().render("completed", clean).text
    assert "Evidence" not in text
    assert "Past a safeguard" not in text
    assert "Regressions" not in text
    assert text.startswith(":tada:")


def test_a_completed_run_whose_steps_left_work_for_people_is_not_celebrated() -> None:
    """A drain whose node people chose to skip succeeded, the node still cordoned: the completed
    announcement says so in both its text and its blocks, escaped, with no :tada:."""
    context = sample_context()
    left = (
        "• *Drain node group ng-a &lt;blue&gt;* (`drain-ng-a`): 1 node(s) skipped, still cordoned: n&lt;1&gt;"
    )
    only = dict(context, run=dataclasses.replace(context["run"], failed_skipped=(), open_findings=()))
    for ctx, head in (
        (only, ":warning: *Kubernetes upgrade of prod completed, not all done*: the plan's target is"),
        (context, ":warning: *Kubernetes upgrade of prod completed with 1 failed step skipped*"),
    ):
        rendered = AnnouncementRenderer().render("completed", ctx)
        assert rendered.text.startswith(head)
        assert left in rendered.text
        assert ":tada:" not in rendered.text
        assert rendered.blocks is not None
        assert any(left in b.get("text", {}).get("text", "") for b in rendered.blocks)
        blockkit.message_blocks({"blocks": rendered.blocks})
    assert "Also not all done:\n" + left in AnnouncementRenderer().render("completed", context).text
