"""Why a run paused on a job's Inconclusive evidence, as its card says it: the job's own reason, its
card line's, and only last its question (a background check's whole question once filled the
card's reason: "…Wait (check again), waive this check …, or abort the step?. No data never passes.")."""

from __future__ import annotations

from bot.core.jobs.alerts import no_data_choice
from bot.core.jobs.base import Tick
from bot.core.jobs.service import _reason

QUESTION = (
    "The drain paused before its next node: background alerts is Inconclusive — Alertmanager answered "
    "HTTP 503. Wait (check again), waive this check for the rest of the step (with a reason), or abort the step?"
)


def test_the_pause_reason_is_the_jobs_reason_then_its_card_line_then_its_question() -> None:
    choice = no_data_choice("background", 1, QUESTION)
    card = (
        "Waiting on evidence: background alerts is Inconclusive — Alertmanager answered HTTP 503",
        "ip-10-0-0-21 cordoned",
    )
    assert _reason(
        Tick(progress={"unavailable": "Alertmanager answered HTTP 503"}, card=card, choice=choice)
    ) == ("Alertmanager answered HTTP 503")
    assert _reason(Tick(progress={}, card=card, choice=choice)) == (
        "background alerts is Inconclusive — Alertmanager answered HTTP 503"
    )
    assert _reason(Tick(progress={}, card=("ip-10-0-0-21 cordoned",), choice=choice)) == QUESTION[:300]
