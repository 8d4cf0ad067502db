"""The card examples in the docs read as the card renders them: a step's note (`· _skipped by …_`)
goes through the card template's `people` filter, so it names people as mentions (`<@U0PRIMARY>`),
never as the raw ids the store keeps. The examples are pasted from rehearsals; a rendering change
that leaves them behind fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markupsafe import Markup

from bot.core.rendering import people

ROOT = Path(__file__).resolve().parent.parent
#: A step's note on a card line, in a pasted example: JSON-escaped (`\n`) or as plain text.
_NOTE = re.compile(r" · _(.+?)_(?=\\n|\"|\n)")


@pytest.mark.parametrize("page", ["paused-card.md", "run-card.md"])
def test_the_step_notes_of_a_card_example_name_people_as_the_card_does(page: str) -> None:
    notes = _NOTE.findall((ROOT / "docs" / page).read_text(encoding="utf-8"))
    assert notes  # the page still shows a card with step notes
    assert [n for n in notes if str(people(Markup(n))) != n] == []
