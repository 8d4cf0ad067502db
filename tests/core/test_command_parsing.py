"""Chat-safe parsing: what chat clients do to typed text is undone before arguments are read."""

from __future__ import annotations

import pytest

from bot.core.command import normalise, parse_user, split_words
from bot.errors import UsageError


def test_smart_quotes_and_dashes_are_normalised() -> None:
    assert split_words("skip drain \u2014reason \u201cPDB blocks it\u201d") == [
        "skip",
        "drain",
        "--reason",
        "PDB blocks it",
    ]
    assert split_words("pause run-1 \u2013reason \u201cit\u2019s late\u201d") == [
        "pause",
        "run-1",
        "--reason",
        "it's late",
    ]


def test_a_lone_dash_is_left_alone() -> None:
    assert normalise("announce — now") == "announce — now"


def test_slack_escapes_and_link_labels_are_undone() -> None:
    assert normalise("handoff shadow <@U0BOB|bob> &amp; &lt;x&gt;") == "handoff shadow <@U0BOB> & <x>"


def test_unbalanced_quotes_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="could not read the arguments"):
        split_words('abort --reason "oops')


@pytest.mark.parametrize("word", ["<@U0BOB>", "@U0BOB", "U0BOB"])
def test_users_can_be_given_as_mentions_or_ids(word: str) -> None:
    assert parse_user(word) == "U0BOB"


def test_a_name_is_not_a_user() -> None:
    with pytest.raises(UsageError):
        parse_user("bob")
