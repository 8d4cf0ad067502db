"""Building the Bolt App: what its start-up logs."""

from __future__ import annotations

import logging

import pytest

from bot.frontdoor.assemble import assemble
from bot.frontdoor.slack import build_app
from bot.frontdoor.workers import WorkerPool
from bot.settings import Settings
from tests.support.secrets import BOT_TOKEN


@pytest.mark.parametrize("socket_mode", [True, False])
def test_starting_the_app_logs_no_warning_about_an_unused_token(
    settings_for_stub: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    socket_mode: bool,
) -> None:
    # As in production: the token is in the environment, where Bolt looks for it by itself too.
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    services = assemble(settings_for_stub)
    workers = WorkerPool(1)
    try:
        with caplog.at_level(logging.DEBUG):
            app = build_app(services, workers, signing_secret="s" * 32, socket_mode=socket_mode)
    finally:
        workers.shutdown(wait=True)
        services.close()
    assert app.client is services.web_client
    bolt = [r for r in caplog.records if r.name.startswith("slack_bolt") and r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in bolt] == []
    assert not [r for r in caplog.records if "will be unused" in r.getMessage()]
