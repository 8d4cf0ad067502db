"""The Socket Mode path, end to end through a websocket stub, including a reconnect."""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.frontdoor.assemble import assemble
from bot.frontdoor.slack import build_app
from bot.frontdoor.socket_mode import make_handler
from bot.frontdoor.workers import WorkerPool
from bot.settings import Settings
from tests.support.malformed import MALFORMED
from tests.support.secrets import APP_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.socket_stub import SocketModeStub


@pytest.fixture
def socket_stub(slack_stub: SlackStub) -> Iterator[SocketModeStub]:
    stub = SocketModeStub().start()
    slack_stub.socket_url = stub.url
    yield stub
    stub.stop()


def command_payload(text: str, response_url: str, trigger_id: str) -> dict[str, Any]:
    return {
        "token": "x",
        "team_id": "T0TEAM",
        "channel_id": "C0OPS",
        "user_id": "U0PRIMARY",
        "command": "/upgrade",
        "text": text,
        "api_app_id": "A0STUB",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


@pytest.mark.slow  # slack_sdk's socket-mode client waits before it reconnects
def test_help_over_socket_mode_survives_a_disconnect(
    settings_for_stub: Settings, slack_stub: SlackStub, socket_stub: SocketModeStub, tmp_path: Path
) -> None:
    services = assemble(settings_for_stub)
    workers = WorkerPool(4)
    app = build_app(services, workers, signing_secret=None, socket_mode=True)
    handler = make_handler(app, APP_TOKEN)
    try:
        handler.connect()
        socket_stub.wait_connected(1)
        # The app-level token opened the connection through the Web API stub.
        (opened,) = slack_stub.calls_to("apps.connections.open")
        assert opened.headers["authorization"] == f"Bearer {APP_TOKEN}"

        env = socket_stub.send_slash_command(command_payload("help", slack_stub.response_url("a"), "t-1"))
        socket_stub.wait_ack(env)
        assert "/upgrade whoami" in slack_stub.wait_for_responses(1)[0]["text"]

        socket_stub.disconnect()
        socket_stub.wait_connected(2, timeout=20)
        env = socket_stub.send_slash_command(command_payload("whoami", slack_stub.response_url("b"), "t-2"))
        socket_stub.wait_ack(env)
        assert "primary" in slack_stub.wait_for_responses(2)[1]["text"]
    finally:
        handler.close()
        workers.shutdown(wait=True)
        services.close()
    assert [e.subcommand for e in services.store.audit_entries()] == ["help", "whoami"]


def test_role_checks_expand_user_groups_and_tolerate_a_deleted_group(
    settings_for_stub: Settings, slack_stub: SlackStub
) -> None:
    from bot.router import CommandRequest

    slack_stub.usergroups["S0LEADS"] = ["U0LEAD"]
    services = assemble(settings_for_stub)
    try:
        lead = services.router.handle(CommandRequest(text="whoami", user_id="U0LEAD"))
        assert "coordinator" in lead.rendered.text
        del slack_stub.usergroups["S0LEADS"]
        services.directory._cache.clear()  # type: ignore[attr-defined]
        after = services.router.handle(CommandRequest(text="whoami", user_id="U0LEAD"))
        assert after.ok
        assert "no role" in after.rendered.text
    finally:
        services.close()


@pytest.mark.slow  # slack_sdk's socket-mode client waits before it reconnects
def test_malformed_envelopes_are_acked_and_dropped_with_one_line_each_and_no_traceback(
    settings_for_stub: Settings,
    slack_stub: SlackStub,
    socket_stub: SocketModeStub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    services = assemble(settings_for_stub)
    workers = WorkerPool(4)
    app = build_app(services, workers, signing_secret=None, socket_mode=True)
    handler = make_handler(app, APP_TOKEN)
    caplog.set_level(logging.INFO)
    try:
        handler.connect()
        socket_stub.wait_connected(1)
        for _name, body, kind in MALFORMED:
            if kind == "json":
                envelope = socket_stub.send("events_api", json.loads(body))
            else:
                (payload,) = urllib.parse.parse_qs(body.decode())["payload"]
                envelope = socket_stub.send("interactive", json.loads(payload))
            socket_stub.wait_ack(envelope)
        # A slash command without its user is not one either.
        socket_stub.wait_ack(socket_stub.send("slash_commands", {"command": "/upgrade", "text": "help"}))
        env = socket_stub.send_slash_command(command_payload("help", slack_stub.response_url("a"), "t-1"))
        socket_stub.wait_ack(env)
        assert "/upgrade whoami" in slack_stub.wait_for_responses(1)[0]["text"]
        assert workers.idle(timeout=10)
    finally:
        handler.close()
        workers.shutdown(wait=True)
        services.close()
    ignored = [r for r in caplog.records if "not a shape Slack sends" in r.getMessage()]
    assert len(ignored) == len(MALFORMED) + 1
    assert [r for r in caplog.records if r.exc_info] == []
    assert [e.subcommand for e in services.store.audit_entries()] == ["help"]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("socket_mode_not_enabled", "Socket Mode is off in the app's settings"),
        ("not_allowed_token_type", "SLACK_APP_TOKEN is not an app-level token"),
        ("missing_scope", "lacks the connections:write scope"),
        ("invalid_auth", "check the app-level token (xapp-…)"),
    ],
)
def test_a_socket_mode_connection_slack_refuses_is_one_line_naming_what_to_fix(
    settings_for_stub: Settings, slack_stub: SlackStub, code: str, says: str
) -> None:
    import threading

    from bot.errors import ConfigError
    from bot.frontdoor.serve import _serve_socket_mode

    services = assemble(settings_for_stub)
    workers = WorkerPool(2)
    try:
        app = build_app(services, workers, signing_secret=None, socket_mode=True)
        slack_stub.fail_next("apps.connections.open", error=code, times=10)
        with pytest.raises(ConfigError) as refused:
            _serve_socket_mode(app, APP_TOKEN, stop=threading.Event())
        assert refused.value.user_message.startswith(
            f"environment: Slack refused to open a Socket Mode connection with SLACK_APP_TOKEN ({code}): "
        )
        assert says in refused.value.user_message
        assert APP_TOKEN not in refused.value.user_message
    finally:
        workers.shutdown(wait=True)
        services.close()
