"""A real `upgrade-bot run --http` process for restart tests: start it, SIGKILL it, stop it.

The process talks to the Slack stub through SLACK_API_URL (in `env`) and keeps its state in the
database named by `config`, so a test can kill it at any moment and start another on the same
state. Slash commands reach it as signed HTTP requests, as Slack sends them.
"""

from __future__ import annotations

import re
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import SIGNING_SECRET, bot_command
from tests.support.signing import post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub


@dataclass
class BotProcess:
    config: Path
    env: dict[str, str]
    stub: SlackStub
    process: subprocess.Popen[str] | None = None
    url: str = ""
    requests: int = 0
    logs: list[str] = field(default_factory=list)

    def start(self) -> None:
        """Start the bot; return once it prints where it listens (after its start-up recovery)."""
        command = [*bot_command(), "run", "--http", "--host", "127.0.0.1", "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--config", str(self.config)],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if not match:
            self.process.kill()
            _, err = self.process.communicate(timeout=10)
            pytest.fail(f"the bot did not start: {line!r}\n{err[-3000:]}")
        self.url = match.group(1)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        _, err = self.process.communicate(timeout=20)
        self.logs.append(err)
        assert self.process.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            _, err = self.process.communicate(timeout=20)
            self.logs.append(err)

    def send_command(self, text: str, user: str) -> None:
        """POST a signed `/upgrade TEXT` from `user`; its reply goes to the stub's response URL."""
        self.requests += 1
        body = slash_command_body(
            text, user=user, response_url=self.stub.response_url(), trigger_id=f"cmd-{self.requests}"
        )
        assert post(f"{self.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
