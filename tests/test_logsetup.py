"""The JSON log format: one object per line, with the ids bound where the line was written."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from bot.logsetup import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    correlation,
    install_filters,
    log_context,
    run_scoped,
    set_replica_id,
)
from tests.support.secrets import BOT_TOKEN


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    install_filters(handler, [BOT_TOKEN])
    logger = logging.getLogger("tests.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    set_replica_id("pod-a:1")
    yield out
    set_replica_id("")
    logger.removeHandler(handler)


class Service:
    @run_scoped
    def apply(self, run_id: str, step: str) -> str:
        logging.getLogger("tests.json").info("step %s of %s", step, run_id)
        return step


def entries(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_inside_a_run_method_carries_the_run_and_correlation_ids(json_lines: io.StringIO) -> None:
    with correlation("c0ffee00"):
        assert Service().apply("r-42", "drain") == "drain"
        logging.getLogger("tests.json").info("after the run")
    inside, after = entries(json_lines)
    assert inside["message"] == "step drain of r-42"
    assert (inside["run_id"], inside["correlation_id"], inside["replica_id"]) == (
        "r-42",
        "c0ffee00",
        "pod-a:1",
    )
    assert (inside["level"], inside["logger"]) == ("INFO", "tests.json")
    # Unbound again once the method returned; unknown ids are null, not "-".
    assert (after["run_id"], after["correlation_id"]) == (None, "c0ffee00")


def test_json_lines_redact_tokens_in_messages_and_tracebacks(json_lines: io.StringIO) -> None:
    log = logging.getLogger("tests.json")
    try:
        raise RuntimeError(f"refused {BOT_TOKEN}")
    except RuntimeError:
        log.exception("call with %s failed", BOT_TOKEN)
    (entry,) = entries(json_lines)
    assert BOT_TOKEN not in json_lines.getvalue()
    assert entry["message"] == "call with [redacted] failed"
    assert "RuntimeError: refused [redacted]" in str(entry["exception"])


def test_an_uncaught_exception_in_a_thread_is_logged_through_the_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    previous_hook, root = threading.excepthook, logging.getLogger()
    previous_level, previous_handlers = root.level, list(root.handlers)
    out = io.StringIO()
    try:
        configure_logging("INFO", [BOT_TOKEN], log_format="json")
        monkeypatch.setattr(sys, "stderr", out)

        def boom() -> None:
            raise OSError(f"closed with {BOT_TOKEN}")

        thread = threading.Thread(target=boom, name="worker-x")
        thread.start()
        thread.join()
    finally:
        threading.excepthook = previous_hook
        root.handlers[:] = previous_handlers
        root.setLevel(previous_level)
    (entry,) = entries(out)
    assert entry["message"] == "uncaught exception in thread worker-x"
    assert "OSError: closed with [redacted]" in str(entry["exception"])


def test_the_handler_writes_to_stderr_as_it_is_when_a_line_is_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread logging after the process replaced its stderr (and closed the old one, as pytest's
    capture does between tests) writes to the new stderr, never "I/O operation on closed file"."""
    root = logging.getLogger()
    previous_level, previous_handlers = root.level, list(root.handlers)
    before, after = io.StringIO(), io.StringIO()
    try:
        monkeypatch.setattr(sys, "stderr", before)
        configure_logging("INFO", [BOT_TOKEN])
        monkeypatch.setattr(sys, "stderr", after)
        before.close()
        thread = threading.Thread(
            target=lambda: logging.getLogger("tests.late").warning("late %s", BOT_TOKEN)
        )
        thread.start()
        thread.join()
    finally:
        root.handlers[:] = previous_handlers
        root.setLevel(previous_level)
    assert after.getvalue().count("\n") == 1
    assert "tests.late" in after.getvalue()
    assert "late [redacted]" in after.getvalue()


def test_log_context_binds_run_step_and_job_in_both_formats_and_unbinds_after(
    json_lines: io.StringIO,
) -> None:
    log = logging.getLogger("tests.json")
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(TextFormatter())
    install_filters(handler)
    log.addHandler(handler)
    try:
        with log_context(run_id="r-7", step="drain"), log_context(job="3"):
            log.info("evicting")
        log.info("after")
    finally:
        log.removeHandler(handler)
    inside, after = entries(json_lines)
    assert (inside["run_id"], inside["step"], inside["job"]) == ("r-7", "drain", "3")
    assert (after["run_id"], after["step"], after["job"]) == (None, None, None)
    first, second = text.getvalue().splitlines()
    assert first.endswith("] run=r-7 step=drain job=3 evicting")
    assert second.endswith("] after")
