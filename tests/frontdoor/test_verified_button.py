"""The completed announcement's Verified button (issue 39) through the HTTP front door, really
signed: anyone in the channel may press it; each person is recorded once (a double click records
nothing more), audited, and the announcement is edited in place to name everyone who confirmed, in
order. The lines come from the store, so a second bot process draws the same ones; a press on an
announcement the store does not know gets a short ephemeral reason."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bot.core.announcements.templates import VERIFIED_ACTION
from bot.core.runs.library import assemble_run
from bot.records import ScheduleRow
from tests.support.blockkit import buttons, message_blocks, text_of
from tests.support.front import Front
from tests.support.report_runs import stored_run
from tests.support.watch_harness import wait

START = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)


def _post_completed(front: Front) -> tuple[int, str]:
    """A scheduled run that completed, its completed announcement posted: its id and ts."""
    store = front.services.store
    run_id = stored_run(store, start=START, watch=False)
    rows = store.run_rows(run_id)
    assert rows is not None
    row = rows[0]
    schedule_id = store.create_schedule(
        ScheduleRow(
            id=0, plan_id=row.plan_id, plan_name=row.plan_name, window_start=START,
            window_end=START + timedelta(hours=4), tz="UTC", channel="C0ANNOUNCE", state="started",
            run_id=run_id, created_by="U0PRIMARY", created_at=START,
        ),
        lambda _id: [],
    )  # fmt: skip
    run = assemble_run(store, run_id)
    assert run is not None
    fired = front.services.announcements.run_ended(run)
    assert fired is not None
    assert fired.action == "sent", fired
    (ann,) = store.scheduled_announcements(schedule_id=schedule_id)
    return ann.id, ann.ts


def _lines(front: Front, announcement_id: int) -> list[str]:
    """What the message must say: each who confirmed, once, in order, at their time."""
    return [
        f":white_check_mark: Verified by <@{v.user_id}> at {v.at:%H:%M}"
        for v in front.services.store.verifications(announcement_id)
    ]


def _verified_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Verified by" in line]


def test_two_people_verify_once_each_and_the_announcement_names_both(
    make_front: Callable[..., Front],
) -> None:
    front = make_front()
    announcement_id, ts = _post_completed(front)
    (post,) = front.stub.calls_to("chat.postMessage")
    posted = message_blocks(post.params)
    (button,) = buttons(posted)
    assert button["action_id"] == VERIFIED_ACTION
    assert button["value"] == str(announcement_id)
    assert "Owning teams: check your services, then press *Verified*." in text_of(posted)

    # Not on the roster: the owning teams are anyone in the channel. One presses twice.
    for user in ("U0PAYMENTS", "U0PAYMENTS", "U0SEARCH"):
        assert front.click(user, str(announcement_id), action=VERIFIED_ACTION, message_ts=ts).status == 200
    updates = front.stub.wait_for_calls("chat.update", 3, timeout=30)
    front.workers.shutdown(wait=True)

    store = front.services.store
    assert [v.user_id for v in store.verifications(announcement_id)] == ["U0PAYMENTS", "U0SEARCH"]
    audit = [e for e in store.audit_entries() if e.kind == "announcement" and e.subcommand == "verified"]
    assert [(e.user_id, e.outcome) for e in audit] == [("U0PAYMENTS", "ok"), ("U0SEARCH", "ok")]
    assert all(e.correlation_id for e in audit)

    last = front.stub.calls_to("chat.update")[-1].params
    assert len(updates) == 3
    assert all(u.params["channel"] == "C0ANNOUNCE" and u.params["ts"] == ts for u in updates)
    blocks = message_blocks(last)
    expected = _lines(front, announcement_id)
    assert len(expected) == 2
    assert _verified_lines(text_of(blocks)) == expected
    assert _verified_lines(str(last["text"])) == expected
    # The button stays for the others.
    assert [b["value"] for b in buttons(blocks)] == [str(announcement_id)]
    # Edited in place: nothing new was posted.
    assert len(front.stub.calls_to("chat.postMessage")) == 1


def test_a_second_bot_process_draws_the_same_lines_from_the_store(
    make_front: Callable[..., Front],
) -> None:
    first = make_front()
    announcement_id, ts = _post_completed(first)
    first.click("U0PAYMENTS", str(announcement_id), action=VERIFIED_ACTION, message_ts=ts)
    first.stub.wait_for_calls("chat.update", 1, timeout=30)
    first.stop()

    second = make_front()
    # A new click, not the first one delivered again: its trigger id must differ.
    second.requests = first.requests
    second.click("U0SEARCH", str(announcement_id), action=VERIFIED_ACTION, message_ts=ts)
    second.stub.wait_for_calls("chat.update", 2, timeout=30)
    second.workers.shutdown(wait=True)
    last = second.stub.calls_to("chat.update")[-1].params
    lines = _verified_lines(text_of(message_blocks(last)))
    assert [line.split("<@")[1].split(">")[0] for line in lines] == ["U0PAYMENTS", "U0SEARCH"]
    assert lines == _lines(second, announcement_id)


def _refusal(front: Front) -> dict[str, object]:
    """The ephemeral answer to the last click."""
    refused = wait(
        lambda: [
            c.params
            for c in front.stub.calls_to("response_url")
            if c.path.endswith(f"click-{front.requests}")
        ],
        timeout=10,
    )
    assert refused[0]["response_type"] == "ephemeral"
    assert "Traceback" not in str(refused[0]["text"])
    return dict(refused[0])


def test_a_press_on_an_announcement_the_store_does_not_know_is_refused_ephemerally(
    make_front: Callable[..., Front],
) -> None:
    front = make_front()
    front.click("U0PAYMENTS", "424242", action=VERIFIED_ACTION, message_ts="1700000000.000100")
    text = str(_refusal(front)["text"])
    assert text.startswith(
        ":no_entry: this announcement is not known to the bot, so nothing was recorded _(ref "
    )
    assert front.stub.calls_to("chat.update") == []
    assert front.services.store.verifications(424242) == []


def test_a_copy_of_the_button_on_another_message_confirms_nothing(make_front: Callable[..., Front]) -> None:
    front = make_front()
    announcement_id, _ts = _post_completed(front)
    front.click("U0PAYMENTS", str(announcement_id), action=VERIFIED_ACTION, message_ts="1700000000.000100")
    text = str(_refusal(front)["text"])
    assert "this message is not the announcement the bot posted, so nothing was recorded" in text
    assert front.stub.calls_to("chat.update") == []
    assert front.services.store.verifications(announcement_id) == []
    (entry,) = [e for e in front.services.store.audit_entries() if e.subcommand == "verified"]
    assert entry.outcome == "refused"
