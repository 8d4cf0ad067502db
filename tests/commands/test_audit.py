"""`/upgrade audit` and `upgrade-bot audit export`: the trail of who did what."""

from __future__ import annotations

import csv
import io
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.core.audit import parse_since
from bot.errors import UsageError
from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.bot_process import bot_command

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def test_audit_is_refused_to_people_outside_the_roster_and_the_refusal_is_audited(
    write_config: Callable[..., Path],
) -> None:
    services = assemble(load_settings(write_config(), {}), with_slack=False, clock=lambda: NOW)
    try:
        denied = services.router.handle(CommandRequest(text="audit", user_id="U0STRANGER", channel_id="C1"))
        assert not denied.ok
        assert "not in it" in denied.rendered.text
        allowed = services.router.handle(CommandRequest(text="audit", user_id="U0SHADOW", channel_id="C1"))
        assert allowed.ok
        (attachment,) = allowed.reply.files
        rows = list(csv.DictReader(io.StringIO(attachment.content.decode())))
        assert [(r["user_id"], r["subcommand"], r["outcome"]) for r in rows] == [
            ("U0STRANGER", "audit", "denied")
        ]
        assert rows[0]["at_utc"] == "2026-11-22T05:00:00Z"
    finally:
        services.close()


def test_tokens_typed_into_a_command_are_not_stored(write_config: Callable[..., Path]) -> None:
    services = assemble(load_settings(write_config(), {}), with_slack=False)
    try:
        services.router.handle(CommandRequest(text="help xoxb-123-456-abcdef", user_id="U0PRIMARY"))
        (entry,) = services.store.audit_entries()
        assert "xoxb" not in entry.arguments
        assert "[redacted]" in entry.arguments
    finally:
        services.close()


def test_audit_export_writes_csv_and_markdown_from_the_terminal(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config()
    exec_result = subprocess.run(
        [*bot_command(), "exec", "whoami", "--as", "U0PRIMARY", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exec_result.returncode == 0
    assert "primary" in exec_result.stdout
    as_csv = subprocess.run(
        [*bot_command(), "audit", "export", "--format", "csv", "--since", "1h", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert as_csv.returncode == 0, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [(r["user_id"], r["subcommand"], r["source"]) for r in rows] == [
        ("U0PRIMARY", "whoami", "terminal")
    ]
    out = tmp_path / "audit.md"
    as_md = subprocess.run(
        [*bot_command(), "audit", "export", "-o", "md", "--out", str(out), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert as_md.returncode == 0
    assert "| U0PRIMARY | " in out.read_text()


def test_exec_writes_attached_files_to_the_out_directory(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    result = subprocess.run(
        [
            *bot_command(),
            "exec",
            "audit --since 7d",
            "--as",
            "U0PRIMARY",
            "--out",
            str(tmp_path / "out"),
            "--config",
            str(write_config()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    (written,) = (tmp_path / "out").glob("upgrade-bot-audit-*.csv")
    assert written.read_text().startswith("at_utc,user_id")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - timedelta(minutes=30)),
        ("24h", NOW - timedelta(hours=24)),
        ("7d", NOW - timedelta(days=7)),
        ("2026-11-01", datetime(2026, 10, 31, 15, 0, tzinfo=UTC)),  # midnight in Tokyo
        ("2026-11-01T09:00:00+00:00", datetime(2026, 11, 1, 9, 0, tzinfo=UTC)),
    ],
)
def test_since_accepts_durations_and_dates(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW, "Asia/Tokyo") == expected


def test_since_rejects_nonsense() -> None:
    with pytest.raises(UsageError, match="neither a duration"):
        parse_since("yesterday-ish", NOW)


def test_an_export_carries_no_formula_escape_or_ping_from_what_people_typed() -> None:
    """A note `=HYPERLINK("https://evil.example","open runbook")` ran as a formula in the CSV a
    spreadsheet opened; a note with `ESC[31m`, NUL and BEL reached the terminal and both files raw,
    and `<!here>` the Markdown a wiki renders."""
    from bot.core.audit import to_csv, to_markdown
    from bot.records import AuditEntry

    def entry(detail: str) -> AuditEntry:
        at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
        return AuditEntry(at=at, user_id="U0PRIMARY", channel_id="C0OPS", source="slack", kind="run",
                          subcommand="note", arguments="", outcome="ok", detail=detail)  # fmt: skip

    entries = [
        entry('=HYPERLINK("https://evil.example","open runbook")'),
        entry("\x00\x1b[31mred\x07 \u202eexe.txt <!here>"),
        entry("-2+3"),
    ]
    rows = list(csv.DictReader(io.StringIO(to_csv(entries))))
    assert [r["detail"] for r in rows] == [
        '\'=HYPERLINK("https://evil.example","open runbook")',
        "[31mred exe.txt <!here>",
        "'-2+3",
    ]
    md = to_markdown(entries)
    assert "[31mred exe.txt &lt;!here&gt;" in md
    assert not any(ch in md for ch in "\x00\x1b\x07\u202e")
