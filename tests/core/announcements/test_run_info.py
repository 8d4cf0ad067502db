"""The run as announcements see it: which step an announcement names."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core.announcements.service import run_info
from bot.core.people import StaticDirectory
from bot.core.runs.machine import abort, action_finished, click, new_run
from bot.core.runs.plans import parse_plan

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
