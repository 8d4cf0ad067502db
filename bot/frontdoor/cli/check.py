"""`upgrade-bot check [--cluster C] [--to V] [--manifests PATH|-] [--images] [-o text|md|json|yaml]`: the
pre-flight checks for an upgrade, on a cluster or (`--manifests` alone, as CI runs it, without a
cluster or a configuration file) on manifests; exit 3 when a Required one fails, 1 when a list most
checks rest on could not be read (INCOMPLETE: not a pass).

On a cluster it reads the configured store's waivers and gives `/upgrade check`'s verdict
(`service.check_cluster`); without a configuration file (the current kube context) there is no
store, and the output says that no waivers were read."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot.core.checks import fleet as fleet_checks
from bot.core.checks import service as checks
from bot.core.checks.findings import Report
from bot.core.checks.waivers import active_waivers
from bot.core.clusters import pick_cluster
from bot.core.fleets.plan import parse_fleet, resolve
from bot.core.rules import Rule, load_rules
from bot.core.runs.plans import read_plan_file
from bot.errors import BotError, PlanInvalid, UsageError, UserError
from bot.frontdoor.cli.config import configured
from bot.frontdoor.cli.connect import connect, open_store
from bot.frontdoor.cli.options import (
    EXIT_FAILED,
    EXIT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    Subparsers,
    cluster_flag,
    formats,
    kube_flags,
    refused,
    verb_parser,
)
from bot.frontdoor.cli.output import as_yaml, write_out
from bot.frontdoor.cli.progress import progress_bar
from bot.logsetup import configure_logging
from bot.records import ClusterConfig, ImageChecks, WaiverRow
from bot.settings import Settings

if TYPE_CHECKING:
    from bot.core.snapshots.projection import Progress

#: `--fleet` without a name: every configured cluster.
EVERY_CLUSTER = "*"


def register(subparsers: Subparsers) -> Handler:
    check = verb_parser(
        subparsers,
        "check",
        "pre-flight checks for an upgrade; exit 3 when a Required one fails",
    )
    cluster_flag(check)
    check.add_argument("--to", help="the target version, e.g. 1.25 (default: one minor above the cluster)")
    check.add_argument(
        "--manifests",
        action="append",
        default=[],
        metavar="PATH",
        help="YAML files or directories to check for removed APIs, - for standard input "
        "(repeatable; alone, no cluster is read)",
    )
    check.add_argument(
        "--images",
        action="store_true",
        help="ask each image's registry whether the images the upgrade rolls out exist (IMG001), "
        "as checks.images.verify does; credentials from checks.images.docker_config, else "
        "$DOCKER_CONFIG/config.json or ~/.docker/config.json",
    )
    check.add_argument(
        "--fleet",
        nargs="?",
        const=EVERY_CLUSTER,
        metavar="FLEET",
        help="check every configured cluster at once (or the clusters of fleet FLEET, a name or a file): "
        "a clusters × findings matrix, Markdown (text, md), CSV (csv) or JSON",
    )
    formats(check, ["text", "md", "json", "yaml", "csv"], "text")
    check.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    kube_flags(check)
    on_cluster = configured(_check, read_only=True)

    def handle(args: argparse.Namespace) -> int:
        if args.manifests and not args.cluster:
            # CI checks its manifests without a cluster (and without a configuration file).
            return _check_manifests(args)
        return on_cluster(args)

    return handle


def _check(settings: Settings, args: argparse.Namespace) -> int:
    if args.fleet:
        return _check_fleet(settings, args)
    if args.output == "csv":
        raise UsageError(
            "-o csv is the matrix of `check --fleet`; one cluster's check is text, md, json or yaml"
        )
    try:
        target = checks.check_target(args.to)
        cluster = pick_cluster(settings.clusters, args.cluster)
    except UserError as exc:
        raise UsageError(exc.user_message) from None
    rules = load_rules(settings.rules_paths())
    stdin = _manifests_stdin(args.manifests)
    now = datetime.now(UTC)
    waivers = stored_waivers(settings, cluster.name)
    manifests = [Path(p) for p in args.manifests]
    with progress_bar(quiet=args.output != "text") as progress:
        report = _check_cluster(
            settings,
            args,
            cluster,
            target,
            rules,
            now,
            waivers,
            manifests,
            stdin=stdin,
            progress=progress,
            asked=True,
        )
    write_out(_render(report, args.output), args.out, "the check")
    return EXIT_FOUND if report.failed else EXIT_FAILED if report.incomplete else EXIT_OK


def _check_cluster(
    settings: Settings,
    args: argparse.Namespace,
    cluster: ClusterConfig,
    target: str | None,
    rules: Sequence[Rule],
    now: datetime,
    waivers: Sequence[WaiverRow] | None,
    manifests: Sequence[Path] = (),
    *,
    stdin: str | None = None,
    progress: Progress | None = None,
    asked: bool = False,
) -> Report:
    """One cluster's check, connected for it alone: its rules, extras and waivers, and the
    `manifests` named (`--manifests`, `stdin` standing for `-`); `asked`: `--to` is held to the
    cluster's version (`checks.against_the_cluster`)."""
    reader = connect(cluster)
    try:
        return checks.check_cluster(
            reader,
            target=target,
            waivers=waivers,
            now=now,
            ignores=settings.check_ignores,
            rules=rules,
            extras=checks.default_extras(
                now=now.timestamp(),
                cluster=cluster,
                images=_image_checks(settings.image_checks, args.images),
                manifests=manifests,
                stdin=stdin,
            ),
            manifests=manifests,
            manifest_check=checks.default_manifest_check(stdin),
            progress=progress,
            asked=asked,
        )
    finally:
        reader.close()


def _check_fleet(settings: Settings, args: argparse.Namespace) -> int:
    """`--fleet [FLEET]`: every cluster's check at once, as `/upgrade check --fleet` (its waivers each)."""
    try:
        target = checks.check_target(args.to)
        clusters = _fleet_clusters(settings, args.fleet)
    except (UserError, PlanInvalid) as exc:
        raise UsageError(exc.user_message) from None
    rules = load_rules(settings.rules_paths())
    now = datetime.now(UTC)
    # Read once, before the clusters are checked at once: a store opened (and migrated) by each
    # cluster's thread at the same moment found a fresh SQLite file locked ("cannot connect").
    waivers = stored_waivers_of(settings, clusters)

    def one(name: str) -> Report:
        mine = waivers[name] if waivers is not None else None
        # A cluster already past `--to` is refused as `check --cluster` refuses it: its line in the
        # matrix says so (not checked), and the others are checked.
        return _check_cluster(settings, args, settings.clusters[name], target, rules, now, mine, asked=True)

    matrix = fleet_checks.check_fleet(clusters, one, target=target or "")
    if args.output in ("json", "yaml"):
        data = json.dumps(fleet_checks.as_json(matrix), indent=2) + "\n"
        text = as_yaml(data) if args.output == "yaml" else data
    else:
        text = (
            fleet_checks.render_csv(matrix) if args.output == "csv" else fleet_checks.render_markdown(matrix)
        )
    write_out(text, args.out, "the fleet's check")
    return EXIT_FOUND if matrix.failed else EXIT_OK


def _fleet_clusters(settings: Settings, fleet: str) -> list[str]:
    """Every configured cluster, or the clusters of fleet `fleet` (a file, or a name in the
    templates' `fleets/`) in stage order."""
    if fleet == EVERY_CLUSTER:
        if not settings.clusters:
            raise UserError("no cluster is configured")
        return list(settings.clusters)
    path = Path(fleet)
    if not fleet.endswith((".yaml", ".yml")):
        found = [d / "fleets" / f"{fleet}.yaml" for d in settings.template_dirs()]
        path = next((p for p in found if p.is_file()), path)
    if not path.is_file():
        raise UserError(f"no fleet plan `{fleet}` (a .yaml file, or a name in templates_dir/fleets/)")
    plan = parse_fleet(read_plan_file(path), source=str(path))
    return [c for s in resolve(plan, settings.clusters) for c in s.clusters]


def stored_waivers(settings: Settings, cluster: str) -> list[WaiverRow] | None:
    """The cluster's stored waivers, as `/upgrade check` reads them; None without a configuration
    file (the current kube context's settings), where no team's store is known."""
    found = stored_waivers_of(settings, [cluster])
    return found[cluster] if found is not None else None


def stored_waivers_of(settings: Settings, clusters: Sequence[str]) -> dict[str, list[WaiverRow]] | None:
    """`stored_waivers` of each of `clusters`, from one opening of the store."""
    if settings.source is None:
        return None
    store = open_store(settings)
    try:
        return {name: active_waivers(store, cluster=name) for name in clusters}
    finally:
        store.close()


def _check_manifests(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    try:
        if not args.to:
            raise UsageError("--manifests without --cluster needs --to VERSION (the target to check against)")
        report = checks.check_manifests(
            [Path(p) for p in args.manifests],
            target=args.to,
            stdin=_manifests_stdin(args.manifests),
            images=_image_checks(ImageChecks(), args.images) if args.images else None,
        )
    except BotError as exc:
        return refused(exc)
    try:
        write_out(_render(report, args.output), args.out, "the check")
    except OSError as exc:
        print(f"upgrade-bot: cannot write {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FOUND if report.failed else EXIT_FAILED if report.incomplete else EXIT_OK


def _image_checks(configured: ImageChecks, flag: bool) -> ImageChecks:
    """`checks.images`, turned on by `--images`; without a configured docker config, the one the
    docker CLI reads (so `docker login` is enough for a person at a terminal)."""
    if not flag:
        return configured
    docker_config = configured.docker_config
    if docker_config is None:
        home = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
        candidate = Path(home) / "config.json"
        docker_config = candidate if candidate.is_file() else None
    return replace(configured, verify=True, docker_config=docker_config)


def _manifests_stdin(manifests: Sequence[str]) -> str | None:
    """`--manifests -`: the multi-document YAML stream on standard input (`helm template … |`)."""
    if "-" not in manifests:
        return None
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("--manifests - reads YAML from standard input; pipe it in (helm template … |)")
    return sys.stdin.read()


def _render(report: Report, output: str) -> str:
    if output == "yaml":
        return as_yaml(checks.RENDERERS["json"](report))
    return checks.RENDERERS[output](report)
