"""Shared fixtures: config files, the Slack stub, a bot's environment, and a guard that no token
is logged. Only fixtures live here; what tests import comes from `tests/support/`.

Also the suite's tiers: every test that starts a process, a simulated cluster's server, PostgreSQL or
the real control plane is marked so at collection (`tests/support/tiers.py`), and `--fast` runs the
rest (`scripts/test --fast`), with a guard that fails a test of that tier which starts one anyway.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.logsetup import install_filters
from bot.settings import parse_settings
from tests.support.config_schema import load, schema_errors
from tests.support.secrets import BOT_TOKEN, QUICK_SLACK, ROSTER_YAML, SECRETS, SIGNING_SECRET
from tests.support.slack_stub import INVALID_PAYLOADS, SlackStub

pytest_plugins: list[str] = [
    "tests.support.bytecode",
    "tests.support.collector",
    "tests.support.postgres",
    "tests.support.testbed",
    "tests.support.sim_fixtures",
    "tests.support.helm",
    "tests.support.observability",
    "tests.support.registry",
    "tests.support.tiers",
]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="session", autouse=True)
def no_token_in_logs() -> Iterator[_Collect]:
    """Every log line of the session, through the filters production installs, holds no secret."""
    handler = _Collect()
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    install_filters(handler, SECRETS)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old_level)
    leaks = [line for line in handler.lines if any(s in line for s in SECRETS)]
    assert not leaks, f"secrets leaked into {len(leaks)} log lines, e.g. {leaks[0][:200]}"


@pytest.fixture(autouse=True)
def slack_payloads_are_valid() -> Iterator[None]:
    """No Slack stub received a payload Slack would refuse (`invalid_blocks`) during the test: the
    bot logs a refused post and goes on, so without this the test could pass on a dark channel."""
    INVALID_PAYLOADS.clear()
    yield
    found, INVALID_PAYLOADS[:] = list(INVALID_PAYLOADS), []
    assert not found, f"{len(found)} invalid Slack payload(s), e.g. {found[:3]}"


@pytest.fixture
def slack_stub() -> Iterator[SlackStub]:
    with SlackStub() as stub:
        yield stub


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write an upgrade-bot.yaml in a temp dir (SQLite there too) and return its path."""

    def write(extra: str = "", *, roster: bool = True, name: str = "upgrade-bot.yaml") -> Path:
        text = f"data_dir: {tmp_path / 'data'}\n" + (ROSTER_YAML if roster else "") + extra
        # A quick Slack budget unless the test sets its own `slack:` (last, so that the lines of
        # `extra` keep their numbers).
        if not re.search(r"^slack:", extra, re.MULTILINE):
            text += ("" if text.endswith("\n") else "\n") + QUICK_SLACK
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        # Every configuration a test runs the bot with is also one an operator could write in an
        # editor or in the chart's `config:`: what the bot accepts, the published schema accepts.
        try:
            parse_settings(text, source=path, env={})
        except ConfigError:
            return path
        assert not schema_errors(load(text)), f"the schema refuses a configuration the bot accepts: {text}"
        return path

    return write


@pytest.fixture
def bot_env(slack_stub: SlackStub) -> dict[str, str]:
    """Environment for a bot subprocess talking to the stub."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack_stub.api_url,
        PYTHONUNBUFFERED="1",
    )
    return env
