"""`/upgrade note`: a timestamped note in the active run's thread and in its audit trail."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core.runs.report import build_report, render
from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLAN = """\
name: {name}
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [S0LEADS]
steps:
  - id: drain
    title: Drain the old nodes
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
"""


@pytest.fixture
def services(write_config: Callable[..., Path], slack_stub: SlackStub) -> Iterator[Services]:
    config = write_config(
        "channels: {operations: C0OPS}\nclusters:\n  prod: {kubeconfig: /nonexistent, context: prod}\n"
    )
    built = assemble(load_settings(config, slack_env(slack_stub.api_url)))
    for name in ("roll", "other"):
        built.store.save_plan(name=name, text=PLAN.format(name=name), loaded_by="U0PRIMARY", loaded_at=T0)
    try:
        yield built
    finally:
        built.close()


def say(services: Services, text: str, user: str = "U0PRIMARY") -> tuple[bool, str]:
    outcome = services.router.handle(
        CommandRequest(text=text, user_id=user, channel_id="C0OPS", source="slack")
    )
    return outcome.ok, outcome.rendered.text


def thread(stub: SlackStub) -> list[str]:
    return [str(c.params["text"]) for c in stub.calls_to("chat.postMessage") if c.params.get("thread_ts")]


def test_a_note_goes_into_the_runs_thread_with_its_time_and_author_and_into_the_audit(
    services: Services, slack_stub: SlackStub
) -> None:
    ok, text = say(services, "note drained ip-10-0-1-7 by hand")
    assert not ok
    assert "there is no active run to add a note to" in text

    ok, started = say(services, "start roll")
    assert ok, started
    (run,) = services.store.runs()
    ok, text = say(
        services, 'note "drained ip-10-0-1-7 by hand: <!channel> its PDB blocked the bot"', "U0SHADOW"
    )
    assert ok, text
    assert f"Noted in the thread of run `{run.id}`" in text
    (line,) = [t for t in thread(slack_stub) if t.startswith(":memo:")]
    card = next(c for c in slack_stub.calls_to("chat.postMessage") if not c.params.get("thread_ts"))
    assert line.startswith(":memo: Note from <@U0SHADOW> at <!date^")
    assert line.endswith(": drained ip-10-0-1-7 by hand: &lt;!channel&gt; its PDB blocked the bot")
    notes = [e for e in services.store.audit_entries() if e.kind == "run" and e.subcommand == "note"]
    assert [(e.user_id, e.run_id) for e in notes] == [("U0SHADOW", run.id)]
    assert notes[0].detail.startswith("drained ip-10-0-1-7 by hand: <!channel> its PDB blocked the bot")
    assert all(
        c.params.get("thread_ts") == card.response["ts"] for c in slack_stub.calls_to("chat.postMessage")[1:]
    )


def test_only_the_runs_roster_may_note_and_several_runs_need_run(
    services: Services, slack_stub: SlackStub
) -> None:
    assert say(services, "start roll")[0]
    ok, text = say(services, "note I was here", "U0STRANGER")
    assert not ok
    assert "roster" in text
    assert say(services, "start other")[0]
    ok, text = say(services, "note which one?")
    assert not ok
    assert "several runs are active" in text
    assert "`--run ID`" in text
    other = next(r for r in services.store.runs() if r.plan_name == "other")
    ok, text = say(services, f"note --run {other.id} vendor call: the AMI is fine")
    assert ok, text
    assert other.id in text
    ok, text = say(services, "note")
    assert not ok
    assert "TEXT" in text


def test_the_reports_notes_hold_a_note_made_during_the_run(services: Services) -> None:
    ok, started = say(services, "start roll")
    assert ok, started
    (run,) = services.store.runs()
    ok, text = say(services, "note called the vendor: the NLB drain delay is 300 s", "U0SHADOW")
    assert ok, text

    report = build_report(services.store, run.id, now=T0)
    (note,) = report.notes
    assert note.endswith(" U0SHADOW: called the vendor: the NLB drain delay is 300 s")
    markdown = render(report, "md").decode()
    notes = markdown.split("## Notes\n", 1)[1].split("\n## ", 1)[0]
    assert f"- {note}" in notes
    html = render(report, "html").decode()
    notes = html.split("<h2>Notes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "U0SHADOW: called the vendor: the NLB drain delay is 300 s" in notes


def test_the_same_plan_is_not_started_twice_on_its_cluster_while_a_run_of_it_is_live(
    services: Services,
) -> None:
    """A second person (or the same command twice) would start a second run that cordons and drains
    the same node groups: refused, naming the live run and how to end it."""
    ok, started = say(services, "start roll")
    assert ok, started
    (run,) = services.store.runs()
    ok, text = say(services, "start roll", "U0SHADOW")
    assert not ok
    assert f"run `{run.id}` of `roll` is already active on prod" in text
    assert f"`/upgrade abort {run.id} --reason …`" in text
    assert len(services.store.runs()) == 1
    assert say(services, "start other")[0]  # another plan is another matter
    assert say(services, f'abort {run.id} --reason "wrong window"')[0]
    assert say(services, "start roll")[0]  # once it is over, the plan starts again


def test_the_mentions_a_person_types_in_a_note_stay_mentions_and_nothing_else_pings(
    services: Services, slack_stub: SlackStub
) -> None:
    """`/upgrade note ping @shadow see #upgrades` showed `&lt;@U0SHADOW&gt;`: nobody was told."""
    ok, started = say(services, "start roll")
    assert ok, started
    typed = "ping <@U0SHADOW|shadow> and <!subteam^S0LEADS|@leads> in <#C0OPS|upgrades>, not <!channel> or <https://x.example|x>"
    ok, text = say(services, f'note "{typed}"')
    assert ok, text
    (line,) = [t for t in thread(slack_stub) if t.startswith(":memo:")]
    assert line.endswith(
        ": ping <@U0SHADOW> and <!subteam^S0LEADS> in <#C0OPS>, not &lt;!channel&gt; or &lt;https://x.example|x&gt;"
    )
    # A typed mention in a skip's reason, on the card as in the thread.
    ok, text = say(services, 'skip drain --reason "done by hand, ask <@U0SHADOW|shadow>"')
    assert ok, text
    (skipped,) = [t for t in thread(slack_stub) if t.startswith(":fast_forward:")]
    assert skipped.endswith(": done by hand, ask <@U0SHADOW>")
    card_ts = next(
        c for c in slack_stub.calls_to("chat.postMessage") if not c.params.get("thread_ts")
    ).response["ts"]
    card = [c.params["text"] for c in slack_stub.calls_to("chat.update") if c.params["ts"] == card_ts][-1]
    assert "ask <@U0SHADOW>" in card
    assert "&lt;@" not in card
