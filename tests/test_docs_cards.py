"""The card examples in the docs read as the card renders them: a step's note (`· _skipped by …_`)
goes through the card template's `people` filter, so it names people as mentions (`<@U0PRIMARY>`),
never as the raw ids the store keeps; so do the thread lines other pages quote (the run thread's
template, `runs/event`). The examples are pasted from rehearsals; a rendering change that leaves
them behind fails here."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from markupsafe import Markup

from bot.core.people import StaticDirectory
from bot.core.rendering import Renderer, people
from bot.core.runs import machine as R
from bot.core.runs.paused import ending
from bot.core.runs.plans import parse_plan
from bot.resources import BUILTIN_TEMPLATES

ROOT = Path(__file__).resolve().parent.parent
#: A step's note on a card line, in a pasted example: JSON-escaped (`\n`) or as plain text.
_NOTE = re.compile(r" · _(.+?)_(?=\\n|\"|\n)")


@pytest.mark.parametrize("page", ["paused-card.md", "run-card.md"])
def test_the_step_notes_of_a_card_example_name_people_as_the_card_does(page: str) -> None:
    notes = _NOTE.findall((ROOT / "docs" / page).read_text(encoding="utf-8"))
    assert notes  # the page still shows a card with step notes
    assert [n for n in notes if str(people(Markup(n))) != n] == []


#: A plan whose delete-pod gate two people pass, one with force: the thread says force was not
#: the gate's (`force_declined`).
FORCE_PLAN = """\
name: f
cluster: prod
current_version: "1.29"
target_version: "1.29"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: UTC}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
steps:
  - id: pods
    title: Delete stuck pods
    gate: {approve: [primary, shadow]}
    actions: [{delete-pod: {workload: deployment/shop/web, only: not-ready}}]
"""
T0 = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)


def _thread_line(run: R.Run, event: R.Event) -> str:
    """The run's thread line for `event`, as `RunCards.thread_lines` renders it."""
    context = {"event": event, "run": run, "zone": "UTC", "at": T0, "ending": ending(run)}
    return Renderer([BUILTIN_TEMPLATES]).render("runs/event", context).text


def _quoted(page: str, starts: str) -> str:
    """The page's code span that begins with `starts`, its line breaks read as spaces."""
    text = " ".join((ROOT / "docs" / page).read_text(encoding="utf-8").split())
    found = re.search(rf"`({re.escape(starts)}[^`]*)`", text)
    assert found is not None, f"{page} no longer quotes `{starts}…`"
    return found[1]


def test_a_thread_line_the_docs_quote_reads_as_the_run_thread_renders_it() -> None:
    # The pages quoted the bot's words with people's raw ids ("force was chosen by U… only",
    # "by U0PRIMARY and U0SHADOW"): the thread's template names them as mentions.
    plan = parse_plan(FORCE_PLAN, source="f.yaml")
    run = R.new_run("R1", plan, by="U0PRIMARY", now=T0).run
    for who, decision in (("U0PRIMARY", "force"), ("U0SHADOW", "approve")):
        out = R.click(run, step_id="pods", epoch=run.step_run("pods").epoch, user_id=who,
                      decision=decision, directory=StaticDirectory({}), now=T0, reason="its node is gone")  # fmt: skip
        run = out.run
    (declined,) = [e for e in out.events if e.kind == "force_declined"]
    assert _quoted("delete-pod.md", "force was chosen by ") in _thread_line(run, declined)
    # A check step's line, as the store keeps it (`waivers.cover_labels`: the ids who waived).
    checked = R.Event(
        kind="step_succeeded",
        step_id="pods",
        detail="passed: no Required findings left unaccepted, …; relied on waiver 3 (API001 "
        "kube-system/pod-identity-webhook by U0PRIMARY and U0SHADOW until …: why)",
    )
    assert _quoted("checks.md", "passed: no Required findings") in _thread_line(run, checked)
