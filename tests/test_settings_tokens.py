"""A Slack token pasted into the configuration file is never printed back: a problem that quotes
it shows `xoxb-…(redacted)` and says where tokens go; a key meant for one says so too."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.validation import TOKEN_HINT
from bot.errors import ConfigError
from bot.frontdoor.cli.options import refused
from bot.settings import Secrets, parse_settings

BOT_TOKEN = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
APP_TOKEN = "xapp-1-A0123456789-1234567890123-0123456789abcdef0123456789abcdef"
#: What would identify the token: anything after its kind.
SECRET_PARTS = ("123456789012", "AbCdEf", "A0123456789", "0123456789abcdef")


def problems_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, source=Path("cfg.yaml"), env={})
    return [caught.value.user_message, *caught.value.problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"channels:\n  operations: {BOT_TOKEN}\n",
            "channels.operations: 'xoxb-…(redacted)' is not a Slack channel ID",
        ),
        (f"roster:\n  primary: [{BOT_TOKEN}]\n", "roster.primary: 'xoxb-…(redacted)' is not a Slack user ID"),
        (f"timezone: {APP_TOKEN}\n", "timezone: unknown time zone 'xapp-…(redacted)"),
        (f"roster:\n  {BOT_TOKEN}: [U0123AAAA]\n", "roster.xoxb-…(redacted): role names are"),
        (f"templates_dir: /tmp/{BOT_TOKEN}\n", "templates_dir: /tmp/xoxb-…(redacted) is not a directory"),
    ],
    ids=["channel", "roster-person", "timezone", "roster-role", "path"],
)
def test_a_token_in_a_value_or_a_key_is_masked_and_the_problem_says_where_tokens_go(
    text: str, expected: str
) -> None:
    problems = problems_of(text)
    assert any(expected in problem for problem in problems), problems
    for problem in problems:
        assert not any(part in problem for part in SECRET_PARTS), problem
    assert any(problem.endswith(f"; {TOKEN_HINT}") for problem in problems), problems


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f"slack_bot_token: {BOT_TOKEN}\n", "slack_bot_token"),
        (f"slack:\n  bot_token: {BOT_TOKEN}\n  app_token: {APP_TOKEN}\n", "slack.bot_token"),
        (f"slack:\n  app_token: {APP_TOKEN}\n", "slack.app_token"),
        ("signing_secret: 0123456789abcdef0123456789abcdef\n", "signing_secret"),
    ],
    ids=["slack_bot_token", "slack.bot_token", "slack.app_token", "signing_secret"],
)
def test_a_key_meant_for_a_token_says_tokens_go_in_the_environment(text: str, key: str) -> None:
    problems = problems_of(text)
    assert any(problem.endswith(f": {key}: unknown key; {TOKEN_HINT}") for problem in problems), problems
    assert "go in the environment (SLACK_BOT_TOKEN, SLACK_APP_TOKEN" in problems[0]


def test_an_unknown_key_near_a_real_one_keeps_its_did_you_mean() -> None:
    problems = problems_of("slack:\n  timeout_secnds: 5\n")
    assert any("unknown key (did you mean 'timeout_seconds'?)" in problem for problem in problems)
    assert not any(TOKEN_HINT in problem for problem in problems)


def test_another_service_s_token_key_gets_no_word_about_slack() -> None:
    text = "clusters:\n  prod:\n    kubeconfig: /x\n    prometheus: {url: 'http://p:9090', token: x}\n"
    problems = problems_of(text)
    assert any(problem.endswith("clusters.prod.prometheus.token: unknown key") for problem in problems), (
        problems
    )


def test_the_terminal_masks_a_token_in_any_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    # A problem found past the validator (the store's directory of a SQLite URL) quotes a path.
    status = refused(ConfigError(f"database_url: cannot create the SQLite file's directory /srv/{BOT_TOKEN}"))
    err = capsys.readouterr().err
    assert status == 2
    assert (
        err == "upgrade-bot: database_url: cannot create the SQLite file's directory /srv/xoxb-…(redacted)\n"
    )
    status = refused(ConfigError("two", problems=(f"a: {APP_TOKEN}", f"b: {BOT_TOKEN}")))
    assert capsys.readouterr().err.splitlines() == [
        "upgrade-bot: 2 problems:",
        "  a: xapp-…(redacted)",
        "  b: xoxb-…(redacted)",
    ]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN}, "SLACK_APP_TOKEN is"),
        ({"SLACK_APP_TOKEN": APP_TOKEN, "SLACK_BOT_TOKEN": " "}, "SLACK_BOT_TOKEN is"),
    ],
    ids=["both", "app", "bot-blank"],
)
def test_a_start_without_its_tokens_names_every_missing_one_at_once(
    env: dict[str, str], expected: str
) -> None:
    # `run` in Socket Mode: a first start used to say SLACK_BOT_TOKEN, then, once it was set,
    # SLACK_APP_TOKEN.
    with pytest.raises(ConfigError) as caught:
        Secrets.from_env(env).require("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")
    assert caught.value.user_message == (
        f"environment: {expected} not set (secrets come only from the environment)"
    )
    Secrets.from_env({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}).require(
        "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"
    )
