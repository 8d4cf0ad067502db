"""The terminal front door: `upgrade-bot …` (also `python -m bot`).

    upgrade-bot run [--http [--host H] [--port N]] [--health-port N]   serve Slack (Socket Mode unless --http)
    upgrade-bot exec "SUBCOMMAND ARGS" [--as USER_ID]   run one /upgrade subcommand, print the reply
    upgrade-bot audit export [-o csv|md|json] [--since …] [--out FILE]
    upgrade-bot sim serve|scenarios …                    the simulated cluster (bot/sim)
    upgrade-bot templates check [DIR]                    render every announcement template (CI)
    upgrade-bot plan validate FILE [--check-slack] [--check-cluster]   check an upgrade plan (exit 2: problems)
    upgrade-bot rehearse PLAN [--scenario S] [--auto-approve | --interactive]   a whole plan on the sim
    upgrade-bot check [--cluster C] [--to V] [--manifests PATH|-] [-o text|md|json|yaml]   pre-flight
    upgrade-bot rules check FILE                         validate a known-issue rules file
    upgrade-bot inbox list|retry ID|drop ID              requests set aside as dead letters
    upgrade-bot outbox list|retry ROW|drop ROW           thread posts set aside as dead letters
    upgrade-bot report RUN [-o html|md|json|png] [--out FILE]   a run's report (timeline picture)

Every command takes `--config PATH`. Configuration problems exit with status 2 and one line that
names the key or line; no traceback is printed for an error the user can fix. The exit statuses are
the same for every command (`EXIT_STATUSES`, shown by `--help`). Without a configuration file the
read-only commands (snapshot, diff, check, and `exec` of snapshot, snapshots, diff, check or
diagnose) use the current kube context as kubectl does (`--kubeconfig`, `--context`, $KUBECONFIG)
and keep their state under $XDG_STATE_HOME/upgrade-bot. `run`'s lifecycle (recovery, triggers,
the transport, shutdown) is `bot.frontdoor.serve`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot import __version__
from bot.errors import BotError, ConfigError, StoreUnreachable, UsageError, UserError
from bot.logsetup import configure_logging
from bot.settings import (
    CONFIG_ENV,
    DEFAULT_CONFIG_NAME,
    Settings,
    kube_context_settings,
    load_settings,
    resolve_config_path,
)

if TYPE_CHECKING:
    from rich.progress import Progress as Bars
    from rich.progress import TaskID

    from bot.adapters.store import Store
    from bot.core.checks.findings import Report
    from bot.core.snapshots.projection import Progress

log = logging.getLogger(__name__)

#: 0 clean; 1 could not do it; 2 usage or configuration error; 3 worked and found something.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FOUND = 0, 1, 2, 3

EXIT_STATUSES = """\
exit status (the same for every command):
  0  done, nothing found
  1  could not do it: cluster unreachable, Slack or store error, unknown snapshot or plan
  2  usage or configuration error: a bad flag or argument, a missing or invalid configuration key,
     an invalid plan, rules or templates file
  3  done, and found something: check (Required findings), diff (regressions), rehearse (completed
     with failed steps skipped, or paused)
"""

#: The commands that only read the cluster (and their own snapshots): without a configuration
#: file they use the current kube context, as kubectl does.
READ_ONLY = frozenset({"snapshot", "snapshot-export", "diff", "check", "plan"})
READ_ONLY_EXEC = frozenset({"snapshot", "snapshots", "diff", "check", "diagnose"})


def _formats(parser: argparse.ArgumentParser, formats: Sequence[str], default: str) -> None:
    """`-o/--output FORMAT`, as kubectl, pluto and kubent spell it; `--format` still works."""
    parser.add_argument(
        "-o",
        "--output",
        dest="output",
        choices=formats,
        default=default,
        metavar="FORMAT",
        help=f"{'|'.join(formats)} (default: {default})",
    )
    parser.add_argument("--format", dest="output", choices=formats, help=argparse.SUPPRESS)


def _kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file(s), as kubectl reads them (default: $KUBECONFIG, then ~/.kube/config)",
    )
    parser.add_argument("--context", help="the kubeconfig context (default: its current context)")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        help="configuration file (default: $UPGRADE_BOT_CONFIG or ./upgrade-bot.yaml; without one, "
        "snapshot, diff and check use the current kube context, as kubectl does)",
    )
    common.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default: INFO for run, WARNING otherwise",
    )
    common.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for a log collector (default: text)",
    )

    parser = argparse.ArgumentParser(
        prog="upgrade-bot",
        description="Run Kubernetes upgrades with your team in Slack.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"upgrade-bot {__version__}")
    # Not required here: `main` says so after an unknown flag is named (argparse checks a required
    # subcommand first, and `upgrade-bot --bogus` would be told a COMMAND is missing).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", parents=[common], help="serve Slack: Socket Mode, or HTTP with --http")
    run.add_argument("--http", action="store_true", help="serve the Events API endpoint over HTTP")
    run.add_argument("--host", default="0.0.0.0", help="address to listen on with --http (default 0.0.0.0)")
    run.add_argument(
        "--port", type=int, default=3000, help="port for --http; 0 picks a free one (default 3000)"
    )
    run.add_argument(
        "--health-port",
        type=int,
        metavar="N",
        help="Socket Mode: serve /healthz, /readyz and /metrics on this port (with --http they are on --port)",
    )

    ex = sub.add_parser(
        "exec",
        parents=[common],
        help="run one /upgrade subcommand from the terminal (exits as the command of the same name)",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("text", help='the subcommand and its arguments, e.g. "help" or "audit --since 1h"')
    ex.add_argument("--as", dest="as_user", metavar="USER_ID", help="act as this Slack user ID (for roles)")
    ex.add_argument(
        "--channel", default="", metavar="CHANNEL_ID", help="the channel the command 'comes from'"
    )
    ex.add_argument("--out", default=".", metavar="DIR", help="where attached files are written (default .)")
    _kube_flags(ex)

    audit = sub.add_parser("audit", help="the audit log")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    export = audit_sub.add_parser(
        "export", parents=[common], help="write the audit log as CSV, Markdown or JSON"
    )
    _formats(export, ["csv", "md", "json"], "csv")
    export.add_argument("--since", help="a duration (30m, 24h, 7d) or a date/time; default: everything")
    export.add_argument("--out", metavar="FILE", help="write here instead of standard output")

    snap = sub.add_parser("snapshot", parents=[common], help="take a snapshot (or: snapshot export ID)")
    snap.add_argument("label", nargs="*", help="pre, post, or any text (default: manual)")
    snap.add_argument("--cluster", help="a configured cluster (default: the only one)")
    _kube_flags(snap)
    snap.add_argument("--as", dest="as_user", metavar="USER_ID", help="recorded as the person who took it")

    diff = sub.add_parser(
        "diff",
        parents=[common],
        help="compare two snapshots; exit 3 on regressions",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("a", help="the earlier snapshot: id or label")
    diff.add_argument("b", nargs="?", help="the later snapshot: id or label (default: the live cluster)")
    _formats(diff, ["text", "md", "json", "yaml"], "text")
    diff.add_argument("--cluster", help="a configured cluster (default: the only one)")
    _kube_flags(diff)

    report = sub.add_parser(
        "report", parents=[common], help="a run's report: the timeline picture, HTML, Markdown or JSON"
    )
    report.add_argument("run", metavar="RUN", help="a run id (see `exec status`)")
    _formats(report, ["html", "md", "json", "png"], "html")
    report.add_argument(
        "--out", metavar="FILE", help="write here (default: standard output; a PNG goes to run-RUN.png)"
    )

    templates = sub.add_parser("templates", help="announcement templates: `templates check [DIR]`")
    templates_sub = templates.add_subparsers(dest="templates_command", required=True, metavar="ACTION")
    tcheck = templates_sub.add_parser(
        "check", parents=[common], help="render every template against a sample context; exit 2 on errors"
    )
    tcheck.add_argument(
        "dir", nargs="?", help="the team's templates directory (default: templates_dir from the config)"
    )

    sub.add_parser("sim", help="the simulated cluster: `upgrade-bot sim --help`", add_help=False)

    rehearse = sub.add_parser(
        "rehearse",
        help="run a whole plan on the simulated cluster, printing the card and thread",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rehearse.add_argument("plan", help="a plan file, or the name of a built-in plan (e.g. eks-nodegroups)")
    rehearse.add_argument(
        "--scenario", default="eks-nodegroups", help="the sim's scenario (default eks-nodegroups)"
    )
    answers = rehearse.add_mutually_exclusive_group()
    answers.add_argument(
        "--auto-approve", action="store_true", help="every gate is answered by the roster (default: ask)"
    )
    answers.add_argument(
        "--interactive",
        action="store_true",
        help="ask at each gate, and offer skip / resume / abort at a failed or interrupted step "
        "(the default when stdin is a terminal)",
    )
    rehearse.add_argument(
        "--config",
        help="the team's configuration: its `checks.ignore` applies to the plan's check steps (nothing else is read)",
    )
    rehearse.add_argument("--speed", type=float, default=600.0, help="simulated seconds per real second")
    rehearse.add_argument("--seed", type=int, default=1)
    rehearse.add_argument(
        "--report", metavar="DIR", help="write the run's report (PNG, HTML, Markdown) into DIR at the end"
    )
    rehearse.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])

    plan = sub.add_parser("plan", help="upgrade plans: `plan validate FILE`")
    plan_sub = plan.add_subparsers(dest="plan_command", required=True, metavar="ACTION")
    validate = plan_sub.add_parser(
        "validate", parents=[common], help="check a plan; exit 2 listing every problem"
    )
    validate.add_argument("file", help="the plan's YAML file")
    validate.add_argument(
        "--check-slack",
        action="store_true",
        help="also ask Slack (SLACK_BOT_TOKEN from --config's environment) that every roster ID exists",
    )
    validate.add_argument(
        "--check-cluster",
        action="store_true",
        help="also check on the plan's cluster (from --config) that its actions' nodes, groups and "
        "workloads exist now (warnings: the cluster may change before the window)",
    )
    draft = plan_sub.add_parser(
        "draft",
        parents=[common],
        help="write a commented plan from what the cluster shows (read-only)",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    draft.add_argument("--cluster", help="a configured cluster (default: the only one)")
    draft.add_argument("--to", required=True, help="the target version, e.g. 1.25 or 1.25.16")
    draft.add_argument(
        "--style",
        choices=["pipeline", "eks-managed", "generic"],
        default="pipeline",
        help="pipeline: people launch new nodes, the bot drains the old (default); eks-managed: EKS "
        "replaces the nodes, the bot waits; generic: as pipeline, worded for any platform",
    )
    draft.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    _kube_flags(draft)
    check = sub.add_parser(
        "check",
        parents=[common],
        help="pre-flight checks for an upgrade; exit 3 when a Required one fails",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("--cluster", help="a configured cluster (default: the only one)")
    check.add_argument("--to", help="the target version, e.g. 1.25 (default: one minor above the cluster)")
    check.add_argument(
        "--manifests",
        action="append",
        default=[],
        metavar="PATH",
        help="YAML files or directories to check for removed APIs, - for standard input "
        "(repeatable; alone, no cluster is read)",
    )
    _formats(check, ["text", "md", "json", "yaml"], "text")
    _kube_flags(check)

    inbox = sub.add_parser("inbox", help="acknowledged requests set aside after failing: list, retry, drop")
    inbox_sub = inbox.add_subparsers(dest="inbox_command", required=True, metavar="ACTION")
    inbox_sub.add_parser("list", parents=[common], help="the dead letters: id, kind, when, how it failed")
    for name, what in (
        ("retry", "work it off again (a running bot's leader takes it at its next pass)"),
        ("drop", "give up on it for good"),
    ):
        action = inbox_sub.add_parser(name, parents=[common], help=what)
        action.add_argument("id", type=_item_id, help="the item's id (`inbox list` shows it)")

    outbox = sub.add_parser("outbox", help="thread posts Slack refused every time: list, retry, drop")
    outbox_sub = outbox.add_subparsers(dest="outbox_command", required=True, metavar="ACTION")
    outbox_sub.add_parser("list", parents=[common], help="the dead letters: row, when, how it failed, text")
    for name, what in (
        ("retry", "post it again (at the next pass over its run's or job's posts)"),
        ("drop", "give up on it for good"),
    ):
        action = outbox_sub.add_parser(name, parents=[common], help=what)
        action.add_argument("row", type=_outbox_row, help="the row, SUBJECT/KEY (`outbox list` shows it)")

    rules = sub.add_parser("rules", help="known-issue rules: `rules check FILE`")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="ACTION")
    rcheck = rules_sub.add_parser(
        "check", parents=[common], help="validate a rules file; exit 2 listing problems"
    )
    rcheck.add_argument("file", help="the rules file (YAML)")
    return parser


def _export_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    parser = argparse.ArgumentParser(
        prog="upgrade-bot snapshot export",
        parents=[common],
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("id", help="snapshot id or label")
    # `wide` is kubectl's name; `kubectl-wide` is this command's older one.
    _formats(parser, ["json", "yaml", "wide", "kubectl-wide"], "json")
    parser.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    parser.add_argument("--cluster", help="with a label: which cluster")
    _kube_flags(parser)
    parser.add_argument("--config", metavar="PATH")
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-format", choices=["text", "json"], default="text")
    parser.set_defaults(command="snapshot-export")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["sim", "scenario"]:
        # A twin of a cluster: the bot's stored snapshot (read here) written as a sim scenario.
        return _sim_scenario(argv[2:])
    if argv[:1] == ["sim"]:
        # The simulator is a separate subsystem with its own arguments; the bot never imports it.
        from bot.sim.cli import main as sim_main

        return int(sim_main(argv[1:]))
    # `snapshot export ID` shares its first word with `snapshot [LABEL…]`.
    parser = _export_parser() if argv[:2] == ["snapshot", "export"] else _parser()
    args, unknown = parser.parse_known_args(argv[2:] if argv[:2] == ["snapshot", "export"] else argv)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.error("the following arguments are required: COMMAND")
    if args.command == "plan" and args.plan_command == "validate":
        # Validating a plan needs no configuration file unless Slack is asked about the roster.
        return _plan_validate(args)
    if args.command == "rehearse":
        return _rehearse(args)
    if args.command == "templates":
        # The team's CI runs this on a templates directory alone, without a configuration file.
        return _templates_check(args)
    if args.command == "rules":
        return _rules_check(args)
    if args.command == "check" and args.manifests and not args.cluster:
        # CI checks its manifests without a cluster (and without a configuration file).
        return _check_manifests(args)
    read_only = args.command in READ_ONLY or (
        args.command == "exec" and (args.text.split() or [""])[0] in READ_ONLY_EXEC
    )
    try:
        settings = _settings(args, read_only=read_only)
        level = args.log_level or ("INFO" if args.command == "run" else "WARNING")
        configure_logging(level, settings.secrets.values(), log_format=args.log_format)
        if args.command == "run":
            from bot.frontdoor.serve import serve

            serve(settings, http=args.http, host=args.host, port=args.port, health_port=args.health_port)
            return EXIT_OK
        if args.command == "exec":
            return _exec(settings, args)
        if args.command == "audit":
            return _audit_export(settings, args)
        if args.command == "snapshot":
            return _snapshot(settings, args)
        if args.command == "snapshot-export":
            return _snapshot_export(settings, args)
        if args.command == "diff":
            return _diff(settings, args)
        if args.command == "check":
            return _check(settings, args)
        if args.command == "inbox":
            return _inbox(settings, args)
        if args.command == "outbox":
            return _outbox(settings, args)
        if args.command == "plan":
            return _plan_draft(settings, args)
        if args.command == "report":
            return _report(settings, args)
    except StoreUnreachable as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_FAILED
    except ConfigError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except BotError as exc:
        log.debug("failed", exc_info=True)
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        # A file the user named (--out, --output) that cannot be written: their mistake, one line.
        where = exc.filename or "a file"
        print(f"upgrade-bot: cannot write {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception:
        # A bug: the detail goes to the log (stderr), behind one line a person can quote.
        log.exception("upgrade-bot %s failed unexpectedly", args.command)
        print("upgrade-bot: internal error (the log above has the detail)", file=sys.stderr)
        return EXIT_FAILED
    raise AssertionError(f"unhandled command {args.command}")


def _rehearse(args: argparse.Namespace) -> int:
    import tempfile

    from bot.adapters.kube import Cluster
    from bot.errors import PlanInvalid
    from bot.frontdoor.rehearse import rehearse
    from bot.records import EksProvider
    from bot.sim.cluster import SimCluster
    from bot.sim.world.scenario import ScenarioError

    configure_logging(args.log_level or "WARNING", [])
    from bot.settings import read_check_ignores

    try:
        ignores = read_check_ignores(Path(args.config)) if args.config else ()
    except ConfigError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="upgrade-bot-rehearsal-") as tmp:
        workdir = Path(tmp)
        try:
            sim = SimCluster(args.scenario, speed=args.speed, seed=args.seed).start()
        except ScenarioError as exc:
            # A scenario file that does not follow the schema: its name, line and key, no traceback.
            print(f"upgrade-bot: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            kubeconfig = sim.write_kubeconfig(workdir / "kubeconfig", context="sim")
            print(f"sim {args.scenario} at {sim.url} (speed {args.speed:g}x)", flush=True)
            eks = None
            if sim.aws_url is not None and sim.core.aws is not None:
                # The scenario has a cloud: the plan's cluster is an EKS cluster whose AWS APIs are
                # the sim's. It takes any credentials; the rehearsal's own keep the team's real
                # ones (environment, files, instance metadata) from being used, or needed.
                eks = EksProvider(
                    name=sim.core.aws.name, region=sim.core.aws.region, endpoint_url=sim.aws_url
                )
                os.environ.update(
                    AWS_ACCESS_KEY_ID="rehearsal",
                    AWS_SECRET_ACCESS_KEY="rehearsal",
                    AWS_CONFIG_FILE=str(workdir / "no-aws-config"),
                    AWS_SHARED_CREDENTIALS_FILE=str(workdir / "no-aws-credentials"),
                    AWS_EC2_METADATA_DISABLED="true",
                )
                os.environ.pop("AWS_SESSION_TOKEN", None)
                os.environ.pop("AWS_PROFILE", None)
                print(f"aws: {sim.aws_url} (EKS cluster {eks.name})", flush=True)
            return rehearse(
                args.plan,
                sim_url=sim.url,
                kubeconfig=kubeconfig,
                workdir=workdir,
                eks=eks,
                auto_approve=args.auto_approve,
                interactive=args.interactive or (not args.auto_approve and sys.stdin.isatty()),
                out=sys.stdout,
                ask=input,
                connect_cluster=Cluster.connect,
                # The bot reads the sim's time: a drain's 15-minute timeout, a watch's settle and
                # a pod's age pass as fast as the simulated upgrade does.
                clock=lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC),
                speed=args.speed,
                ignores=ignores,
                report_dir=Path(args.report) if args.report else None,
            )
        except PlanInvalid as exc:
            print(exc.user_message, file=sys.stderr)
            return EXIT_USAGE
        except (EOFError, KeyboardInterrupt):
            print("\nrehearsal stopped", file=sys.stderr)
            return EXIT_FAILED
        except BotError as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_FAILED
        finally:
            sim.stop()


def _rules_check(args: argparse.Namespace) -> int:
    from bot.core.checks.rules import read_rules

    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file)
    try:
        rules = read_rules(path)
    except FileNotFoundError:
        print(f"upgrade-bot: {path}: no such file", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: {len(rules)} rules are valid: {', '.join(r.id for r in rules)}")
    return EXIT_OK


def _check(settings: Settings, args: argparse.Namespace) -> int:
    from bot.adapters.kube import Cluster
    from bot.core.checks import service as checks
    from bot.core.checks.rules import load_rules
    from bot.core.clusters import pick_cluster

    try:
        target = checks.check_target(args.to)
        cluster = pick_cluster(settings.clusters, args.cluster)
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    rules = load_rules(settings.rules_paths())
    stdin = _manifests_stdin(args.manifests)
    reader = Cluster.connect(cluster)
    try:
        with _progress_bar(quiet=args.output != "text") as progress:
            report = checks.run_check(
                reader,
                target=target,
                rules=rules,
                extras=checks.default_extras(now=datetime.now(UTC).timestamp(), cluster=cluster),
                manifests=[Path(p) for p in args.manifests],
                manifest_check=checks.default_manifest_check(stdin),
                progress=progress,
                covers=settings.check_ignores,
            )
    finally:
        reader.close()
    sys.stdout.write(_render_check(report, args.output))
    return EXIT_FOUND if report.failed else EXIT_OK


def _manifests_stdin(manifests: Sequence[str]) -> str | None:
    """`--manifests -`: the multi-document YAML stream on standard input (`helm template … |`)."""
    if "-" not in manifests:
        return None
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("--manifests - reads YAML from standard input; pipe it in (helm template … |)")
    return sys.stdin.read()


def _render_check(report: Report, output: str) -> str:
    from bot.core.checks import service as checks

    if output == "yaml":
        return _yaml(checks.RENDERERS["json"](report))
    return checks.RENDERERS[output](report)


def _yaml(json_text: str) -> str:
    """The JSON output's data as YAML (the same keys, in the same order)."""
    import json

    import yaml

    return str(yaml.safe_dump(json.loads(json_text), sort_keys=False, allow_unicode=True))


def _check_manifests(args: argparse.Namespace) -> int:
    from bot.core.checks import service as checks

    configure_logging(args.log_level or "WARNING", [])
    try:
        if not args.to:
            raise UsageError("--manifests without --cluster needs --to VERSION (the target to check against)")
        report = checks.check_manifests(
            [Path(p) for p in args.manifests], target=args.to, stdin=_manifests_stdin(args.manifests)
        )
    except (ConfigError, UsageError) as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except BotError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(_render_check(report, args.output))
    return EXIT_FOUND if report.failed else EXIT_OK


def _plan_draft(settings: Settings, args: argparse.Namespace) -> int:
    from bot.adapters.kube import Cluster
    from bot.core.checks import service as checks
    from bot.core.clusters import pick_cluster
    from bot.core.runs.draft import draft_inputs, draft_plan
    from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, take_snapshot

    try:
        checks.check_target(args.to)
        cluster = pick_cluster(settings.clusters, args.cluster)
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    now = datetime.now(UTC)
    try:
        # From the configuration, before the cluster is read: a missing roster fails at once.
        inputs = draft_inputs(
            cluster=cluster.name,
            target=args.to,
            style=args.style,
            now=now,
            roster=settings.roster,
            channels={
                "operations": settings.channels.operations,
                "announcements": settings.channels.announcements,
            },
            windows=settings.windows,
            timezone=settings.timezone,
            group_labels=settings.node_group_labels,
            order=settings.node_group_order,
        )
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    labels = settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS
    reader = Cluster.connect(cluster)
    try:
        print(f"reading {reader.describe()} (read-only) …", file=sys.stderr)
        with _progress_bar() as progress:
            snap = take_snapshot(
                reader,
                label="draft",
                taken_by=f"terminal:{os.environ.get('USER', 'unknown')}",
                now=now,
                node_group_labels=labels,
                progress=progress,
            )
    finally:
        reader.close()
    text = draft_plan(snap, inputs)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"plan draft written to {args.out}; check it with `upgrade-bot plan validate {args.out}`")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _sim_scenario(argv: list[str]) -> int:
    """`sim scenario --from-snapshot LABEL | --builtin NAME`: a scenario file on standard output."""
    from bot.sim.world.scenario import builtin_dir, builtin_scenarios
    from bot.sim.world.twin import dump_scenario, scenario_from_snapshot

    parser = argparse.ArgumentParser(
        prog="upgrade-bot sim scenario",
        description="Write a scenario file: a twin of a cluster from a stored snapshot, or a built-in.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-snapshot", metavar="LABEL", help="a stored snapshot's id or label")
    source.add_argument("--builtin", metavar="NAME", help="a built-in scenario (`upgrade-bot sim scenarios`)")
    parser.add_argument("--cluster", help="with a label: which cluster (default: the only one)")
    parser.add_argument("--name", help="the scenario's name (default: CLUSTER-twin)")
    parser.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    parser.add_argument("--config", metavar="PATH")
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    configure_logging(args.log_level or "WARNING", [])
    if args.builtin:
        path = builtin_dir() / f"{args.builtin}.yaml"
        if not args.builtin.replace("-", "").isalnum() or not path.is_file():
            known = ", ".join(n for n, _ in builtin_scenarios())
            print(f"upgrade-bot: no built-in scenario {args.builtin!r} (known: {known})", file=sys.stderr)
            return EXIT_USAGE
        text = path.read_text(encoding="utf-8")
    else:
        from bot.adapters.store import Store
        from bot.core.snapshots import service as snapshots

        try:
            settings = _settings(args, read_only=True)
            store = Store.open(settings.database_url)
            try:
                try:
                    cluster = snapshots.pick_cluster(settings.clusters, args.cluster)
                except UserError as exc:
                    raise UsageError(exc.user_message) from None
                stored = snapshots.resolve(store, args.from_snapshot, cluster=cluster.name)
            finally:
                store.close()
        except (ConfigError, UsageError) as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_USAGE
        except BotError as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_FAILED
        text = dump_scenario(scenario_from_snapshot(stored.snap, name=args.name))
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"upgrade-bot: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        print(
            f"scenario written to {args.out}; serve it with `upgrade-bot sim serve --scenario {args.out}`",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _plan_validate(args: argparse.Namespace) -> int:
    from bot.core.runs.plans import PeopleLookup, parse_plan, read_plan_file
    from bot.errors import PlanInvalid

    configure_logging(args.log_level or "WARNING", [])
    path = Path(args.file)
    people: PeopleLookup | None = None
    try:
        text = read_plan_file(path)
        if args.check_slack:
            from bot.adapters.slack import SlackDirectory, make_web_client

            settings = _settings(args)
            settings.secrets.require("SLACK_BOT_TOKEN")
            people = SlackDirectory(make_web_client(settings.secrets.bot_token, settings.secrets.api_url))
        plan = parse_plan(text, source=str(path), people=people, now=datetime.now(UTC))
    except PlanInvalid as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except BotError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_FAILED
    if args.check_cluster:
        from bot.adapters.kube import Cluster
        from bot.core.jobs.preflight import check_plan
        from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS

        try:
            settings = _settings(args)
        except ConfigError as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_USAGE
        for warning in check_plan(
            plan,
            clusters=settings.clusters,
            connect=Cluster.connect,
            node_group_labels=settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
            now=datetime.now(UTC),
        ):
            print(f"{path}: warning: {warning}", file=sys.stderr)
    checked = " (Slack users checked)" if people is not None else ""
    print(
        f"{path}: plan {plan.name} is valid{checked}: {plan.cluster} {plan.current_version} → "
        f"{plan.target_version}, {len(plan.steps)} steps, roles {', '.join(sorted(plan.roster))}"
    )
    return EXIT_OK


def _templates_check(args: argparse.Namespace) -> int:
    from bot.core.announcements.templates import AnnouncementRenderer

    configure_logging(args.log_level or "WARNING", [])
    directory = Path(args.dir) if args.dir else None
    if directory is None and resolve_config_path(args.config, os.environ, Path.cwd()).is_file():
        try:
            directory = _settings(args).templates_dir
        except ConfigError as exc:
            print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
            return EXIT_USAGE
    if directory is not None and not directory.is_dir():
        print(f"upgrade-bot: {directory}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    problems = AnnouncementRenderer(directory).check()
    for problem in problems:
        # `FILE:LINE: reason` at the start of the line, as editors and CI annotations expect.
        print(problem, file=sys.stderr)
    if problems:
        print(f"upgrade-bot: {len(problems)} template problem(s)", file=sys.stderr)
        return EXIT_USAGE  # the team's templates are configuration, as plans and rules files are
    source = f"built-in templates with overrides from {directory}" if directory else "built-in templates"
    print(f"templates ok: every announcement renders ({source})")
    return EXIT_OK


def _settings(args: argparse.Namespace, *, read_only: bool = False) -> Settings:
    """The configuration file's settings; for a read-only command without one (no --config, no
    $UPGRADE_BOT_CONFIG, no ./upgrade-bot.yaml), the current kube context's (`_kube_settings`).
    `--kubeconfig`/`--context` with a configuration file apply to its clusters."""
    path = resolve_config_path(args.config, os.environ, Path.cwd())
    kubeconfig, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    if read_only and not args.config and not os.environ.get(CONFIG_ENV) and not path.exists():
        return _kube_settings(kubeconfig, context)
    settings = load_settings(path, os.environ)
    if kubeconfig or context:
        settings = replace(
            settings,
            clusters={
                name: replace(
                    c,
                    kubeconfig=Path(kubeconfig).expanduser() if kubeconfig else c.kubeconfig,
                    context=context or (None if kubeconfig else c.context),
                    in_cluster=False if kubeconfig else c.in_cluster,
                )
                for name, c in settings.clusters.items()
            },
        )
    return settings


def _kube_settings(kubeconfig: str | None, context: str | None) -> Settings:
    """kubectl's rules: `--kubeconfig`, else $KUBECONFIG (a colon-separated list, merged), else
    ~/.kube/config; `--context`, else the current context."""
    from bot.adapters.kube import kubeconfig_context

    source = kubeconfig or os.environ.get("KUBECONFIG", "").strip() or str(Path("~/.kube/config"))
    paths = [Path(p).expanduser() for p in source.split(os.pathsep) if p]
    if not any(p.is_file() for p in paths):
        where = f"--config PATH or set {CONFIG_ENV}; see upgrade-bot.example.yaml"
        raise ConfigError(
            f"no configuration file ({DEFAULT_CONFIG_NAME}) and no kubeconfig at {source} "
            f"(pass --kubeconfig PATH, set KUBECONFIG, or pass {where})"
        )
    chosen = kubeconfig_context(os.pathsep.join(str(p) for p in paths), context)
    return kube_context_settings(
        kubeconfig=os.pathsep.join(str(p) for p in paths), context=chosen, env=os.environ
    )


def _exec(settings: Settings, args: argparse.Namespace) -> int:
    from bot.frontdoor.assemble import assemble
    from bot.router import CommandRequest

    user = args.as_user or f"terminal:{os.environ.get('USER', 'unknown')}"
    if settings.source is None:
        # No configuration file, so no roster: only the read-only subcommands come here, and the
        # person at the terminal reads with their own kube credentials, as with kubectl.
        settings = replace(settings, roster={"terminal": (user,)})
    services = assemble(settings)
    try:
        outcome = services.router.handle(
            CommandRequest(text=args.text, user_id=user, channel_id=args.channel, source="terminal")
        )
    finally:
        services.close()
    print(outcome.rendered.text)
    out_dir = Path(args.out)
    for attachment in outcome.reply.files:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / attachment.filename
        target.write_bytes(attachment.content)
        print(f"file: {target}")
    if outcome.ok:
        # As the terminal command of the same name exits: `exec "check"` with Required findings is 3.
        return EXIT_FOUND if outcome.reply.found else EXIT_OK
    return EXIT_USAGE if outcome.audit_outcome == "usage" else EXIT_FAILED


def _item_id(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise argparse.ArgumentTypeError(f"{text[:30]!r} is not an inbox item id")
    return int(text)


def _inbox(settings: Settings, args: argparse.Namespace) -> int:
    """`inbox list|retry|drop`: the operator's hands on dead letters (`bot.frontdoor.inbox`)."""
    import json

    from bot.adapters.store import Store
    from bot.errors import clip

    store = Store.open(settings.database_url)
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


def _outbox_row(text: str) -> tuple[str, str]:
    subject, _, key = text.partition("/")
    if not (subject and key and len(subject) <= 64 and len(key) <= 200):
        raise argparse.ArgumentTypeError(
            f"{text[:30]!r} is not an outbox row (SUBJECT/KEY, as `outbox list` shows)"
        )
    return subject, key


def _outbox(settings: Settings, args: argparse.Namespace) -> int:
    """`outbox list|retry|drop`: the operator's hands on thread posts set aside (`bot.core.delivery`)."""
    import json

    from bot.adapters.store import Store
    from bot.errors import clip

    store = Store.open(settings.database_url)
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
                print(
                    f"{row.run_id}/{row.key}\t{when}\t{row.attempts} attempt(s)\t{row.failure}\t"
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


def _report(settings: Settings, args: argparse.Namespace) -> int:
    from bot.adapters.store import Store
    from bot.core.runs.report import build_report, render

    store = Store.open(settings.database_url)
    try:
        body = render(build_report(store, args.run, now=datetime.now(UTC)), args.output)
    finally:
        store.close()
    out = args.out or (f"run-{args.run}.png" if args.output == "png" else None)
    if out:
        Path(out).write_bytes(body)
        print(f"wrote the {args.output} report of run {args.run} to {out}", file=sys.stderr)
    else:
        sys.stdout.write(body.decode())
    return EXIT_OK


def _audit_export(settings: Settings, args: argparse.Namespace) -> int:
    from bot.adapters.store import Store
    from bot.core import audit

    since = audit.parse_since(args.since, datetime.now(UTC), settings.timezone) if args.since else None
    store = Store.open(settings.database_url)
    try:
        entries = store.audit_entries(since=since)
    finally:
        store.close()
    text = {"csv": audit.to_csv, "md": audit.to_markdown, "json": audit.to_json}[args.output](entries)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {len(entries)} entries to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


#: How often the progress display redraws; a list's pages report more often than that.
PROGRESS_REFRESH = 4.0


@contextlib.contextmanager
def _progress_bar(*, quiet: bool = False) -> Iterator[Progress | None]:
    """A progress line per list being read, on standard error: items read (of the total when the
    server gives one, `remainingItemCount`), items per second and the time left; gone when done.
    Nothing (None) when standard error is not a terminal, or `quiet` (a machine-readable output)."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    display = _Display()
    try:
        yield display
    finally:
        display.close()


class _Display:
    """The progress display, started by the first page reported: `rich` is imported (a tenth of a
    second) while the lists' helper processes already work, and a command that fails before
    reading anything shows none. Pages report more often than it redraws; it keeps the last few
    a second of each list."""

    def __init__(self) -> None:
        self._bars: Bars | None = None
        self._tasks: dict[str, TaskID] = {}
        self._told: dict[str, float] = {}

    def __call__(self, resource: str, count: int, total: int | None = None) -> None:
        now = time.monotonic()
        bars = self._bars = self._bars or _start_bars()
        task = self._tasks.get(resource)
        if task is None:
            self._tasks[resource] = bars.add_task(resource, total=total, completed=count)
        elif now - self._told[resource] >= 1 / PROGRESS_REFRESH or count == total:
            bars.update(task, completed=count, total=total)
        else:
            return
        self._told[resource] = now

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()  # transient: the lines are erased, the command's result follows


def _start_bars() -> Bars:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bars
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f}/s" if speed else "", style="progress.data.speed")

    bars = Bars(
        TextColumn("  reading {task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        transient=True,
        refresh_per_second=PROGRESS_REFRESH,
    )
    bars.start()
    return bars


def _snapshot(settings: Settings, args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from bot.adapters.kube import Cluster
    from bot.core.snapshots import service as snapshots
    from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS

    def open_store() -> Store:
        from bot.adapters.store import Store

        return Store.open(settings.database_url)

    cluster = snapshots.pick_cluster(settings.clusters, args.cluster)
    label = " ".join(args.label) if args.label else "manual"
    # The store (sqlalchemy's import is a tenth of a 150,000-pod snapshot) opens on a thread while
    # the lists are read, by helper processes that leave this one mostly waiting; it is needed
    # only to save the body at the end, and a store that cannot open fails the command there.
    opener = ThreadPoolExecutor(max_workers=1, thread_name_prefix="open-store")
    opening = opener.submit(open_store)
    reader = None
    try:
        reader = Cluster.connect(cluster)
        print(f"snapshot `{label}` of {reader.describe()} …", file=sys.stderr)
        with _progress_bar() as progress:
            stored = snapshots.take_and_store(
                opening.result,
                reader,
                label=label,
                taken_by=args.as_user or f"terminal:{os.environ.get('USER', 'unknown')}",
                now=datetime.now(UTC),
                node_group_labels=settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
                progress=progress,
            )
    finally:
        if reader is not None:
            reader.close()
        opener.shutdown(wait=True)
        if opening.exception() is None:
            opening.result().close()
    counts = stored.snap["counts"]
    print(
        f"snapshot #{stored.meta.id} `{label}`: {counts['nodes']} nodes, {counts['pods']} pods, "
        f"{counts['workloads']} workloads, {stored.meta.size / 1024:.1f} KiB stored"
    )
    for gap in stored.snap["gaps"]:
        print(f"gap: {gap['resource']}: {gap['reason']}")
    return EXIT_OK


def _snapshot_export(settings: Settings, args: argparse.Namespace) -> int:
    import json

    from bot.adapters.store import Store
    from bot.core.snapshots import service as snapshots

    store = Store.open(settings.database_url)
    try:
        stored = snapshots.resolve(store, args.id, cluster=args.cluster)
    finally:
        store.close()
    if args.output == "json":
        text = json.dumps(stored.snap, indent=1) + "\n"
    elif args.output == "yaml":
        text = _yaml(json.dumps(stored.snap))
    else:
        text = snapshots.export_kubectl_wide(stored.snap)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote snapshot #{stored.meta.id} to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _diff(settings: Settings, args: argparse.Namespace) -> int:
    from bot.adapters.kube import Cluster
    from bot.adapters.store import Store
    from bot.core.snapshots import service as snapshots
    from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, take_snapshot

    cluster = snapshots.pick_cluster(settings.clusters, args.cluster)

    def live() -> dict[str, object]:
        reader = Cluster.connect(cluster)
        try:
            with _progress_bar(quiet=args.output != "text") as progress:
                snap = take_snapshot(
                    reader,
                    label="live",
                    taken_by="terminal",
                    now=datetime.now(UTC),
                    node_group_labels=settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
                    progress=progress,
                )
        finally:
            reader.close()
        snap["id"] = "live"
        return snap

    store = Store.open(settings.database_url)
    try:
        report = snapshots.compare(
            store, args.a, args.b, cluster=cluster, live=live, restart_threshold=settings.restart_threshold
        )
    finally:
        store.close()
    if args.output == "yaml":
        text = _yaml(report.to_json())
    else:
        text = {"text": report.to_text, "md": report.to_markdown, "json": report.to_json}[args.output]()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    # Pipelines gate on this: 3 when the upgrade left something worse than before (1: could not look).
    return EXIT_FOUND if report.has_regressions else EXIT_OK
