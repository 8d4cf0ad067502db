"""The run service against the Slack stub: the card is posted once and edited in place, gate
messages carry their buttons, escalations mention the right people, and text from a plan is
escaped so it can never ping the channel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext
from bot.core.checks.findings import REQUIRED, Finding, Report
from bot.core.delivery import Deliveries
from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import RunCards
from bot.core.runs.handoffs import handoff
from bot.core.runs.report import build_report
from bot.core.runs.reportrender import to_html, to_markdown
from bot.core.runs.service import Actor, RunService
from bot.errors import RunNotFound
from bot.records import StepState
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.run_service import PLAN, T0, tiny
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


@pytest.fixture
def setup(tmp_path: Path, slack_stub: SlackStub) -> Iterator[tuple[RunService, FakeClock, SlackStub]]:
    with tiny(tmp_path, slack_stub) as (service, clock):
        yield service, clock, slack_stub


def thread_texts(stub: SlackStub) -> list[str]:
    return [c.params["text"] for c in stub.calls_to("chat.postMessage") if c.params.get("thread_ts")]


def test_the_card_is_posted_once_and_edited_in_place(setup: tuple[RunService, FakeClock, SlackStub]) -> None:
    service, _, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    (card,) = [c for c in stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]
    assert card.params["channel"] == "C0OPS"
    # Text from the plan is escaped: it shows, it does not ping.
    assert "Drain &lt;!channel&gt; &amp; friends" in card.params["text"]
    (gate,) = [
        c for c in stub.calls_to("chat.postMessage") if "blocks" in c.params and c.params.get("thread_ts")
    ]
    actions = next(b for b in gate.params["blocks"] if b["type"] == "actions")
    assert [e["action_id"] for e in actions["elements"]] == ["gate_approve", "gate_reject"]
    assert actions["elements"][0]["value"] == f"{run.id}|first|1"
    # The card carries the open gate's buttons too.
    card_buttons = next(b for b in card.params["blocks"] if b["type"] == "actions")["elements"]
    assert [e["value"] for e in card_buttons] == [f"{run.id}|first|1"] * 2
    service.click(R.ButtonRef(run_id=run.id, step_id="first", epoch=1), Actor(user_id="U0PRIMARY"))
    updates = [c for c in stub.calls_to("chat.update") if c.params["ts"] == card.response["ts"]]
    assert "running" in updates[-1].params["text"]
    done_buttons = next(b for b in updates[-1].params["blocks"] if b["type"] == "actions")["elements"]
    assert done_buttons[0]["text"]["text"] == "Confirm done: first"
    assert done_buttons[0]["value"] == f"{run.id}|first|2"
    # The closed gate lost its buttons; the "done" gate has its own message.
    retired = [c for c in stub.calls_to("chat.update") if c.params["ts"] == gate.response["ts"]]
    assert retired
    assert "actions" not in json.dumps(retired[-1].params.get("blocks"))
    assert len([c for c in stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")]) == 1


def test_escalation_mentions_whom_the_gate_waits_for_then_the_coordinator_group(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    service.start("tiny", Actor(user_id="U0PRIMARY"))
    clock.set(T0 + timedelta(minutes=9))
    assert service.tick() == []
    clock.set(T0 + timedelta(minutes=10))
    assert len(service.tick()) == 1
    # The primary must act (the gate is theirs); the shadow, who cannot, is not pinged.
    assert thread_texts(stub)[-1] == ":bell: `first` is still waiting for a decision — primary: <@U0PRIMARY>"
    clock.set(T0 + timedelta(minutes=11))
    assert service.tick() == []
    clock.set(T0 + timedelta(minutes=20))
    service.tick()
    assert "coordinator: <!subteam^S0LEADS>" in thread_texts(stub)[-1]
    clock.set(T0 + timedelta(hours=1))
    service.tick()
    failed = [c for c in stub.calls_to("chat.postMessage") if c.params.get("reply_broadcast")]
    assert len(failed) == 1
    assert "no decision within 1h" in failed[0].params["text"]
    audit = [e.subcommand for e in service.store.audit_entries()]
    assert audit.count("escalated") == 2
    assert "timed_out" in audit
    assert "run_paused" in audit


def test_an_audit_row_names_the_plan_zone_time(setup: tuple[RunService, FakeClock, SlackStub]) -> None:
    service, _, _ = setup
    service.start("tiny", Actor(user_id="U0PRIMARY"))
    first = service.store.audit_entries()[0]
    assert first.subcommand == "run_started"
    assert first.detail.endswith("[2026-11-28 22:00 Asia/Tokyo]")


CHECK_PLAN = PLAN.split("  - id: first")[0] + (
    "  - id: first\n"
    '    title: "Pre-flight checks"\n'
    "    gate: {any_of: [primary]}\n"
    "    actions:\n"
    '      - check: {to: "1.30"}\n'
)


def test_a_steps_report_is_uploaded_once_under_its_line_even_when_the_first_upload_fails(
    tmp_path: Path, slack_stub: SlackStub
) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    store.save_plan(name="tiny", text=CHECK_PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
    finding = Finding(
        id="PDB001", severity=REQUIRED, title="t", objects=("Deployment a/b",), why="w", fix="drain by hand"
    )

    def unused(*_: object) -> Any:
        raise AssertionError("not used")

    clock = FakeClock(T0)
    service = RunService(
        store=store,
        directory=StaticDirectory(),
        clock=clock,
        actions=default_registry(),
        action_context=ActionContext(
            take_snapshot=unused,
            compare_snapshots=unused,
            run_check=lambda cluster, to: Report(cluster=cluster, target=to or "", findings=(finding,)),
        ),
        cards=RunCards(
            deliveries=Deliveries(
                store=store,
                poster=SlackGateway(make_web_client(BOT_TOKEN, slack_stub.api_url)),
                clock=clock,
                owner="test",
            ),
            renderer=Renderer([BUILTIN_TEMPLATES]),
            clock=clock,
        ),
    )
    try:
        run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
        # Slack refuses the upload once: the line is posted, the file stays owed (not lost).
        slack_stub.fail_next("files.getUploadURLExternal", error="internal_error")
        service.click(R.ButtonRef(run_id=run.id, step_id="first", epoch=1), Actor(user_id="U0PRIMARY"))
        failed = [t for t in thread_texts(slack_stub) if "*`first` failed*" in t]
        assert len(failed) == 1
        assert "PDB001 (a/b)" in failed[0]
        assert slack_stub.uploads == {}
        # The next publish (any change, the timer, a restart) uploads it; later ones never again.
        for _ in range(3):
            service.publish(service.load(run.id))
        (upload,) = slack_stub.calls_to("files.completeUploadExternal")
        assert upload.params["thread_ts"] == slack_stub.calls_to("chat.postMessage")[0].response["ts"]
        (content,) = slack_stub.uploads.values()
        assert b"drain by hand" in content
        assert len([t for t in thread_texts(slack_stub) if "*`first` failed*" in t]) == 1
    finally:
        store.close()


def test_the_thread_and_the_card_say_once_that_the_window_ended_with_steps_to_go(
    setup: tuple[RunService, FakeClock, SlackStub], tmp_path: Path
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    clock.set(T0 + timedelta(hours=3, minutes=50))  # the window (until 17:00 UTC) is still open
    service.tick()
    assert not any("window ended" in t for t in thread_texts(stub))
    clock.set(T0 + timedelta(hours=4, minutes=5))
    service.tick()
    service.tick()
    (told,) = [c for c in stub.calls_to("chat.postMessage") if "The upgrade window ended" in c.params["text"]]
    assert told.params["text"] == (
        # A Slack date token, read in each reader's zone; its fallback in the plan's zone, as on the card.
        f":warning: The upgrade window ended <!date^{int((T0 + timedelta(hours=4)).timestamp())}^"
        "{date_short_pretty} {time}|2026-11-29 02:00 Asia/Tokyo (2026-11-28 17:00 UTC)>, with the run at `first`, "
        "its last step. The run goes on: pause or abort it if it must not run outside the window, or "
        "note why it may."
    )
    # The audit row says it in words, in UTC (and the plan's zone, as every run row).
    (row,) = [e for e in service.store.audit_entries(run_id=run.id) if e.subcommand == "window_ended"]
    assert row.detail.startswith(
        "with the run at `first`, its last step (the window ended Sat 28 Nov 17:00 UTC) ["
    )
    assert told.params["reply_broadcast"] is True  # the channel hears it, not only the thread
    assert ":warning: window ended" in stub.calls_to("chat.update")[-1].params["text"]
    # A restarted bot (a new service on the same database) does not say it again.
    again = RunService(store=service.store, directory=StaticDirectory(), clock=clock, cards=service.cards)
    again.tick()
    assert (
        len([c for c in stub.calls_to("chat.postMessage") if "The upgrade window ended" in c.params["text"]])
        == 1
    )
    # The report names the work done after the window.
    ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
    assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted
    report = build_report(service.store, run.id, now=clock())
    assert any(
        f.startswith("worked past the window's end (2026-11-29 02:00 Asia/Tokyo): `first` (started 02:05)")
        for f in report.findings
    ), report.findings


def test_the_report_says_the_work_past_the_window_once_each_step_once_with_its_times(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, _stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    clock.set(T0 + timedelta(hours=4, minutes=5))  # the window ended at 17:00 UTC (02:00 in Tokyo)
    service.tick()
    assert service.click(
        R.ButtonRef(run_id=run.id, step_id="first", epoch=1), Actor(user_id="U0PRIMARY")
    ).accepted
    clock.set(T0 + timedelta(hours=4, minutes=9))
    assert service.click(
        R.ButtonRef(run_id=run.id, step_id="first", epoch=2), Actor(user_id="U0SHADOW")
    ).accepted
    report = build_report(service.store, run.id, now=clock())
    late = [f for f in report.findings if "past the window" in f]
    # The step started and finished after the end: named once, with both times.
    assert late == ["worked past the window's end (2026-11-29 02:00 Asia/Tokyo): `first` (02:05–02:09)"]
    markdown = to_markdown(report)
    assert markdown.count("worked past the window") == 1, markdown
    # The HTML sets the step's id as code, as the Markdown and Slack show it, not in backticks.
    html = to_html(report, charts=None)
    assert "Asia/Tokyo): <code>first</code> (02:05–02:09)</li>" in html
    assert "`first`" not in html


def test_a_paused_run_past_its_window_is_told_so_counted_as_its_card_and_reported_without_work(
    tmp_path: Path, slack_stub: SlackStub
) -> None:
    """Paused when the window ends: the thread does not say "the run goes on", and counts the steps
    as the card does (the step now, and the ones after it); a gate that then times out unanswered
    is no work past the window in the report."""
    two = PLAN + (
        "  - id: second\n    title: Second\n    gate: {any_of: [primary]}\n    done: {any_of: [shadow]}\n"
        "  - id: third\n    title: Third\n    gate: {any_of: [primary]}\n    done: {any_of: [shadow]}\n"
    )
    with tiny(tmp_path, slack_stub, two) as (service, clock):
        run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
        service.apply(
            run.id,
            lambda r: R.pause(r, by="U0PRIMARY", reason="calling it a night", now=clock()),
            Actor(user_id="U0PRIMARY"),
        )
        clock.set(T0 + timedelta(hours=4, minutes=5))
        service.tick()
        (told,) = [t for t in thread_texts(slack_stub) if "The upgrade window ended" in t]
        assert (
            "with the run at `first` and 2 more steps to go. The run is paused: resume it only if it may go"
            in (told)
        )
        assert "The run goes on" not in told
        card = slack_stub.calls_to("chat.update")[-1].params["text"]
        assert "▶ `first` · 2 to go" in card
        # Resumed the next morning; nobody answers the gate, which times out an hour later.
        service.apply(run.id, lambda r: R.resume(r, by="U0PRIMARY", now=clock()), Actor(user_id="U0PRIMARY"))
        clock.set(T0 + timedelta(hours=5, minutes=6))
        service.tick()
        assert service.load(run.id).step_run("first").state is StepState.FAILED
        report = build_report(service.store, run.id, now=clock())
        assert not any(f.startswith("worked past the window's end") for f in report.findings), report.findings
        # The window as the team planned it (Tokyo, 22:00–02:00), then UTC; every other time once, in UTC.
        md = to_markdown(report)
        assert (
            "- **Window**: 2026-11-28 22:00 – 2026-11-29 02:00 Asia/Tokyo (2026-11-28 13:00 – 2026-11-28 17:00 UTC)"
        ) in md
        assert "; resumed by U0PRIMARY at 2026-11-28 17:05:00 UTC" in md
        assert "Asia/Tokyo]" not in md
        assert "Asia/Tokyo]" not in to_html(report, charts=None)


def test_an_aborted_run_s_step_waiting_to_be_confirmed_done_is_not_shown_as_running(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
    assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted  # started: its done gate is open
    service.apply(
        run.id,
        lambda r: R.abort(r, by="U0PRIMARY", reason="rollback now", now=clock()),
        Actor(user_id="U0PRIMARY"),
    )
    edits = [c.params["text"] for c in stub.calls_to("chat.update")]
    assert any(
        "this gate is closed; the run was aborted before the step was confirmed done" in t for t in edits
    ), edits
    assert not any("the step is now running" in t for t in edits[-2:])
    card = [t for t in edits if t.startswith(":clipboard:")][-1]
    assert "`first` Drain &lt;!channel&gt; &amp; friends — not confirmed done: the run was aborted" in card


def test_a_thread_post_without_an_answer_that_slack_cannot_be_searched_for_is_not_posted_again(
    tmp_path: Path, slack_stub: SlackStub
) -> None:
    """Slack made the post but its answer never came, and the search for it failed: the claim is
    kept and settled once stale. The outbox released it, and each later pass posted it again."""
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        store.save_plan(name="tiny", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
        clock = FakeClock(T0)
        client = make_web_client(BOT_TOKEN, slack_stub.api_url, timeout=1, sdk_retries=False)
        deliveries = Deliveries(store=store, poster=SlackGateway(client), clock=clock, owner="test")
        cards = RunCards(deliveries=deliveries, renderer=Renderer([BUILTIN_TEMPLATES]), clock=clock)
        service = RunService(store=store, directory=StaticDirectory(), clock=clock, cards=cards)
        run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
        approved = "approved the start of `first`"
        slack_stub.fail_next("chat.postMessage", delay=2, when=lambda p: approved in str(p.get("text", "")))
        slack_stub.fail_next("conversations.replies", status=500)
        ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
        assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted
        for _ in range(3):  # later passes, within the claim's life: nothing posted again
            service.publish(service.load(run.id))
        clock.set(T0 + timedelta(minutes=6))  # stale: settled by a search that now works
        service.publish(service.load(run.id))
        assert len([t for t in thread_texts(slack_stub) if approved in t]) == 1
        assert len([m for m in slack_stub.posted("C0OPS") if approved in str(m.get("text", ""))]) == 1
    finally:
        store.close()


def test_a_channel_archived_under_a_live_run_is_told_to_its_primary_directly_once(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    """The run went on, drains included, with its card and gates in a channel nobody could see,
    and only the log said so."""
    service, _clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run

    def in_ops(params: dict[str, Any]) -> bool:
        return params.get("channel") == "C0OPS"

    stub.fail_next("chat.update", error="is_archived", times=50, when=in_ops)
    stub.fail_next("chat.postMessage", error="is_archived", times=50, when=in_ops)
    ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
    assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted
    service.publish(service.load(run.id))
    told = [c.params for c in stub.calls_to("chat.postMessage") if c.params.get("channel") == "U0PRIMARY"]
    assert len(told) == 1
    assert told[0]["text"].startswith(
        f":warning: Run {run.id} (tiny on prod): its channel <#C0OPS> was archived, "
    )
    assert f"`/upgrade pause {run.id} --reason …`" in told[0]["text"]
    # The coordinator is a user group: nobody to write to directly.
    assert not [
        c for c in stub.calls_to("chat.postMessage") if str(c.params.get("channel", "")).startswith("S")
    ]


def test_the_card_names_who_rejected_a_step_as_a_mention_not_a_raw_id(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, _clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1, decision="reject")
    assert service.click(ref, Actor(user_id="U0PRIMARY"), reason="PDB blocks it").accepted
    card = [
        c.params["text"] for c in stub.calls_to("chat.update") if c.params["text"].startswith(":clipboard:")
    ][-1]
    assert "rejected by <@U0PRIMARY>: PDB blocks it" in card
    assert "rejected by U0PRIMARY" not in card


def test_a_long_abort_reason_is_cut_on_the_card_which_says_the_thread_has_it_whole(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    why = "the canary failed: " + " ".join(f"pod-{i} CrashLoopBackOff" for i in range(40))
    assert 700 < len(why) < 1500
    service.apply(
        run.id, lambda r: R.abort(r, by="U0PRIMARY", reason=why, now=clock()), Actor(user_id="U0PRIMARY")
    )
    card = [
        c.params["text"] for c in stub.calls_to("chat.update") if c.params["text"].startswith(":clipboard:")
    ][-1]
    assert why[:200] in card
    assert why not in card
    assert "… (the whole reason is in the thread)" in card
    (aborted,) = [
        c.params["text"] for c in stub.calls_to("chat.postMessage") if "aborted*" in c.params["text"]
    ]
    assert why in aborted


def test_a_reason_longer_than_the_thread_shows_is_not_said_to_be_there_whole(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    why = "holding: " + "error rates are being checked by the on-call; " * 80
    assert len(why) > 1500
    service.apply(
        run.id, lambda r: R.pause(r, by="U0PRIMARY", reason=why, now=clock()), Actor(user_id="U0PRIMARY")
    )
    card = [
        c.params["text"] for c in stub.calls_to("chat.update") if c.params["text"].startswith(":clipboard:")
    ][-1]
    assert "… (the thread has its first 1,500 characters)" in card
    assert "whole reason" not in card


def test_the_open_gate_s_message_follows_whom_it_waits_for_after_an_approval_and_a_handoff(
    tmp_path: Path, slack_stub: SlackStub
) -> None:
    plan = PLAN.replace(
        "gate: {any_of: [primary]}\n    done: {any_of: [shadow]}",
        "gate: {approve: [primary, shadow]}\n    done: {any_of: [shadow, coordinator]}",
    )
    with tiny(tmp_path, slack_stub, plan) as (service, clock):
        run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
        (gate,) = [
            c
            for c in slack_stub.calls_to("chat.postMessage")
            if "Needs the primary and the shadow" in c.params["text"]
        ]
        assert "still waiting for the primary and the shadow" in gate.params["text"]

        def gate_text() -> str:
            edits = [c for c in slack_stub.calls_to("chat.update") if c.params["ts"] == gate.response["ts"]]
            return str(edits[-1].params["text"]) if edits else str(gate.params["text"])

        publishes = len(slack_stub.calls_to("chat.update"))
        service.publish(service.load(run.id))  # nothing changed: no edit of the gate message
        assert gate_text() == gate.params["text"]
        ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
        assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted
        assert "still waiting for the shadow" in gate_text()
        assert "still waiting for the primary" not in gate_text()
        service.apply(
            run.id,
            lambda r: handoff(r, role="shadow", user_id="U0DANA", by="U0SHADOW", now=clock()),
            Actor(user_id="U0SHADOW"),
        )
        assert "<@U0DANA>" in gate_text()
        assert "<@U0SHADOW>" not in gate_text().split("·")[0]
        edited = len([c for c in slack_stub.calls_to("chat.update") if c.params["ts"] == gate.response["ts"]])
        service.publish(service.load(run.id))
        assert (
            len([c for c in slack_stub.calls_to("chat.update") if c.params["ts"] == gate.response["ts"]])
            == edited
        )
        assert publishes <= len(slack_stub.calls_to("chat.update"))


def test_a_gate_left_open_across_a_pause_counts_its_timeout_and_escalations_from_the_resume(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    clock.set(T0 + timedelta(minutes=5))
    service.apply(
        run.id,
        lambda r: R.pause(r, by="U0PRIMARY", reason="stopping for the night", now=clock()),
        Actor(user_id="U0PRIMARY"),
    )
    # Fifty minutes paused: nobody could answer the gate (clicks on a paused run are refused).
    clock.set(T0 + timedelta(minutes=55))
    service.apply(run.id, lambda r: R.resume(r, by="U0PRIMARY", now=clock()), Actor(user_id="U0PRIMARY"))
    before = len(thread_texts(stub))
    for minutes in (55.5, 56, 60, 64):
        clock.set(T0 + timedelta(minutes=minutes))
        service.tick()
    # No escalation in a row and no timeout minutes after the resume: the gate's clock restarted.
    assert thread_texts(stub)[before:] == []
    assert service.load(run.id).step_run("first").state is StepState.AWAITING_APPROVAL
    clock.set(T0 + timedelta(minutes=66))
    service.tick()
    assert any(":bell:" in t and "`first`" in t for t in thread_texts(stub)[before:]), thread_texts(stub)[
        before:
    ]
    clock.set(T0 + timedelta(hours=1, minutes=56))
    service.tick()
    assert service.load(run.id).step_run("first").state is StepState.FAILED


def test_an_approval_given_again_after_it_lapsed_counts_and_the_thread_says_which_lapsed(
    tmp_path: Path, slack_stub: SlackStub
) -> None:
    plan = PLAN.replace(
        "gate: {any_of: [primary]}\n    done: {any_of: [shadow]}",
        "gate: {approve: [primary, shadow], expires: 30m}\n    done: {any_of: [shadow, coordinator]}",
    )
    with tiny(tmp_path, slack_stub, plan) as (service, clock):
        run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
        ref = R.ButtonRef(run_id=run.id, step_id="first", epoch=1)
        assert service.click(ref, Actor(user_id="U0PRIMARY")).accepted
        clock.set(T0 + timedelta(minutes=35))
        assert service.click(ref, Actor(user_id="U0SHADOW")).accepted
        assert "the primary's approval of 13:00 UTC lapsed after 30m" in thread_texts(slack_stub)[-1]
        assert service.load(run.id).step_run("first").state is StepState.AWAITING_APPROVAL
        # Given again: it counts (the store had refused it as a duplicate of the lapsed one).
        clock.set(T0 + timedelta(minutes=40))
        again = service.click(ref, Actor(user_id="U0PRIMARY"))
        assert again.accepted, again.message
        assert any(
            "approved the start of `first` — again: their own approval of 13:00 UTC lapsed after 30m" in t
            for t in thread_texts(slack_stub)
        )
        reloaded = service.load(run.id)
        assert reloaded.step_run("first").state is StepState.RUNNING  # its done gate is open
        assert reloaded.phase(reloaded.step_run("first")) == "done"
        start_votes = [(a.user_id, a.at) for a in reloaded.approvals if a.phase == "start"]
        assert sorted(start_votes) == [
            ("U0PRIMARY", T0 + timedelta(minutes=40)),
            ("U0SHADOW", T0 + timedelta(minutes=35)),
        ]


def test_a_timeout_that_fell_due_while_no_bot_ran_counts_again_instead_of_failing_the_step(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    service, clock, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    # The bot was down from T0 + 1 min to T0 + 1 h 20 min: the 1 h timeout fell due meanwhile.
    clock.set(T0 + timedelta(hours=1, minutes=20))
    (out,) = service.tick()
    assert [e.kind for e in out.events] == ["timeout_restarted"]
    assert service.load(run.id).step_run("first").state is StepState.AWAITING_APPROVAL
    # Its times as Slack dates, read in each reader's zone; their fallback in the plan's zone.
    assert thread_texts(stub)[-1] == (
        f":hourglass: `first`: its timeout fell due <!date^{int((T0 + timedelta(hours=1)).timestamp())}^"
        "{date_short_pretty} {time}|2026-11-28 23:00 Asia/Tokyo (14:00 UTC)> while the bot was not "
        "running: nobody could answer the gate then, so its 1h counts again from now "
        f"(<!date^{int(clock().timestamp())}^{{date_short_pretty}} {{time}}|2026-11-28 23:20 Asia/Tokyo "
        "(14:20 UTC)>)"
    )
    # The audit row says it in words, in UTC (and the plan's zone, as every run row).
    (row,) = [e for e in service.store.audit_entries(run_id=run.id) if e.subcommand == "timeout_restarted"]
    assert row.detail.startswith(
        "while the bot was not running: nobody could answer the gate then, so its 1h counts again from now "
        "(its timeout fell due Sat 28 Nov 14:00 UTC) ["
    )
    assert not [c for c in stub.calls_to("chat.postMessage") if c.params.get("reply_broadcast")]
    # A bot that ticks finds the next timeout on time: the step fails then, as before.
    clock.set(T0 + timedelta(hours=2, minutes=20))
    service.tick()
    assert service.load(run.id).step_run("first").state is StepState.FAILED
    assert any("no decision within 1h" in t for t in thread_texts(stub))


def test_a_run_id_pasted_with_invisible_marks_or_typed_in_lower_case_finds_the_run(
    setup: tuple[RunService, FakeClock, SlackStub],
) -> None:
    """`/upgrade pause R821CB7` pasted with a zero-width space said "there is no run R821CB7" of the
    run that was live, as did `r821cb7` and a full-width `Ｒ`."""
    service, _, _ = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    fullwidth = "\uff32" + run.id[1:]
    for typed in (f"\u200e{run.id}", f"{run.id}\u200b", run.id.lower(), fullwidth, f" {run.id}\u00a0"):
        assert service.load(typed).id == run.id, repr(typed)
    with pytest.raises(RunNotFound, match="there is no run `R000000`"):
        service.load("R000000")


def test_a_gate_retired_once_is_not_claimed_again_at_each_later_publish(
    setup: tuple[RunService, FakeClock, SlackStub], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every publish of a long run went through each closed gate and claimed its retirement again,
    # refused by the database each time: a write per closed gate for each card edit.
    service, _, stub = setup
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    service.click(R.ButtonRef(run_id=run.id, step_id="first", epoch=1), Actor(user_id="U0PRIMARY"))
    gate = next(
        c for c in stub.calls_to("chat.postMessage") if "blocks" in c.params and c.params.get("thread_ts")
    )
    assert any(c.params["ts"] == gate.response["ts"] for c in stub.calls_to("chat.update"))  # retired
    store = service.store
    claimed: list[str] = []
    claim = store.claim_message

    def counted(**kwargs: Any) -> bool:
        claimed.append(kwargs["key"])
        return claim(**kwargs)

    monkeypatch.setattr(store, "claim_message", counted)
    for _ in range(3):
        service.publish(service.load(run.id))
    assert [k for k in claimed if k.endswith(":retired")] == []
