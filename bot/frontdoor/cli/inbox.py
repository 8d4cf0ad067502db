"""`upgrade-bot inbox list|retry ID|drop ID`: the operator's hands on acknowledged requests set
aside as dead letters after failing (`bot.frontdoor.inbox`)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from bot.errors import UserError, clip, described
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, dead_letter_verb
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    dead_letter_verb(
        subparsers,
        "inbox",
        "acknowledged requests set aside after failing: list, retry, drop",
        listed="the dead letters: id, kind, when, how it failed",
        retry="work it off again (a running bot's leader takes it at its next pass)",
        key="id",
        key_type=_item_id,
        key_help="the item's id (`inbox list` shows it)",
    )
    return configured(_inbox)


def _item_id(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise argparse.ArgumentTypeError(f"{text[:30]!r} is not an inbox item id")
    return int(text)


def _inbox(settings: Settings, args: argparse.Namespace) -> int:
    store = open_store(settings)
    try:
        if args.inbox_command == "list":
            items = store.inbox_items(states=("dead",))
            for item in items:
                try:
                    payload = json.loads(item.payload)
                except ValueError:
                    payload = {}
                who = payload.get("user_id") or payload.get("user") or "?"
                what = payload.get("text") if item.kind == "command" else payload.get("value")
                # How it failed in words, and the id its log lines carry (the error and where it was raised).
                failed = described(item.failure)[1] + (
                    f" (correlation id {payload['_cid']})" if payload.get("_cid") else ""
                )
                print(
                    f"#{item.id}\t{item.kind}\t{item.received_at:%Y-%m-%d %H:%M:%S}Z\t{who}\t"
                    f"{clip(str(what or ''), 60)!r}\t{item.attempts} attempt(s)\t{failed}"
                )
            print(f"{len(items)} dead letter(s)", file=sys.stderr)
            return EXIT_OK
        if args.inbox_command == "retry":
            if not store.inbox_retry(args.id):
                raise UserError(f"inbox item #{args.id} is not a dead letter (`upgrade-bot inbox list`)")
            print(f"inbox item #{args.id} is pending again; the leader works it off at its next pass")
            return EXIT_OK
        if not store.inbox_drop(args.id, at=datetime.now(UTC)):
            raise UserError(f"inbox item #{args.id} is not a dead letter (`upgrade-bot inbox list`)")
        print(f"inbox item #{args.id} dropped")
        return EXIT_OK
    finally:
        store.close()
