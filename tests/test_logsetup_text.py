"""The text log format: one record is one line, and no control character or escape sequence from a
command's text reaches the terminal that shows the log (issue 38, item 5)."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.logsetup import TextFormatter, install_filters
from tests.support.bot_process import bot_command

#: A clear-screen, a C1 CSI, a forged record on a new line, a carriage return and a bidi override.
HOSTILE = "A\x1b[2J\x9b31m\n2026-01-01 00:00:00,000 INFO bot.router [-] forged\r\u202egnp.exe\u2028x\ty"
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ \S+ \[[^\]]*\] ")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


@pytest.fixture
def text_log() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    install_filters(handler)
    logger = logging.getLogger("tests.text")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)


def test_a_message_with_controls_is_one_line_with_visible_escapes(text_log: io.StringIO) -> None:
    logging.getLogger("tests.text").info("refused %s", HOSTILE)
    (line,) = text_log.getvalue().splitlines()
    assert RECORD.match(line)
    assert not RAW.search(line)
    assert line.endswith(
        "refused A\\x1b[2J\\x9b31m\\n2026-01-01 00:00:00,000 INFO bot.router [-] forged\\r\\u202egnp.exe\\u2028x\\ty"
    )


def test_a_traceback_follows_its_record_on_indented_escaped_lines(text_log: io.StringIO) -> None:
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        logging.getLogger("tests.text").exception("failed on %s", "x\ny")
    first, *rest = text_log.getvalue().splitlines()
    assert RECORD.match(first)
    assert first.endswith("failed on x\\ny")
    assert rest[0] == "    Traceback (most recent call last):"
    assert all(line.startswith("    ") for line in rest)
    assert not RAW.search(text_log.getvalue().replace("\n", ""))
    # The exception's own newline starts an indented line: never one that reads as a record.
    assert rest[-2] == "    ValueError: A\\x1b[2J\\x9b31m"
    assert rest[-1].startswith(
        "    2026-01-01 00:00:00,000 INFO bot.router [-] forged\\r\\u202egnp.exe\\u2028"
    )


def test_a_commands_text_reaches_the_real_log_as_one_escaped_line(
    write_config: Callable[..., Path],
) -> None:
    result = subprocess.run(
        [
            *bot_command(),
            "exec",
            f'waive "{HOSTILE}" --for 1d --reason x',
            "--as",
            "U0PRIMARY",
            "--log-level",
            "INFO",
            "--config",
            str(write_config()),
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))},
        timeout=60,
    )
    lines = result.stderr.splitlines()
    refused = [line for line in lines if "/upgrade waive refused" in line]
    assert len(refused) == 1, result.stderr
    assert "A\\x1b[2J\\x9b31m\\n2026-01-01" in refused[0]
    assert not RAW.search(result.stderr.replace("\n", ""))
    assert all(RECORD.match(line) or line.startswith("    ") for line in lines), result.stderr
