"""`upgrade-bot outbox list|retry ROW|drop ROW`: the operator's hands on thread posts Slack refused
every time, set aside as dead letters (`bot.core.delivery`)."""

from __future__ import annotations

import argparse
import json
import sys

from bot.core.delivery import failure_reason
from bot.errors import UserError, clip
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, dead_letter_verb
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    dead_letter_verb(
        subparsers,
        "outbox",
        "thread posts Slack refused every time: list, retry, drop",
        listed="the dead letters: row, when, how it failed, text",
        retry="post it again (at the next pass over its run's or job's posts)",
        key="row",
        key_type=_outbox_row,
        key_help="the row, SUBJECT/KEY (`outbox list` shows it)",
    )
    return configured(_outbox)


def _outbox_row(text: str) -> tuple[str, str]:
    subject, _, key = text.partition("/")
    if not (subject and key and len(subject) <= 64 and len(key) <= 200):
        raise argparse.ArgumentTypeError(
            f"{text[:30]!r} is not an outbox row (SUBJECT/KEY, as `outbox list` shows)"
        )
    return subject, key


def _outbox(settings: Settings, args: argparse.Namespace) -> int:
    store = open_store(settings)
    try:
        if args.outbox_command == "list":
            rows = store.outbox_dead()
            for row in rows:
                try:
                    body = json.loads(row.body)
                except ValueError:
                    body = {}
                text = body.get("text") if isinstance(body, dict) else ""
                when = f"{row.dead_at:%Y-%m-%d %H:%M:%S}Z" if row.dead_at is not None else "?"
                # What Slack said and what to do; the exception and where it was raised are in the log.
                print(
                    f"{row.run_id}/{row.key}\t{when}\t{row.attempts} attempt(s)\t{failure_reason(row.failure)}\t"
                    f"{clip(str(text or ''), 60)!r}"
                )
            print(f"{len(rows)} dead letter(s)", file=sys.stderr)
            return EXIT_OK
        subject, key = args.row
        if args.outbox_command == "retry":
            if not store.outbox_retry(run_id=subject, key=key):
                raise UserError(
                    f"outbox row {subject}/{clip(key)} is not a dead letter (`upgrade-bot outbox list`)"
                )
            print(
                f"outbox row {subject}/{key} is owed again; it is posted at the next pass over {subject}'s posts"
            )
            return EXIT_OK
        if not store.outbox_drop(run_id=subject, key=key):
            raise UserError(
                f"outbox row {subject}/{clip(key)} is not a dead letter (`upgrade-bot outbox list`)"
            )
        print(f"outbox row {subject}/{key} dropped")
        return EXIT_OK
    finally:
        store.close()
