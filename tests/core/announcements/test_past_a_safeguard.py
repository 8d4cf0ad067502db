"""The completed announcement says what people let past a safeguard as what it was: a gate approved
with force (both people, each one's reason) and Inconclusive evidence waived — "Waived", with the
reason nothing was measured, never "Successful" with counts nobody read. The run is built by the
run machine (real votes), the evidence from the alerts job's stored progress as the store keeps it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from bot.core.announcements.service import evidence_lines, plan_context
from bot.core.announcements.templates import AnnouncementRenderer
from bot.core.evidence.view import EvidenceView, step_view
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.plans import parse_plan
from tests.support import blockkit

T0 = datetime(2026, 11, 29, 3, 40, tzinfo=UTC)
PLAN = """\
name: t
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T03:00", end: "2026-11-29T06:00", timezone: UTC}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}
steps:
  - id: delete-pod
    title: Delete the stuck pods
    gate: {approve: [primary, shadow]}
    actions: [{delete-pod: {workload: deployment/shop/web, only: not-ready}}]
  - id: settle
    title: No new alerts
    gate: {any_of: [primary]}
    actions: [{alerts: {settle: 10m, timeout: 30m}}]
"""
WAIVED = "alerts: waived by <@U0PRIMARY> (token rotates at 04:00) and <@U0SHADOW> (Grafana is green)"
#: The alerts job's progress as it stands once people waived it: Alertmanager answered 401, so
#: `seen` holds nothing measured (`bot.core.jobs.alerts`).
PROGRESS = {
    "started": "2026-11-29T03:51:00Z",
    "settle": 600,
    "timeout": 1800,
    "inconclusive": 1,
    "unavailable": "Alertmanager refused the bot's credentials (HTTP 401)",
}


def _run() -> R.Run:
    directory = StaticDirectory({})
    run = R.new_run("r1", parse_plan(PLAN), by="U0PRIMARY", now=T0).run
    for user, why in (("U0PRIMARY", "the node is gone"), ("U0SHADOW", "its pods cannot move")):
        sr = run.step_run("delete-pod")
        out = R.click(
            run,
            step_id="delete-pod",
            epoch=sr.epoch,
            user_id=user,
            decision="force",
            reason=why,
            directory=directory,
            now=T0,
        )
        assert out.accepted, out.message
        run = out.run
    run = R.action_finished(
        run, step_id="delete-pod", epoch=run.step_run("delete-pod").epoch, ok=True, detail="", now=T0
    ).run
    sr = run.step_run("settle")
    run = R.click(
        run,
        step_id="settle",
        epoch=sr.epoch,
        user_id="U0PRIMARY",
        decision="approve",
        directory=directory,
        now=T0,
    ).run
    epoch = run.step_run("settle").epoch
    run = R.pause_on_evidence(run, step_id="settle", epoch=epoch, why="Alertmanager answered 401", now=T0).run
    for user, why in (("U0PRIMARY", "token rotates at 04:00"), ("U0SHADOW", "Grafana is green")):
        sr = run.step_run("settle")
        run = R.evidence_waive_vote(
            run, step_id="settle", epoch=sr.epoch, user_id=user, directory=directory, reason=why, now=T0
        ).run
    run = R.action_finished(
        run, step_id="settle", epoch=run.step_run("settle").epoch, ok=True, detail=WAIVED, now=T0
    ).run
    assert run.state is R.RunState.COMPLETED
    return run


def _stored(run_id: str, step_ids: Sequence[str]) -> EvidenceView | None:
    """The evidence source the announcement service reads (`StoredEvidence`), over one stored job."""
    if "settle" not in step_ids:
        return None
    return step_view("alerts", PROGRESS, done=True, ok=True, name="settle", detail=WAIVED)


def test_the_completed_announcement_says_force_and_waived_evidence_as_past_a_safeguard() -> None:
    run = _run()
    lines = evidence_lines(_stored, run)
    assert [(e.step_id, e.outcome) for e in lines] == [("settle", "Waived")]
    rendered = AnnouncementRenderer().render("completed", plan_context(run.plan, run=run, evidence=lines))
    text = rendered.text
    assert "Past a safeguard by people's choice:\n" in text
    assert (
        "• *Delete the stuck pods* (`delete-pod`): approved with force by <@U0PRIMARY> (_the node is gone_)"
        " and <@U0SHADOW> (_its pods cannot move_)\n"
    ) in text
    assert (
        "• *No new alerts* (`settle`): evidence waived by <@U0PRIMARY> (_token rotates at 04:00_)"
        " and <@U0SHADOW> (_Grafana is green_)\n"
    ) in text
    assert (
        "Evidence: `settle` Alerts: could not be read (Alertmanager refused the bot's credentials"
        " (HTTP 401)) (Waived)"
    ) in text
    assert "0 new" not in text
    assert "Successful" not in text
    assert rendered.blocks is not None
    blockkit.message_blocks({"blocks": rendered.blocks})
