"""`upgrade-bot inbox list|retry ID|drop ID`: the operator's hands on acknowledged requests set
aside as dead letters after failing (`bot.frontdoor.inbox`)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from bot.errors import UserError, clip
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import open_store
from bot.frontdoor.cli.options import EXIT_OK, Handler, Subparsers, common_options
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    inbox = subparsers.add_parser(
        "inbox", help="acknowledged requests set aside after failing: list, retry, drop"
    )
    actions = inbox.add_subparsers(dest="inbox_command", required=True, metavar="ACTION")
    actions.add_parser(
        "list", parents=[common_options()], help="the dead letters: id, kind, when, how it failed"
    )
    for name, what in (
        ("retry", "work it off again (a running bot's leader takes it at its next pass)"),
        ("drop", "give up on it for good"),
    ):
        action = actions.add_parser(name, parents=[common_options()], help=what)
        action.add_argument("id", type=_item_id, help="the item's id (`inbox list` shows it)")
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
                print(
                    f"#{item.id}\t{item.kind}\t{item.received_at:%Y-%m-%d %H:%M:%S}Z\t{who}\t"
                    f"{clip(str(what or ''), 60)!r}\t{item.attempts} attempt(s)\t{item.failure}"
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
