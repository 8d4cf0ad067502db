"""A rehearsal prints its card at the end only: the text poster keeps the card's last edit
unrendered and renders it when it is printed, so the edits in between cost no rendering; what it
prints is what rendering every edit printed."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.delivery import Deliveries
from bot.core.people import StaticDirectory
from bot.core.rendering import Rendered, Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import RunCards
from bot.core.runs.service import Actor, RunService
from bot.errors import DatabaseUnwritable
from bot.frontdoor.textposter import TextPoster
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.run_service import PLAN, T0


class CountingRenderer(Renderer):
    """The bot's renderer, counting the cards it rendered."""

    cards = 0

    def render(self, template: str, context: Mapping[str, Any]) -> Rendered:
        if template == "runs/card":
            self.cards += 1
        return super().render(template, context)


@pytest.fixture
def rehearsed(tmp_path: Path) -> Iterator[tuple[RunService, TextPoster, CountingRenderer]]:
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        store.save_plan(name="tiny", text=PLAN, loaded_by="U0PRIMARY", loaded_at=T0)
        clock = FakeClock(T0)
        poster = TextPoster(io.StringIO())
        renderer = CountingRenderer([BUILTIN_TEMPLATES])
        cards = RunCards(
            deliveries=Deliveries(store=store, poster=poster, clock=clock, owner="test"),
            renderer=renderer,
            clock=clock,
        )
        yield RunService(store=store, directory=StaticDirectory(), clock=clock, cards=cards), poster, renderer
    finally:
        store.close()


def test_a_rehearsal_renders_the_cards_last_edit_when_it_prints_it_and_no_edit_before(
    rehearsed: tuple[RunService, TextPoster, CountingRenderer],
) -> None:
    service, poster, renderer = rehearsed
    run = service.start("tiny", Actor(user_id="U0PRIMARY")).run
    assert renderer.cards == 1  # the card's post: printed as it is posted
    service.click(R.ButtonRef(run_id=run.id, step_id="first", epoch=1), Actor(user_id="U0PRIMARY"))
    run = service.click(R.ButtonRef(run_id=run.id, step_id="first", epoch=2), Actor(user_id="U0SHADOW")).run
    assert run.state is R.RunState.COMPLETED
    assert renderer.cards == 1  # two edits, neither rendered yet
    assert service.cards is not None
    shown = service.cards.renderer.render("runs/card", service.card_context(run)).text
    assert renderer.cards == 2
    assert poster.card == shown  # as rendering each edit showed it
    assert "completed" in poster.card
    assert renderer.cards == 3
    assert poster.card == shown  # rendered once, kept
    assert renderer.cards == 3


def test_a_card_edit_that_cannot_be_rendered_leaves_the_card_as_it_was_and_is_tried_at_the_next_read() -> (
    None
):
    poster = TextPoster(io.StringIO())
    poster.post_message("C0OPS", "the card as posted")
    failing = [True]

    def body() -> tuple[str, None]:
        if failing[0]:
            raise DatabaseUnwritable("the database's disk is full")
        return "the card as edited", None

    poster.update_message_later("C0OPS", "1.0", body)
    poster.update_message_later("C0OPS", "2.0", lambda: pytest.fail("only the card is ever printed"))
    assert poster.card == "the card as posted"
    failing[0] = False
    assert poster.card == "the card as edited"
