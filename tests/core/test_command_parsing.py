"""Chat-safe parsing: what chat clients do to typed text is undone before arguments are read."""

from __future__ import annotations

import pytest

from bot.core.command import CommandParser, normalise, parse_user, split_words
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


def test_a_value_starting_with_a_dash_is_named_when_its_option_finds_none() -> None:
    parser = CommandParser("waive")
    parser.add_argument("--for", dest="duration")
    parser.add_argument("--reason", nargs="+")
    with pytest.raises(UsageError) as err:
        parser.parse_args(["--for", "-1h"])
    assert err.value.user_message == (
        "argument --for: expected one argument "
        "(`-1h` starts with a dash, so it is read as an option, not as --for's value)"
    )
    with pytest.raises(UsageError) as err:
        parser.parse_args(["--reason", "-x"])
    assert err.value.user_message.endswith(
        "(`-x` starts with a dash, so it is read as an option, not as --reason's value)"
    )
    with pytest.raises(UsageError) as err:
        parser.parse_args(["--for"])  # nothing given: argparse's words alone
    assert err.value.user_message == "argument --for: expected one argument"


def test_a_positional_of_any_number_of_words_is_not_named_as_required() -> None:
    """`/upgrade waive` alone said "the following arguments are required: finding, objects", though
    its usage shows `[OBJECTS …]`: only `finding` is missing."""
    parser = CommandParser("waive")
    parser.add_argument("finding")
    parser.add_argument("objects", nargs="*")
    with pytest.raises(UsageError) as err:
        parser.parse_args([])
    assert err.value.user_message == "the following arguments are required: finding"
    assert parser.parse_args(["KI004"]).objects == []


@pytest.mark.parametrize("words", [["shadow", "--", "--"], ["--", "shadow", "--"]])
def test_a_double_dash_where_a_word_should_stand_is_a_missing_word(words: list[str]) -> None:
    """`/upgrade handoff shadow -- --` (found by the command fuzz test): argparse read the user as
    an empty list, and the command failed on it with an internal error."""
    parser = CommandParser("handoff")
    parser.add_argument("role")
    parser.add_argument("user")
    with pytest.raises(UsageError) as err:
        parser.parse_args(words)
    assert err.value.user_message == "the following arguments are required: user"
    # `--` before a word still ends the options.
    assert parser.parse_args(["shadow", "--", "@dana"]).user == "@dana"
