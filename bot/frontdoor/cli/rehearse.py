"""`upgrade-bot rehearse PLAN [--scenario S] [--auto-approve | --interactive]`: a whole plan on the
simulated cluster (bot/sim), printing the card and the thread (`bot.frontdoor.rehearse`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bot.core.checks.findings import Cover
from bot.core.jobs.preflight import sdk_warnings
from bot.errors import BotError, ConfigError, PlanInvalid, UsageError
from bot.frontdoor.cli.connect import connect, sim_aws
from bot.frontdoor.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    LOG_LEVELS,
    Handler,
    Subparsers,
    verb_parser,
)
from bot.frontdoor.rehearse import load_plan_file, rehearse
from bot.logsetup import configure_logging
from bot.records import AksProvider, EksProvider, GkeProvider, ImageChecks
from bot.settings import read_check_ignores, read_image_checks
from bot.sim.cluster import SimCluster
from bot.sim.world.scenario import ScenarioError


def register(subparsers: Subparsers) -> Handler:
    parser = verb_parser(
        subparsers,
        "rehearse",
        "run a whole plan on the simulated cluster, printing the card and thread",
        configured=False,
    )
    parser.add_argument("plan", help="a plan file, or the name of a built-in plan (e.g. eks-nodegroups)")
    parser.add_argument(
        "--scenario",
        default=None,
        help="the sim's scenario (default: the built-in plan's own — aks-nodepools for aks-managed, gke-nodepools for gke-managed — "
        "else eks-nodegroups)",
    )
    gate_answers(
        parser,
        auto_approve="every gate is answered by the roster",
        interactive="ask at each gate, and offer skip / resume / abort at a failed or interrupted step",
    )
    parser.add_argument(
        "--config",
        help="the team's configuration: its `checks.ignore` applies to the plan's check steps, and with "
        "`checks.images.verify` they run IMG001 against the sim's registry (nothing else is read)",
    )
    parser.add_argument(
        "--report", metavar="DIR", help="write the run's report (PNG, HTML, Markdown) into DIR at the end"
    )
    sim_options(parser)
    return _rehearse


def sim_options(parser: argparse.ArgumentParser) -> None:
    """The options of every rehearsal on simulated clusters: their speed and seed, and the output."""
    parser.add_argument("--speed", type=float, default=600.0, help="simulated seconds per real second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print plain ASCII: emoji as words like [ok], no box-drawing or arrows (logs, CI)",
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS)
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for a log collector (default: text)",
    )


def gate_answers(parser: argparse.ArgumentParser, *, auto_approve: str, interactive: str) -> None:
    """Who answers a rehearsal's gates: `--auto-approve` (the roster, `auto_approve` says whose
    gates) or `--interactive` (the person at the terminal, `interactive` says where); `asks` reads
    which."""
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument("--auto-approve", action="store_true", help=f"{auto_approve} (default: ask)")
    answers.add_argument(
        "--interactive", action="store_true", help=f"{interactive} (the default when stdin is a terminal)"
    )


def asks(args: argparse.Namespace) -> bool:
    """Whether the rehearsal asks the person at the terminal (`gate_answers`): `--interactive`, or
    neither flag with a terminal on standard input."""
    return bool(args.interactive or (not args.auto_approve and sys.stdin.isatty()))


def exit_status(rehearsal: Callable[[], int]) -> int:
    """A rehearsal's exit status: its own; or a plan that does not validate (a usage error), a stop
    by the person (^C, ^D) or the bot's refusal (a failure), each said in one line."""
    try:
        return rehearsal()
    except PlanInvalid as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except (EOFError, KeyboardInterrupt):
        print("\nrehearsal stopped", file=sys.stderr)
        return EXIT_FAILED
    except BotError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_FAILED


#: The scenario a built-in plan is rehearsed on when `--scenario` is not given: the plan is
#: written for its cloud (the others default to eks-nodegroups).
PLAN_SCENARIOS = {"aks-managed": "aks-nodepools", "gke-managed": "gke-nodepools"}
DEFAULT_SCENARIO = "eks-nodegroups"


def _rehearse(args: argparse.Namespace) -> int:
    if args.scenario is None:
        args.scenario = PLAN_SCENARIOS.get(str(args.plan), DEFAULT_SCENARIO)
    configure_logging(args.log_level or "WARNING", [], log_format=args.log_format)
    try:
        ignores = read_check_ignores(Path(args.config)) if args.config else ()
        images = read_image_checks(Path(args.config)) if args.config else None
    except ConfigError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    status = exit_status(lambda: _runs_here(str(args.plan)))
    if status != EXIT_OK:
        return status
    with tempfile.TemporaryDirectory(prefix="upgrade-bot-rehearsal-") as tmp:
        workdir = Path(tmp)
        try:
            sim = SimCluster(args.scenario, speed=args.speed, seed=args.seed).start()
        except ScenarioError as exc:
            # A scenario file that does not follow the schema: its name, line and key, no traceback.
            print(f"upgrade-bot: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            return exit_status(lambda: _on_sim(args, sim, workdir, ignores, images))
        finally:
            sim.stop()


def _runs_here(plan_name: str) -> int:
    """EXIT_OK when this bot can run the plan's actions; a usage error before the sim starts when
    one needs a cloud's SDK it lacks (without the extra every such step would fail and be
    skipped, and the rehearsal would end "completed" having rehearsed nothing)."""
    plan, _ = load_plan_file(plan_name)
    lacking = sdk_warnings(plan)
    if lacking:
        raise UsageError(f"cannot rehearse {plan.name} here: {'; '.join(lacking)}")
    return EXIT_OK


def _on_sim(
    args: argparse.Namespace,
    sim: SimCluster,
    workdir: Path,
    ignores: tuple[Cover, ...],
    images: ImageChecks | None,
) -> int:
    """The rehearsal of `args.plan` on the started `sim`, its cluster at the sim's cloud if it has one."""
    kubeconfig = sim.write_kubeconfig(workdir / "kubeconfig", context="sim")
    print(f"sim {args.scenario} at {sim.url} (speed {args.speed:g}x)", flush=True)
    eks = None
    if sim.aws_url is not None and sim.core.aws is not None:
        # The scenario has a cloud: the plan's cluster is an EKS cluster whose AWS APIs are the sim's.
        eks = EksProvider(name=sim.core.aws.name, region=sim.core.aws.region, endpoint_url=sim.aws_url)
        sim_aws(workdir, "rehearsal")
        print(f"aws: {sim.aws_url} (EKS cluster {eks.name})", flush=True)
    aks = None
    aks_url = sim.provider_url("aks")
    azure = sim.core.providers.get("aks")
    if aks_url is not None and azure is not None:
        # The scenario's cloud is AKS: the sim's ARM surface, with a static token (the
        # team's Azure identity is neither used nor needed).
        aks = AksProvider(
            subscription_id=azure.subscription,
            resource_group=azure.resource_group,
            name=azure.name,
            endpoint_url=aks_url,
        )
        print(f"azure: {aks_url} (AKS cluster {aks.name})", flush=True)
    gke = None
    gke_url = sim.provider_url("gke")
    gcp = sim.core.providers.get("gke")
    if gke_url is not None and gcp is not None:
        # The scenario's cloud is GKE: the sim's REST surface, asked with anonymous
        # credentials (the team's Google identity is neither used nor needed).
        gke = GkeProvider(project=gcp.project, location=gcp.location, name=gcp.name, endpoint_url=gke_url)
        print(f"gke: {gke_url} (GKE cluster {gke.name})", flush=True)
    return rehearse(
        args.plan,
        aks=aks,
        gke=gke,
        sim_url=sim.url,
        kubeconfig=kubeconfig,
        workdir=workdir,
        eks=eks,
        auto_approve=args.auto_approve,
        interactive=asks(args),
        out=sys.stdout,
        ask=input,
        connect_cluster=connect,
        # The bot reads the sim's time: a drain's 15-minute timeout, a watch's settle and
        # a pod's age pass as fast as the simulated upgrade does.
        clock=lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC),
        speed=args.speed,
        ignores=ignores,
        report_dir=Path(args.report) if args.report else None,
        plain=args.plain,
        images=images,
    )
