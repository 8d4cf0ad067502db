"""Poison work goes to a dead letter (issue 27): an acknowledged request that fails every time is
set aside after `MAX_ATTEMPTS` tries — one log line, a metric, the person told once — and is
never tried again at a start, never in the way of the next request; an operator lists, retries
or drops it with `upgrade-bot inbox`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.errors import TemporaryError
from bot.frontdoor.inbox import MAX_ATTEMPTS, Inbox
from bot.frontdoor.metrics import Metrics
from bot.frontdoor.workers import WorkerPool
from bot.settings import load_settings
from tests.support.bot_process import BotProcess, bot_command
from tests.support.slack_stub import SlackStub


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def test_a_request_that_fails_every_time_is_set_aside_once_and_the_next_is_worked_off(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    pool = WorkerPool(2)
    told: list[tuple[str, str]] = []
    done: list[str] = []
    metrics = Metrics()

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        if payload["text"] == "poison":
            int("²")  # what a decoder without an ASCII check did with a forged value
        done.append(str(payload["text"]))

    box = Inbox(
        store=store,
        workers=pool,
        clock=lambda: datetime.now(UTC),
        handlers={"command": work},
        notify=lambda kind, payload, cid: told.append((kind, str(payload["text"]))),
        telemetry=metrics,
    )
    poison = box.accept("command", "k-poison", {"text": "poison"})
    fine = box.accept("command", "k-fine", {"text": "help"})
    assert poison is not None
    assert fine is not None
    box.submit(poison[0], name="poison")
    box.submit(fine[0], name="fine")
    assert pool.idle(10)

    item: Any = store.inbox_item(poison[0])
    assert (item.state, item.attempts) == ("dead", MAX_ATTEMPTS)
    assert item.failure.startswith("ValueError: invalid literal for int()")
    assert "test_inbox_dead_letters.py" in item.failure
    assert done == ["help"]
    assert told == [("command", "poison")]
    assert b'upgrade_bot_inbox_set_aside_total{kind="command"} 1.0' in metrics.exposition()
    set_aside = [r for r in caplog.records if "set aside as a dead letter" in r.getMessage()]
    assert len(set_aside) == 1
    assert [r for r in caplog.records if r.exc_info] == []

    # Never again: not at the next start's replay, not when worked directly.
    assert box.replay() == 0
    box.work(poison[0], replay=True)
    assert pool.idle(10)
    assert told == [("command", "poison")]
    assert store.inbox_item(poison[0]).attempts == MAX_ATTEMPTS  # type: ignore[union-attr]
    pool.stop(grace=5)


def test_a_temporary_failure_waits_for_the_next_replay_instead_of_burning_its_attempts(store: Store) -> None:
    pool = WorkerPool(1)
    calls: list[str] = []

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        calls.append(how)
        if len(calls) == 1:
            raise TemporaryError("the database is busy or unreachable")

    box = Inbox(store=store, workers=pool, clock=lambda: datetime.now(UTC), handlers={"command": work})
    accepted = box.accept("command", "k", {"text": "status"})
    assert accepted is not None
    box.work(accepted[0], replay=False)
    item: Any = store.inbox_item(accepted[0])
    assert (item.state, item.attempts) == ("pending", 1)
    assert "TemporaryError" in item.failure
    box.work(accepted[0], replay=True)
    assert calls == ["new", "replay"]
    assert store.inbox_item(accepted[0]).state == "done"  # type: ignore[union-attr]
    pool.stop(grace=5)


@pytest.fixture
def config(write_config: Callable[..., Path]) -> Path:
    return write_config()


def _cli(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "inbox", *args, "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_poison_in_the_inbox_is_set_aside_by_a_real_process_and_a_restart_does_not_retry_it(
    config: Path, bot_env: dict[str, str], slack_stub: SlackStub
) -> None:
    # A click stored without its button value (as an older version, or a bug, could leave it):
    # the gate handler fails on it every time it is worked off.
    store = Store.open(load_settings(config, {}).database_url)
    try:
        item_id = store.inbox_put(
            key="trigger:poison",
            kind="click",
            payload=json.dumps(
                {"user": "U0PRIMARY", "response_url": slack_stub.response_url("poison"), "_cid": "cid-poison"}
            ),
            at=datetime.now(UTC),
        )
    finally:
        store.close()
    assert item_id is not None

    bot = BotProcess(config=config, env=bot_env, stub=slack_stub)
    bot.start()
    try:
        (told,) = slack_stub.wait_for_responses(1)
        assert "Your click failed 3 times and was set aside" in told["text"]
        assert "cid-poison" in told["text"]
        bot.send_command("whoami", "U0PRIMARY")  # the next request is answered normally
        assert "primary" in slack_stub.wait_for_responses(2)[1]["text"]
    finally:
        stderr = bot.stop()
    assert stderr.count("set aside as a dead letter") == 1
    assert "Traceback" not in stderr

    bot.start()  # the same state, a new process
    try:
        bot.send_command("help", "U0PRIMARY")
        slack_stub.wait_for_responses(3)
    finally:
        stderr = bot.stop()
    assert "inbox item" not in stderr  # not tried, not set aside again
    assert len(slack_stub.responses) == 3

    listed = _cli(config, bot_env, "list")
    assert listed.returncode == 0, listed.stderr
    assert f"#{item_id}\tclick" in listed.stdout
    # How it failed in words, and the id its log lines carry; the error and its code location are
    # the log's ("KeyError: 'value' at gates.py:…" read as the reason).
    assert (
        "\tan unexpected error (a bug: the log has its detail) (correlation id cid-poison)\n" in listed.stdout
    )
    assert "KeyError" not in listed.stdout
    assert ".py:" not in listed.stdout
    assert "3 attempt(s)" in listed.stdout
    assert _cli(config, bot_env, "retry", "999").returncode == 1
    retried = _cli(config, bot_env, "retry", str(item_id))
    assert retried.returncode == 0, retried.stderr
    store = Store.open(load_settings(config, {}).database_url)
    try:
        item: Any = store.inbox_item(item_id)
        assert (item.state, item.attempts, item.owner) == ("pending", 0, "")
        assert store.inbox_set_aside(item_id, at=datetime.now(UTC))
    finally:
        store.close()
    dropped = _cli(config, bot_env, "drop", str(item_id))
    assert dropped.returncode == 0, dropped.stderr
    assert "0 dead letter(s)" in _cli(config, bot_env, "list").stderr
