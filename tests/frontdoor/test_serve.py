"""`upgrade-bot run` shuts down in the documented order: on SIGTERM the transport stops first and
the worker pool drains, so a command acked just before the signal still gets its reply, and the
process exits 0."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from tests.support.bot_process import BotProcess
from tests.support.slack_stub import SlackStub


def test_sigterm_lets_an_acked_command_finish_its_reply_and_exits_0(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()
    try:
        # The reply's first attempt is rate limited: the worker holds it for Retry-After seconds.
        slack_stub.fail_next("response_url", status=429, retry_after=3)
        bot.send_command("help", "U0PRIMARY")
        slack_stub.wait_for_calls("response_url:429", timeout=15)
        assert bot.process is not None
        bot.process.send_signal(signal.SIGTERM)
        _, err = bot.process.communicate(timeout=30)
    finally:
        bot.stop()
    assert bot.process.returncode == 0, err[-3000:]
    (reply,) = slack_stub.responses
    assert "/upgrade whoami" in reply["text"]
