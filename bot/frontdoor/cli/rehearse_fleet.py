"""`upgrade-bot rehearse-fleet FLEET [--config FILE] [--auto-approve] [--fail CLUSTER:STEP]`: a fleet
run on simulated clusters, one per cluster of the fleet, all served by this process
(`bot.frontdoor.rehearse_fleet`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from bot.core.fleets.plan import parse_fleet, resolve
from bot.errors import ConfigError, PlanInvalid
from bot.frontdoor.cli.connect import connect, sim_aws
from bot.frontdoor.cli.options import EXIT_FAILED, EXIT_USAGE, Handler, Subparsers, verb_parser
from bot.frontdoor.cli.rehearse import asks, exit_status, gate_answers, sim_options
from bot.frontdoor.rehearse_fleet import rehearse_fleet
from bot.logsetup import configure_logging
from bot.records import ClusterConfig, EksProvider, SignalSource
from bot.resources import BUILTIN_FLEETS
from bot.settings import Settings, load_settings
from bot.sim.apiserver.clock import SimClock
from bot.sim.cluster import SimCluster
from bot.sim.world.scenario import ScenarioError

#: The scenario of a cluster whose configuration names none.
DEFAULT_SCENARIO = "small"


def register(subparsers: Subparsers) -> Handler:
    parser = verb_parser(
        subparsers,
        "rehearse-fleet",
        "run a whole fleet on simulated clusters, printing the cards and threads",
        configured=False,
    )
    parser.add_argument(
        "fleet", help="a fleet plan file, or the name of a shipped one (e.g. example: templates/fleets/)"
    )
    parser.add_argument(
        "--config",
        help="the rehearsal's configuration: its clusters (labels, `scenario`), roster and templates_dir "
        "(default: FLEET.config.yaml next to the fleet file, as templates/fleets/example.config.yaml)",
    )
    gate_answers(
        parser,
        auto_approve="every gate, the children's and the fleet's, is answered by the roster",
        interactive="ask at each gate",
    )
    parser.add_argument(
        "--fail",
        metavar="CLUSTER:STEP",
        help="plant a failure: that cluster's child fails at STEP (its gate is rejected)",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="write the fleet's timeline (HTML: clusters as lanes, stages, soaks) into DIR",
    )
    sim_options(parser)
    return _rehearse_fleet


def config_path(fleet: str, given: str | None) -> Path:
    """`--config`, else `NAME.config.yaml` beside the fleet file (or beside the shipped fleet)."""
    if given:
        return Path(given)
    path = Path(fleet)
    if path.suffix in (".yaml", ".yml"):
        return path.with_name(path.name.removesuffix(path.suffix) + ".config.yaml")
    return BUILTIN_FLEETS / f"{fleet}.config.yaml"


def _no_fleet(fleet: str) -> str:
    """Why FLEET names no fleet plan, with the fleets the bot ships (as `rehearse` lists its plans)."""
    shipped = sorted(p.stem for p in BUILTIN_FLEETS.glob("*.yaml") if not p.name.endswith(".config.yaml"))
    return f"no fleet plan {fleet!r} (a path, or a shipped fleet: {', '.join(shipped) or 'none'})"


def _given_or_shipped(fleet: str) -> Path:
    """FLEET as a file: the path given, else the shipped fleet of that name."""
    return Path(fleet) if fleet.endswith((".yaml", ".yml")) else BUILTIN_FLEETS / f"{fleet}.yaml"


def _fleet_file(fleet: str, settings: Settings) -> Path:
    """FLEET as a file: the path given, else the team's (templates_dir/fleets/), else the shipped one."""
    if not fleet.endswith((".yaml", ".yml")):
        for d in settings.template_dirs():
            if (d / "fleets" / f"{fleet}.yaml").is_file():
                return d / "fleets" / f"{fleet}.yaml"
    return _given_or_shipped(fleet)


def _rehearse_fleet(args: argparse.Namespace) -> int:
    configure_logging(args.log_level or "WARNING", [])
    fail = None
    if args.fail:
        cluster, _, step = args.fail.partition(":")
        if not cluster or not step:
            print(
                f"upgrade-bot: --fail {args.fail}: expected CLUSTER:STEP, like agora-ci:drain",
                file=sys.stderr,
            )
            return EXIT_USAGE
        fail = (cluster, step)
    # Without --config the configuration is found beside the fleet: a fleet that is not there is
    # said as such, not as its missing configuration (inside the installed package, for a name).
    if not args.config and not _given_or_shipped(args.fleet).is_file():
        print(f"upgrade-bot: {_no_fleet(args.fleet)}", file=sys.stderr)
        return EXIT_FAILED
    try:
        settings = load_settings(config_path(args.fleet, args.config), env={})
        path = _fleet_file(args.fleet, settings)
        if not path.is_file():
            print(f"upgrade-bot: {_no_fleet(args.fleet)}", file=sys.stderr)
            return EXIT_FAILED
        fleet = parse_fleet(path.read_text(encoding="utf-8"), source=str(path))
        clusters = sorted({c for s in resolve(fleet, settings.clusters) for c in s.clusters})
    except ConfigError as exc:
        print(f"upgrade-bot: {exc.user_message}", file=sys.stderr)
        return EXIT_USAGE
    except PlanInvalid as exc:
        print(exc.user_message, file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="upgrade-bot-fleet-rehearsal-") as tmp:
        workdir = Path(tmp)
        sims: dict[str, SimCluster] = {}
        try:
            for name in clusters:
                scenario = settings.clusters[name].scenario or DEFAULT_SCENARIO
                # Frozen until the fleet starts (`rehearse_fleet` sets them all to --speed then):
                # one started early would otherwise play hours of simulated time (its kubelets'
                # Lease renewals, probes, heartbeats: CPU the next sims' start-up needs) while the
                # others load, and run that far ahead of them.
                sims[name] = SimCluster(scenario, speed=0.0, seed=args.seed).start()
                print(f"sim {scenario} for {name} at {sims[name].url}", flush=True)
        except ScenarioError as exc:
            for sim in sims.values():
                sim.stop()
            print(f"upgrade-bot: {exc}", file=sys.stderr)
            return EXIT_USAGE

        def run() -> int:
            pointed = {
                name: _at_sim(settings.clusters[name], sims[name], workdir) if name in sims else c
                for name, c in settings.clusters.items()
            }
            if any(c.eks is not None for c in pointed.values()):
                sim_aws(workdir, "rehearsal")
            canary = sims[next(c for s in resolve(fleet, settings.clusters) for c in s.clusters)]
            # The bot's clock: the canary's simulated time, which runs on alone once the canary's
            # stage is over and its sim stands still (`rehearse_fleet` starts it with that sim).
            bot_clock = SimClock(speed=0.0, epoch=canary.core.clock.now())

            def start_clock(speed: float) -> None:
                bot_clock.set_speed(speed)
                bot_clock.jump_to(canary.core.clock.now())

            return rehearse_fleet(
                str(path),
                settings=replace(
                    settings,
                    clusters=pointed,
                    data_dir=workdir,
                    database_url=f"sqlite:///{workdir / 'upgrade-bot.db'}",
                ),
                sims={name: sim.url for name, sim in sims.items()},
                out=sys.stdout,
                auto_approve=args.auto_approve,
                interactive=asks(args),
                ask=input,
                connect_cluster=connect,
                # The bot reads simulated time: the soak and the jobs' timeouts pass as fast as
                # the simulated upgrades do (every sim runs at the same speed).
                clock=lambda: datetime.fromtimestamp(bot_clock.now(), UTC),
                start_clock=start_clock,
                skip_clock=lambda seconds: bot_clock.jump_to(bot_clock.now() + seconds),
                speed=args.speed,
                fail=fail,
                plan_dirs=[path.parent, path.parent / "plans", path.parent.parent / "plans"],
                report_dir=Path(args.report) if args.report else None,
                plain=args.plain,
            )

        try:
            return exit_status(run)
        finally:
            for sim in sims.values():
                sim.stop()


def _at_sim(cluster: ClusterConfig, sim: SimCluster, workdir: Path) -> ClusterConfig:
    """The cluster as the rehearsal sees it: its sim's API server, evidence facades and cloud."""
    kubeconfig = sim.write_kubeconfig(workdir / f"{cluster.name}.kubeconfig", context="sim")
    eks = None
    if sim.aws_url is not None and sim.core.aws is not None:
        eks = EksProvider(name=sim.core.aws.name, region=sim.core.aws.region, endpoint_url=sim.aws_url)
    return replace(
        cluster,
        kubeconfig=kubeconfig,
        context="sim",
        in_cluster=False,
        eks=eks,
        alertmanager=SignalSource(url=f"{sim.url}/alertmanager"),
        prometheus=SignalSource(url=f"{sim.url}/prometheus"),
        # The sim's alerts are its own cluster's: the team's matchers would scope them away.
        alert_matchers=(),
    )
