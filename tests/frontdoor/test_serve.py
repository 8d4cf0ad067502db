"""`upgrade-bot run` shuts down in the documented order: on SIGTERM the transport stops first and
running commands get a grace period, so a command acked just before the signal still gets its
reply; one stuck past the grace is not waited for, and is answered from the inbox at the next
start. The process exits 0 either way."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.serve import SHUTDOWN_GRACE
from tests.support.bot_process import BotProcess, run_bot
from tests.support.postgres import running_postgres
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import post, signed_headers, slash_command_body
from tests.support.slack_stub import SlackStub

REPO = Path(__file__).resolve().parents[2]


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


def test_sigterm_does_not_wait_for_a_stuck_command_which_resumes_at_the_next_start(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()
    try:
        # Slack hangs for a minute inside the command (its first roster check asks for a group).
        slack_stub.fail_next("usergroups.users.list", delay=60)
        bot.send_command("whoami", "U0PRIMARY")
        slack_stub.wait_for_calls("usergroups.users.list", timeout=15)
        assert bot.process is not None
        started = time.monotonic()
        bot.process.send_signal(signal.SIGTERM)
        _, err = bot.process.communicate(timeout=40)
        assert time.monotonic() - started < SHUTDOWN_GRACE.total_seconds() + 10
        assert bot.process.returncode == 0, err[-3000:]
        assert "resume from the inbox" in err
        assert slack_stub.responses == []
        # The next start works it off: the acknowledged command is answered after all, once.
        bot.process = None
        bot.start()
        slack_stub.wait_for_responses(1, timeout=30)
        (reply,) = slack_stub.responses
        assert "U0PRIMARY" in reply["text"]
    finally:
        bot.stop()


def test_sigusr1_writes_every_threads_stack_to_stderr_and_the_bot_goes_on(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()
    try:
        bot.send_command("help", "U0PRIMARY")
        slack_stub.wait_for_responses(1, timeout=30)
        assert bot.process is not None
        bot.process.send_signal(signal.SIGUSR1)
        # Still serving after the dump: the next command is answered too.
        try:
            bot.send_command("whoami", "U0PRIMARY")
        except OSError as exc:  # the bot stopped serving: fail with its exit status and its log
            bot.process.kill()
            _, log = bot.process.communicate(timeout=20)
            pytest.fail(
                f"no answer after SIGUSR1 ({exc}); exit {bot.process.returncode}; its log:\n{log[-4000:]}"
            )
        slack_stub.wait_for_responses(2, timeout=30)
        bot.process.send_signal(signal.SIGTERM)
        _, err = bot.process.communicate(timeout=40)
    finally:
        bot.stop()
    assert bot.process.returncode == 0, err[-3000:]
    # faulthandler's dump: one block per thread, the main thread's included.
    assert err.count("(most recent call first)") >= 2, err[-3000:]
    assert "serve.py" in err


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """Send `signum` to one thread of another process (Linux's tgkill(2); Python has no wrapper)."""
    import ctypes
    import os
    import platform

    numbers = {"x86_64": 234, "aarch64": 131}  # tgkill's system call number (asm/unistd.h)
    machine = platform.machine()
    assert machine in numbers, f"no tgkill number known for {machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(numbers[machine], pid, tid, signum) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def test_a_sigterm_the_kernel_hands_to_another_thread_still_stops_the_bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    """A process-directed SIGTERM goes to any thread that can take it — not the main thread when
    that one already has a signal pending (a SIGCONT just before, as after a pause). CPython then
    only notes it, and runs the handler when the main thread next wakes: a main thread asleep in
    an untimed wait never did, and the bot served on until SIGKILL (seen once in the paused-send
    soak). The signal is sent here to a thread that is not the main one."""
    import os

    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()
    try:
        bot.send_command("help", "U0PRIMARY")
        slack_stub.wait_for_responses(1, timeout=30)
        assert bot.process is not None
        pid = bot.process.pid
        others = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
        assert others, "the bot runs threads besides its main one"
        _tgkill(pid, others[-1], signal.SIGTERM)
        _, err = bot.process.communicate(timeout=30)
    finally:
        bot.stop()
    assert bot.process.returncode == 0, err[-3000:]
    assert "shutting down" in err


def test_the_bot_starts_while_slack_is_failing_and_answers_once_it_is_back(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    """A replica restarted during a Slack outage (a deploy, or its node drained by the upgrade) used
    to exit at once with "`token` is invalid", and crash-loop until Slack was back."""
    slack_stub.fail_next("auth.test", status=503, times=5)
    bot = BotProcess(config=write_config(), env=bot_env, stub=slack_stub)
    bot.start()  # it listens: the start did not wait for Slack
    try:
        bot.send_command("help", "U0PRIMARY")
        deadline = time.monotonic() + 30
        while not slack_stub.responses and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        err = bot.stop()
    assert "Slack did not answer auth.test" in err
    assert "token` is invalid" not in err
    (reply,) = slack_stub.responses
    assert "/upgrade whoami" in reply["text"]


def test_a_token_slack_refuses_stops_the_start_with_one_line_that_names_it(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    slack_stub.fail_next("auth.test", error="invalid_auth")
    done = run_bot(
        "run", "--http", "--port", "0", "--config", str(write_config()), cwd=Path.cwd(), env=bot_env
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "upgrade-bot: environment: Slack refused SLACK_BOT_TOKEN (invalid_auth): check the bot token (xoxb-…) "
        "of this workspace's app"
    )
    assert "Traceback" not in done.stderr


def test_with_the_database_down_a_command_is_told_so_at_once_in_one_line(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    """PostgreSQL stopped under a running bot: each command got an HTTP 500 (Slack's own "failed")
    and the log a hundred lines of traceback. Now the person reads why, and that nothing was done."""
    with running_postgres() as url:
        bot = BotProcess(config=write_config(f"database_url: {url}\n"), env=bot_env, stub=slack_stub)
        bot.start()
    try:  # the server is stopped now
        body = slash_command_body(
            "status", user="U0PRIMARY", response_url=slack_stub.response_url(), trigger_id="t1"
        )
        answer = post(f"{bot.url}/slack/events", body, signed_headers(body, SIGNING_SECRET))
    finally:
        err = bot.stop()
    assert answer.status == 200
    reply = json.loads(answer.body)
    assert reply["response_type"] == "ephemeral"
    assert reply["text"].startswith(
        ":warning: The bot cannot use its database right now (the database is busy or unreachable): "
        "nothing was done. Try again in a minute. _(ref "
    )
    assert "request not taken [" in err
    assert "unhandled error in a Slack listener" not in err


def test_a_sigterm_that_lands_while_the_main_thread_holds_the_stop_events_lock_still_stops(
    tmp_path: Path,
) -> None:
    """The handler runs on the main thread between two bytecodes, and the main thread waits in
    `stop.wait`, twice a second taking the event's lock: a SIGTERM landing there had the handler's
    `stop.set()` wait for that lock forever (a bot found still running 50 minutes after its
    SIGTERM, its main thread in `Event.set` under `Event.wait`). Here the main thread holds the lock
    (`Event._cond`, the condition `wait` holds) while it signals itself."""
    script = tmp_path / "held.py"
    script.write_text(
        "import os, signal, sys\n"
        "from bot.frontdoor.serve import _stop_on_signals\n"
        "stop = _stop_on_signals()\n"
        "with stop._cond:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    held = True\n"
        "print('stopped' if stop.wait(10) else 'not stopped', flush=True)\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, cwd=REPO
    )
    assert result.stdout.strip() == "stopped", result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
