"""The run as announcements see it: which step an announcement names, and who its failed steps name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.core.announcements.runinfo import plan_info, run_info
from bot.core.announcements.templates import AnnouncementRenderer, build_context
from bot.core.people import StaticDirectory
from bot.core.runs.machine import abort, action_finished, click, new_run, skip_step
from bot.core.runs.plans import parse_plan
from tests.support import blockkit

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLAN = """\
name: t
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
roster: {primary: [U0P], shadow: [U0S], coordinator: [U0C]}
steps:
  - {id: snap, title: Snapshot, gate: {any_of: [primary]}, actions: [{snapshot: {label: pre}}]}
  - {id: drain, title: Drain the workers, gate: {any_of: [primary]}, actions: [{snapshot: {label: mid}}]}
  - {id: restart, title: Restart web, gate: {any_of: [primary]}, actions: [{snapshot: {label: post}}]}
"""


def test_an_aborted_run_names_the_step_it_stopped_at_not_the_last_one_done() -> None:
    run = new_run("r1", parse_plan(PLAN), by="U0P", now=T0).run
    for step in ("snap", "drain"):
        sr = run.step_run(step)
        run = click(
            run,
            step_id=step,
            epoch=sr.epoch,
            user_id="U0P",
            decision="approve",
            directory=StaticDirectory({}),
            now=T0,
        ).run
        run = action_finished(
            run, step_id=step, epoch=run.step_run(step).epoch, ok=True, detail="", now=T0
        ).run
    completed_so_far = run_info(run)
    assert completed_so_far.step is not None
    assert (completed_so_far.step.index, completed_so_far.step.name) == (2, "Drain the workers")
    aborted = run_info(abort(run, by="U0C", reason="web capacity", now=T0).run)
    assert aborted.state == "aborted"
    assert aborted.step is not None
    # The card says "stopped at `restart`"; the announcement said "aborted at step 2 (Drain the workers)".
    assert (aborted.step.index, aborted.step.total, aborted.step.name) == (3, 3, "Restart web")


def test_the_completed_announcement_names_who_rejected_a_skipped_step_as_a_mention() -> None:
    """A step rejected at its gate, then skipped: its failure reads "rejected by U0SHADOW: …",
    which the announcement showed as the raw id, where the skip's own "skipped by" was a mention."""
    plan = parse_plan(
        PLAN.replace("roster: {primary: [U0P], shadow: [U0S], coordinator: [U0C]}", TEAM).replace(
            "gate: {any_of: [primary]}, actions: [{snapshot: {label: pre}}]",
            "gate: {any_of: [primary, shadow]}, actions: [{snapshot: {label: pre}}]",
        )
    )
    run = new_run("r1", plan, by="U0PRIMARY", now=T0).run
    directory = StaticDirectory({})
    run = click(
        run,
        step_id="snap",
        epoch=run.step_run("snap").epoch,
        user_id="U0SHADOW",
        decision="reject",
        directory=directory,
        now=T0,
        reason="the registry is down <!channel>",
    ).run
    run = skip_step(
        run, step_id="snap", user_id="U0PRIMARY", directory=directory, reason="taken by hand", now=T0
    ).run
    info = run_info(run)
    (skipped,) = info.failed_skipped
    assert skipped.failure.startswith("rejected by U0SHADOW: ")  # the note as the run keeps it
    context = build_context(plan=plan_info(run.plan), roster=run.roster, run=info)
    rendered = AnnouncementRenderer().render("completed", context)
    line = (
        "• *Snapshot* (`snap`) failed: rejected by <@U0SHADOW>: the registry is down &lt;!channel&gt; "
        "— skipped by <@U0PRIMARY>: _taken by hand_"
    )
    assert line in rendered.text
    assert rendered.blocks is not None
    assert any(line in text for text in _texts(rendered.blocks))
    blockkit.message_blocks({"blocks": rendered.blocks})


TEAM = "roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}"


def _texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [str(b["text"]["text"]) for b in blocks if b.get("type") == "section"]
