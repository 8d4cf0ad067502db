"""`upgrade-bot fleet validate|start|status|approve|pause|resume|skip|retry|abort|carry-waivers …`: fleet runs from
the terminal. `validate` checks a fleet plan against the configuration's clusters and each
cluster's plan (exit 2 listing every problem); the other verbs run `/upgrade fleet VERB …` through
the router `assemble` builds, exactly as Slack does, acting as `--as USER_ID` (the fleet's roster
decides), print the reply for a terminal and exit as `exec` does."""

from __future__ import annotations

import argparse
import shlex
import sys

from bot.errors import PlanInvalid
from bot.frontdoor.assemble import assemble
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.exec import answered, exit_status
from bot.frontdoor.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    Subparsers,
    as_person,
    plain_reply,
    terminal_user,
    verb_parser,
)
from bot.router import CommandRequest
from bot.settings import Settings


def register(subparsers: Subparsers) -> Handler:
    fleet = subparsers.add_parser("fleet", help="fleet runs: clusters in stages, the first a canary")
    verbs = fleet.add_subparsers(dest="fleet_command", required=True, metavar="VERB")

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        p = verb_parser(
            verbs,
            name,
            help_,
        )
        if name != "validate":
            as_person(p)
            plain_reply(p)
        return p

    verb(
        "validate", "check a fleet plan against the configured clusters; exit 2 listing every problem"
    ).add_argument("fleet", help="a fleet plan: a name (templates/fleets/NAME.yaml) or a .yaml file")
    verb("start", "start a fleet run").add_argument("fleet", help="a fleet plan: a name or a .yaml file")
    for name, line in (
        ("status", "each cluster by stage, the soak clock, who the next gate waits for"),
        ("approve", "approve the gate the fleet waits on"),
        ("resume", "resume a paused fleet run"),
    ):
        verb(name, line).add_argument("id", nargs="?", help="a fleet run id (default: the only live one)")
    for name, line in (
        ("pause", "pause a fleet run (--reason required)"),
        ("abort", "abort a fleet run (--reason required)"),
    ):
        p = verb(name, line)
        p.add_argument("id", nargs="?", help="a fleet run id (default: the only live one)")
        p.add_argument("--reason", required=True, help="why: on the card and in the audit log")
    skip = verb("skip", "leave a failed or pending cluster out, with the reason")
    skip.add_argument("cluster")
    skip.add_argument("--reason", required=True, help="why: on the card and in the audit log")
    skip.add_argument("--fleet", help="a fleet run id (default: the only live one)")
    verb("carry-waivers", "carry the canary's active waivers to the later clusters (audited)").add_argument(
        "--fleet", help="a fleet run id (default: the only live one)"
    )
    retry = verb("retry", "run the current stage's failed clusters again (--failed)")
    retry.add_argument("--failed", action="store_true", required=True, help="the failed clusters")
    retry.add_argument("--fleet", help="a fleet run id (default: the only live one)")
    return configured(_run)


def _run(settings: Settings, args: argparse.Namespace) -> int:
    if args.fleet_command == "validate":
        return _validate(settings, args)
    words = ["fleet", args.fleet_command]
    for attr in ("fleet", "id", "cluster"):
        value = getattr(args, attr, None)
        if value and not (attr == "fleet" and args.fleet_command in ("skip", "retry", "carry-waivers")):
            words.append(value)
    if args.fleet_command in ("skip", "retry", "carry-waivers") and args.fleet:
        words += ["--fleet", args.fleet]
    if getattr(args, "failed", False):
        words.append("--failed")
    if getattr(args, "reason", None):
        words += ["--reason", args.reason]
    # As `exec` runs a command and prints its reply.
    outcome, shown = answered(
        settings,
        CommandRequest(text=shlex.join(words), user_id=args.as_user or terminal_user(), source="terminal"),
        plain=args.plain,
    )
    print(shown)
    return exit_status(outcome)


def _validate(settings: Settings, args: argparse.Namespace) -> int:
    services = assemble(settings, with_slack=False)
    try:
        plan, stages, _ = services.fleets.validate(args.fleet)
    except PlanInvalid as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    finally:
        services.close()
    layout = "; ".join(f"{s.stage.name}: {', '.join(s.clusters)} (max {s.concurrency})" for s in stages)
    print(
        f"{args.fleet}: fleet {plan.name} is valid: {len(stages)} stages, {sum(len(s.clusters) for s in stages)} clusters — {layout}"
    )
    return EXIT_OK
