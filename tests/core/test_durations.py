"""The one duration grammar: what a person typed is quoted back as typed, with the form it takes."""

from __future__ import annotations

import re

import pytest

from bot.core.durations import parse_duration


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("15 minutes", "'15 minutes' is not a duration like 90s, 30m, 1h30m, 2d or 1w (write 15m)"),
        ("2 hours", "'2 hours' is not a duration like 90s, 30m, 1h30m, 2d or 1w (write 2h)"),
        ("1hr", "'1hr' is not a duration like 90s, 30m, 1h30m, 2d or 1w (write 1h)"),
        ("3 Days", "'3 Days' is not a duration like 90s, 30m, 1h30m, 2d or 1w (write 3d)"),
        # A month is no unit of the grammar: no "write 1m" (a minute) for it.
        ("1 month", "'1 month' is not a duration like 90s, 30m, 1h30m, 2d or 1w"),
        ("soon", "'soon' is not a duration like 90s, 30m, 1h30m, 2d or 1w"),
    ],
)
def test_a_duration_not_in_the_grammar_is_quoted_as_typed_with_its_written_form(
    typed: str, said: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        parse_duration(typed)


def test_the_grammar_still_reads_spaces_between_parts() -> None:
    assert parse_duration("1h 30m").total_seconds() == 5400
