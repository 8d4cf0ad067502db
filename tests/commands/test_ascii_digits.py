"""Numbers people type are ASCII digits: `--for ９d` (fullwidth nine) is not nine days, and watch
`١` (Arabic-Indic one) is not watch 1 — Python's `int()` and re's `\\d` read both (issue 38,
item 5). Through the router, as the terminal and Slack reach it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, time
from pathlib import Path

import pytest

from bot.core.audit import parse_since
from bot.core.durations import parse_duration
from bot.core.watches.milestones import parse_finding_key
from bot.core.windows import parse_time
from bot.errors import UsageError, UserError
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.slack.fixes import _finding
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings

#: Fullwidth, Arabic-Indic, Devanagari and Bengali nines and ones: `str.isdigit` is True for each.
NINES = ("９", "٩", "९", "৯")
ONES = ("１", "١", "१", "১")


@pytest.fixture
def services(write_config: Callable[..., Path], tmp_path: Path) -> Iterator[Services]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    built = assemble(
        load_settings(write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}}}\n"), {}),
        with_slack=False,
    )
    yield built
    built.close()


def ask(services: Services, text: str) -> Outcome:
    return services.router.handle(
        CommandRequest(text=text, user_id="U0PRIMARY", channel_id="C0OPS", source="terminal")
    )


@pytest.mark.parametrize("nine", NINES)
def test_a_waiver_for_a_non_ascii_nine_days_is_refused_and_nothing_is_stored(
    services: Services, nine: str
) -> None:
    out = ask(services, f"waive ISTIO001 --for {nine}d --reason x")
    assert not out.ok
    assert f"--for {nine}d: '{nine}d' is not a duration like 90s" in out.rendered.text
    assert services.store.waivers() == []
    assert ask(services, "waive ISTIO001 --for 9d --reason x").ok  # ASCII still works


@pytest.mark.parametrize("one", ONES)
def test_unwatch_and_choose_refuse_a_non_ascii_number(services: Services, one: str) -> None:
    for text in (f"unwatch {one}", f"choose {one} wait"):
        out = ask(services, text)
        assert not out.ok
        assert f"'{one}' is not a number (like 3)" in out.rendered.text, (text, out.rendered.text)


@pytest.mark.parametrize("one", ONES)
def test_a_fix_button_naming_a_non_ascii_watch_id_does_not_name_a_known_issue(
    services: Services, one: str
) -> None:
    with pytest.raises(UserError, match=r"^this button does not name a known issue$"):
        _finding(services.watches, f"{one}|rule:KI004:payments/Deployment/payments-api:1")
    assert parse_finding_key(f"rule:KI004:payments/Deployment/payments-api:{one}") is None


@pytest.mark.parametrize("text", ["９d", "1٥m", "２h30m", "1w١d"])
def test_durations_are_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_times_and_since_are_ascii_digits_only() -> None:
    assert parse_time("22:00") == time(22, 0)
    with pytest.raises(ValueError, match="is not a time like 14:00"):
        parse_time("２２:００")
    with pytest.raises(UsageError):
        parse_since("３d", datetime(2026, 11, 29, tzinfo=UTC))
