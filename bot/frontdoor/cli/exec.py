"""`upgrade-bot exec "SUBCOMMAND ARGS" [--as USER_ID] [--plain]`: run one /upgrade subcommand from
the terminal through the bot `assemble` builds, print the reply (Slack's markup rendered for a
terminal, `bot.frontdoor.termtext`), and exit as the terminal command of the same name would."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bot.frontdoor.assemble import assemble
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.options import (
    EXIT_FAILED,
    EXIT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    Subparsers,
    as_person,
    kube_flags,
    plain_reply,
    terminal_user,
    verb_parser,
)
from bot.frontdoor.cli.output import for_terminal
from bot.router import CommandRequest, Outcome
from bot.settings import Settings

#: The subcommands that only read the cluster (and their own snapshots): without a configuration
#: file they use the current kube context, as kubectl does.
READ_ONLY_EXEC = frozenset({"snapshot", "snapshots", "diff", "check", "diagnose"})


def register(subparsers: Subparsers) -> Handler:
    ex = verb_parser(
        subparsers,
        "exec",
        "run one /upgrade subcommand from the terminal (exits as the command of the same name)",
    )
    ex.add_argument("text", help='the subcommand and its arguments, e.g. "help" or "audit --since 1h"')
    as_person(ex)
    ex.add_argument(
        "--channel", default="", metavar="CHANNEL_ID", help="the channel the command 'comes from'"
    )
    ex.add_argument("--out", default=".", metavar="DIR", help="where attached files are written (default .)")
    plain_reply(ex)
    kube_flags(ex)
    return configured(_exec, read_only=lambda args: (args.text.split() or [""])[0] in READ_ONLY_EXEC)


def _exec(settings: Settings, args: argparse.Namespace) -> int:
    user = args.as_user or terminal_user()
    if settings.source is None:
        # No configuration file, so no roster: only the read-only subcommands come here, and the
        # person at the terminal reads with their own kube credentials, as with kubectl.
        settings = replace(settings, roster={"terminal": (user,)})
    outcome, shown = answered(
        settings,
        CommandRequest(text=args.text, user_id=user, channel_id=args.channel, source="terminal"),
        plain=args.plain,
    )
    print(shown)
    out_dir = Path(args.out)
    for attachment in outcome.reply.files:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / attachment.filename
        target.write_bytes(attachment.content)
        print(f"file: {target}")
    return exit_status(outcome)


def answered(settings: Settings, request: CommandRequest, *, plain: bool) -> tuple[Outcome, str]:
    """`request` through the bot `assemble` builds: its outcome, and its reply as a terminal shows
    it (people by name or `@U…`, local dates, emoji, no Slack markup; `plain`: ASCII)."""
    services = assemble(settings)
    try:
        outcome = services.router.handle(request)
        return outcome, for_terminal(outcome.rendered.text, services.store, services.directory, plain=plain)
    finally:
        services.close()


def exit_status(outcome: Outcome) -> int:
    """How a command run from the terminal exits, as the terminal command of the same name would:
    `exec "check"` with Required findings is 3."""
    if outcome.ok:
        return EXIT_FOUND if outcome.reply.found else EXIT_OK
    return EXIT_USAGE if outcome.audit_outcome == "usage" else EXIT_FAILED
