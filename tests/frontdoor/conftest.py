"""Front-door fixtures: settings pointing at the Slack stub, and the in-process bot
(`tests/support/front.py`) started on demand and stopped after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.core.command import Registry
from bot.settings import Settings, load_settings
from tests.support.front import Front, start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub


@pytest.fixture
def settings_for_stub(write_config: Callable[..., Path], slack_stub: SlackStub) -> Settings:
    return load_settings(write_config(), slack_env(slack_stub.api_url))


@pytest.fixture
def make_front(settings_for_stub: Settings, slack_stub: SlackStub) -> Iterator[Callable[..., Front]]:
    started: list[Front] = []

    def start(registry: Registry | None = None, workers: int = 8) -> Front:
        front = start_front(settings_for_stub, slack_stub, registry=registry, workers=workers)
        started.append(front)
        return front

    yield start
    for front in started:
        front.stop()
