"""Hostile or careless command text gets a short usage answer, never "an internal error" (issue 11).

Huge numbers, far-future times, 300-character names, lone surrogates and 100 KB "subcommands"
each get a specific reason that repeats at most a short piece of what was typed, and the audit
row is written.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.frontdoor.assemble import Services, assemble
from bot.router import MAX_COMMAND_TEXT, CommandRequest, Outcome
from bot.settings import load_settings
from tests.support.bot_process import bot_command

PLAN = (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")
NOW = datetime(2026, 11, 20, 3, tzinfo=UTC)
HUGE = "9" * 25


@pytest.fixture
def services(write_config: Callable[..., Path]) -> Iterator[Services]:
    built = assemble(
        load_settings(write_config("channels: {announcements: C0ANN, operations: C0OPS}\n"), {}),
        with_slack=False,
        clock=lambda: NOW,
    )
    built.store.save_plan(name="eks-nodegroups", text=PLAN, loaded_by="U0PRIMARY", loaded_at=NOW)
    yield built
    built.close()


def cmd(services: Services, text: str) -> Outcome:
    return services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", channel_id="C0OPS"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"snapshots --limit {HUGE}", "expected a whole number from 1 to 200"),
        (f"schedule cancel {HUGE}", f"there is no schedule #{HUGE}"),
        (f'schedule move {HUGE} --at "2027-01-01 10:00" --reason later', f"there is no schedule #{HUGE}"),
        ("audit --since 999999999h", "longer than 3650d"),
        ('schedule eks-nodegroups --at "9999-12-31 23:59"', "more than 2 years ahead"),
        ("plan show " + "p" * 300, "plan name too long: at most 100 characters"),
        ("start " + "p" * 300, "no plan `ppp"),
        ("status " + "R" * 300, "there is no run `RRR"),
    ],
)
def test_out_of_range_arguments_get_a_short_specific_answer(
    services: Services, text: str, reason: str
) -> None:
    out = cmd(services, text)
    assert not out.ok
    assert out.audit_outcome in ("usage", "refused")
    assert reason in out.rendered.text
    assert "internal error" not in out.rendered.text
    assert len(out.rendered.text) < 600  # a 300-character name is not echoed whole


def test_snapshot_ids_past_a_64_bit_integer_are_simply_not_found(services: Services) -> None:
    assert services.store.snapshot_body(int(HUGE)) is None
    assert services.store.schedule(int(HUGE)) is None
    assert services.store.plan_by_id(-1) is None


def test_a_lone_surrogate_in_the_text_is_answered_and_audited(services: Services) -> None:
    out = cmd(services, "x\ud800y")
    assert not out.ok
    assert "unknown subcommand `x?y`" in out.rendered.text
    (entry,) = services.store.audit_entries()
    assert entry.outcome == "usage"
    assert entry.arguments == "x?y"


def test_a_100_kb_subcommand_is_refused_before_parsing_and_not_echoed(services: Services) -> None:
    out = cmd(services, "z" * 100_000)
    assert f"reads at most {MAX_COMMAND_TEXT:,}" in out.rendered.text
    assert "zzzzzzzzzz" not in out.rendered.text
    assert len(services.store.audit_entries()[0].arguments) <= 2000


def test_arguments_argparse_does_not_know_are_not_echoed_whole(services: Services) -> None:
    out = cmd(services, "help " + "a " * 3000)
    assert not out.ok
    assert "unrecognized arguments" in out.rendered.text
    assert len(out.rendered.text) < 1200


def test_exec_with_invalid_utf8_in_argv_answers_without_a_traceback(
    write_config: Callable[..., Path],
) -> None:
    config = write_config()
    done = subprocess.run(
        [*bot_command(), "exec", "--config", str(config), b"st\xffatus".decode("utf-8", "surrogateescape")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert "unknown subcommand" in done.stdout + done.stderr


def test_a_time_in_the_past_is_the_input_s_fault_and_says_what_time_it_is(services: Services) -> None:
    out = cmd(services, 'schedule eks-nodegroups --at "2020-01-01 10:00"')
    assert (out.ok, out.audit_outcome) == (False, "usage")
    here = NOW.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M")
    assert f"2020-01-01 10:00 Asia/Tokyo is in the past (it is {here} there now)" in out.rendered.text
