"""The run report names people by their Slack display names (issue 40 item 5e): looked up with
users.info through the real slack_sdk client against the loopback stub, cached in the store, and
read from the cache when Slack is not there; the JSON keeps the ids, with the names beside them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from slack_sdk import WebClient

from bot.adapters.slack import SlackDirectory
from bot.adapters.store import Store
from bot.core.runs.report import build_report, render
from bot.core.runs.reportrender import vote_words
from bot.records import Approval
from tests.support.report_runs import ROSTER, approver_of, step_index, stored_run
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path}/bot.db")
    yield store
    store.close()


def _directory(stub: SlackStub) -> SlackDirectory:
    return SlackDirectory(WebClient(token=BOT_TOKEN, base_url=stub.api_url))


def test_the_report_names_people_by_display_name_and_caches_them(store: Store, slack_stub: SlackStub) -> None:
    slack_stub.users["U0PRIMARY"] = {"id": "U0PRIMARY", "name": "priya", "profile": {"display_name": "Priya"}}
    slack_stub.users["U0SHADOW"] = {
        "id": "U0SHADOW",
        "name": "sam",
        "profile": {"display_name": "", "real_name": "Sam Ito"},
    }
    run_id = stored_run(store)

    report = build_report(store, run_id, now=NOW, directory=_directory(slack_stub))
    md = render(report, "md").decode()

    assert "- **Roster**: coordinator: U0COORD; primary: @Priya; shadow: @Sam Ito" in md
    assert re.search(r"\| approved the start by @Priya at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \|", md)
    assert re.search(r"\| approved the start by @Sam Ito at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \|", md)
    assert "checks failed and was skipped by @Priya (the findings were reviewed)" in md
    # The report quotes the trail's end: the last step's approval, by name.
    names = {"U0PRIMARY": "Priya", "U0SHADOW": "Sam Ito"}
    assert f"| @{names[approver_of(step_index('announce-done'))]} | approved announce-done | ok |" in md
    html = render(report, "html").decode()
    assert "approved the start by @Sam Ito at" in html
    # The data keeps the ids; the names are beside them.
    data = json.loads(render(report, "json"))
    assert data["roster"]["primary"] == ["U0PRIMARY"]
    assert data["created_by"] == "U0PRIMARY"
    assert data["people"] == {"U0PRIMARY": "Priya", "U0SHADOW": "Sam Ito"}
    # Each person asked once (the coordinator is unknown to Slack: asked, and left an id).
    asked = sorted(c.params["user"] for c in slack_stub.calls_to("users.info"))
    assert asked == ["U0COORD", "U0PRIMARY", "U0SHADOW"]

    # Within the cache's day nobody is asked again; without Slack the cache names them.
    build_report(store, run_id, now=NOW + timedelta(hours=2), directory=_directory(slack_stub))
    assert len(slack_stub.calls_to("users.info")) == 4  # only the never-found coordinator again
    offline = render(build_report(store, run_id, now=NOW + timedelta(days=3)), "md").decode()
    assert "- **Roster**: coordinator: U0COORD; primary: @Priya; shadow: @Sam Ito" in offline


def test_slack_failing_leaves_the_report_with_ids_not_an_error(store: Store, slack_stub: SlackStub) -> None:
    run_id = stored_run(store)
    slack_stub.fail_next("users.info", error="account_inactive", times=10)
    report = build_report(store, run_id, now=NOW, directory=_directory(slack_stub))
    assert report.people == {}
    assert (
        "- **Roster**: coordinator: U0COORD; primary: U0PRIMARY; shadow: U0SHADOW"
        in render(report, "md").decode()
    )


def test_each_vote_reads_as_words_not_as_its_decision_and_phase() -> None:
    assert vote_words("skip", "skip") == "voted to skip"  # it read "skip skip by …"
    assert vote_words("approve", "done") == "confirmed done"
    assert vote_words("reject", "done") == "reported a failure"
    assert vote_words("evidence_waive", "evidence_waive") == "voted to waive the evidence"
    assert vote_words("odd", "odd") == "odd"
    assert vote_words("odd", "later") == "odd (later)"


def test_the_summary_counts_a_steps_start_and_done_as_two_approvals_of_one_step(store: Store) -> None:
    """It read "U0PRIMARY: 15 gate(s) — …, diff, diff (done)": one step's two gates as two."""
    run_id = stored_run(store)
    store.commit_run(
        run_id=run_id, expected_version=2, state="completed", roster=dict(ROSTER), reason="",
        updated_at=NOW, outbox=[],
        new_approvals=[
            Approval(step_id="diff", phase="done", epoch=2, user_id="U0PRIMARY", roles=("primary",),
                     decision="approve", at=NOW)
        ],
    )  # fmt: skip
    md = render(build_report(store, run_id, now=NOW), "md").decode()
    (line,) = [x for x in md.splitlines() if x.startswith("- **Approved**: ")]
    mine = line.removeprefix("- **Approved**: ").split("; U0SHADOW: ")[0]
    assert mine.startswith("U0PRIMARY: 15 approvals on 14 steps — snapshot-pre, announce-start, ")
    assert mine.endswith(", snapshot-post, diff (start and done)")
    assert "diff (done)" not in line
    assert "; U0SHADOW: 14 approvals — checks, " in line
