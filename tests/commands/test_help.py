"""`/upgrade help` is generated from docstrings; unknown subcommands get "did you mean"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.frontdoor.wiring import build_services
from bot.router import CommandRequest
from bot.settings import load_settings


def handle(config: Path, text: str, user: str = "U0PRIMARY") -> tuple[bool, str]:
    services = build_services(load_settings(config, {}), with_slack=False)
    try:
        outcome = services.router.handle(CommandRequest(text=text, user_id=user, source="terminal"))
        return outcome.ok, outcome.rendered.text
    finally:
        services.close()


def test_help_lists_every_subcommand_with_its_docstring_summary(write_config: Callable[..., Path]) -> None:
    services = build_services(load_settings(write_config(), {}), with_slack=False)
    try:
        text = services.router.handle(CommandRequest(text="help", user_id="U1")).rendered.text
        for sub in services.registry:
            assert f"/upgrade {sub.name}" in text
            assert sub.summary in text
    finally:
        services.close()


def test_help_for_one_subcommand_shows_its_whole_docstring(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "help audit")
    assert ok
    assert "--since" in text
    assert "Only people in the roster" in text
    assert "anyone in the roster" in text


def test_an_unknown_subcommand_suggests_the_nearest(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "audti")
    assert not ok
    assert "did you mean `audit`" in text
    assert "ref " in text


def test_bad_arguments_show_usage_not_a_traceback(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "audit --since")
    assert not ok
    assert "Usage: `/upgrade audit [--since SINCE] [RUN]`" in text
    assert "Traceback" not in text


def test_an_empty_command_shows_help(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "   ")
    assert ok
    assert "/upgrade help" in text


def test_schedule_lists_its_verbs_and_each_verb_has_its_own_usage_and_help(
    write_config: Callable[..., Path],
) -> None:
    ok, text = handle(write_config(), "help schedule")
    assert ok
    for usage in ("/upgrade schedule list", "/upgrade schedule cancel", "/upgrade schedule move"):
        assert usage in text
    ok, text = handle(write_config(), "help schedule move")
    assert ok
    assert "Postpone a pending schedule" in text
    assert "--at" in text
    assert "--reason" in text
    ok, text = handle(write_config(), "help schedule frobnicate")
    assert not ok
    assert "no verb `frobnicate`" in text
    assert "`move`" in text


def test_a_verb_with_missing_arguments_gets_its_own_usage(write_config: Callable[..., Path]) -> None:
    ok, text = handle(write_config(), "schedule cancel")
    assert not ok
    assert "/upgrade schedule cancel" in text
    assert "ID" in text
