"""The bot as a real process: how tests start it (`bot_command`), and `upgrade-bot run --http`
started, SIGKILLed and stopped (`BotProcess`; `RunBot` adds a run's commands and clicks).

The process talks to the Slack stub through SLACK_API_URL (in `env`) and keeps its state in the
database named by `config`, so a test can kill it at any moment and start another on the same
state. Slash commands reach it as signed HTTP requests, as Slack sends them.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.people import StaticDirectory
from bot.core.runs.service import RunService
from bot.frontdoor.serve import SHUTDOWN_GRACE
from bot.settings import load_settings
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import block_actions_body, post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

#: How long a SIGTERMed bot may take to exit: its own grace for the work in hand, and as long again
#: for its duties' last tick and its close on a loaded machine (20 s failed a stop under -n 4 load).
STOP_TIMEOUT = 2 * SHUTDOWN_GRACE.total_seconds()
#: How long the bot's stacks take to be written after `kill -USR1` (its main thread wakes twice a second).
STACKS_SECONDS = 2.0


def bot_command() -> list[str]:
    """How tests start the bot: the installed console script's module, with this interpreter."""
    return [sys.executable, "-m", "bot"]


def run_bot(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`upgrade-bot ARGS` run to its end in `cwd`, as a user runs it: its exit status and output."""
    return subprocess.run(
        [*bot_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=dict(env) if env is not None else None,
    )


@dataclass
class BotProcess:
    config: Path
    env: dict[str, str]
    stub: SlackStub
    process: subprocess.Popen[str] | None = None
    url: str = ""
    log_level: str | None = None
    requests: int = 0
    logs: list[str] = field(default_factory=list)
    #: More arguments for `upgrade-bot run` (e.g. `--log-format json`).
    extra_args: list[str] = field(default_factory=list)

    def start(self) -> None:
        """Start the bot; return once it prints where it listens (after its start-up recovery)."""
        command = [*bot_command(), "run", "--http", "--host", "127.0.0.1", "--port", "0", *self.extra_args]
        if self.log_level:
            command += ["--log-level", self.log_level]
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

    def stop(self) -> str:
        """SIGTERM the bot and wait for it to exit; what it wrote to stderr ("" if it had stopped)."""
        if self.process is None or self.process.returncode is not None:
            return ""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, err = self.process.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # Its threads' stacks (`kill -USR1`, written by the main thread within half a second),
            # then a kill: the failure says where the shutdown hung, and no bot outlives its test
            # (its pipes and Popen, collected in a later test, failed that one too).
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(STACKS_SECONDS)
            self.process.kill()
            _, err = self.process.communicate(timeout=20)
            self.logs.append(err)
            pytest.fail(f"the bot did not stop within {STOP_TIMEOUT:g}s of its SIGTERM:\n{err[-8000:]}")
        self.logs.append(err)
        return err

    def send_command(self, text: str, user: str) -> None:
        """POST a signed `/upgrade TEXT` from `user`; its reply goes to the stub's response URL."""
        self.requests += 1
        body = slash_command_body(
            text, user=user, response_url=self.stub.response_url(), trigger_id=f"cmd-{self.requests}"
        )
        assert post(f"{self.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200


PRIMARY, SHADOW, COORD = "U0PRIMARY", "U0SHADOW", "U0COORD"
#: The operations channel of `team_plan`'s plans and `team_bot`'s configuration.
OPS = "C0OPS"


def team_plan(name: str, steps: str) -> str:
    """A plan `name` for the cluster `prod`, 1.24 → 1.25 in a window of the tests, posting in
    `OPS`, with the primary, shadow and coordinator roster; `steps` are the lines under `steps:`."""
    return (
        f"name: {name}\n"
        "cluster: prod\n"
        'current_version: "1.24"\n'
        'target_version: "1.25"\n'
        'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}\n'
        f"channels: {{operations: {OPS}}}\n"
        f"roster:\n  primary: [{PRIMARY}]\n  shadow: [{SHADOW}]\n  coordinator: [{COORD}]\n"
        f"steps:\n{steps}"
    )


@contextlib.contextmanager
def team_bot(
    write_config: Callable[..., Path],
    stub: SlackStub,
    env: dict[str, str],
    tmp_path: Path,
    *,
    plans: Mapping[str, str],
    cluster: str,
    extra_args: Sequence[str] = (),
    extra_config: str = "",
) -> Iterator[RunBot]:
    """`upgrade-bot run --http` started, with `plans` (name → YAML) in the team's templates, the
    primary, shadow and coordinator roster, the operations channel `OPS` and the one cluster
    `prod` (`cluster`: its YAML mapping); the stub knows the three people. `extra_config`: more
    top-level lines of the configuration file. Stopped on the way out."""
    team = tmp_path / "team-templates"
    (team / "plans").mkdir(parents=True)
    for name, text in plans.items():
        (team / "plans" / f"{name}.yaml").write_text(text)
    config = write_config(
        f"roster: {{primary: [{PRIMARY}], shadow: [{SHADOW}], coordinator: [{COORD}]}}\n"
        f"templates_dir: {team}\nchannels: {{operations: {OPS}}}\n"
        f"clusters:\n  prod: {cluster}\n{extra_config}",
        roster=False,
    )
    for user in (PRIMARY, SHADOW, COORD):
        stub.users[user] = {"id": user}
    bot = RunBot(config=config, env=env, stub=stub, extra_args=list(extra_args))
    bot.start()
    try:
        yield bot
    except BaseException:
        # What each bot process logged, for the failure's report (pytest shows captured output).
        bot.stop()
        for i, err in enumerate(bot.logs, start=1):
            sys.stderr.write(
                f"--- the bot's log, process {i} of {len(bot.logs)}, last 8,000 characters ---\n"
            )
            sys.stderr.write(err[-8000:] + "\n")
        raise
    finally:
        bot.stop()


@dataclass
class RunBot(BotProcess):
    """A bot process with a run: slash commands, clicks, and the run read back from its database."""

    def store(self) -> Store:
        return Store.open(load_settings(self.config, {}).database_url)

    def run_ids(self) -> list[str]:
        store = self.store()
        try:
            return [r.id for r in store.runs()]
        finally:
            store.close()

    def run(self) -> Any:
        store = self.store()
        try:
            (row,) = store.runs()
            return RunService(store=store, directory=StaticDirectory(), clock=lambda: row.updated_at).load(
                row.id
            )
        finally:
            store.close()

    def command(self, text: str, user: str = PRIMARY) -> str:
        """Run a slash command; its reply, ephemeral or posted in the channel."""
        before, posted = len(self.stub.responses), len(self.stub.calls_to("chat.postMessage"))
        self.send_command(text, user)

        def reply() -> str | None:
            if len(self.stub.responses) > before:
                return str(self.stub.responses[-1]["text"])
            new = [
                c.params
                for c in self.stub.calls_to("chat.postMessage")[posted:]
                if not c.params.get("thread_ts")
            ]
            plain = [p for p in new if not p["text"].startswith(":clipboard:")]
            return str(plain[-1]["text"]) if plain else None

        return self.stub.wait_for(reply, timeout=30)

    def click(self, user: str, value: str) -> None:
        """Click Approve and wait until the run's version moves (the click counted)."""
        version = self.run().version
        self._click(user, value)
        wait_until(
            lambda: self.run().version > version, timeout=30, what=f"{user}'s click on {value} to count"
        )

    def _click(self, user: str, value: str) -> None:
        self.requests += 1
        body = block_actions_body(
            user=user,
            value=value,
            response_url=self.stub.response_url(f"click-{self.requests}"),
            trigger_id=f"click-{self.requests}",
        )
        assert post(f"{self.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200

    def gate(self, step: str) -> str:
        """Wait for the gate message of the step's current state; its button value."""

        def find() -> str | None:
            epoch = self.run().step_run(step).epoch
            value = f"{self.run().id}|{step}|{epoch}"
            for call in self.stub.calls_to("chat.postMessage"):
                if value in json.dumps(call.params.get("blocks") or []):
                    return value
            return None

        return wait_until(find, timeout=30, what=f"the gate message of {step}")
