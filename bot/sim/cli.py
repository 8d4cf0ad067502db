"""`upgrade-bot sim …`: serve a simulated cluster, or list the built-in scenarios.

    upgrade-bot sim serve --scenario NAME|FILE [--port N] [--kubeconfig PATH] [--speed X] [--seed S]
    upgrade-bot sim scenarios
    upgrade-bot sim scenario --builtin NAME | --from-snapshot LABEL [--cluster C] [--out FILE]
    upgrade-bot sim fidelity SNAPSHOT [--cluster C] [--to V]

`serve` prints `url: …` and `kubeconfig: …` (one `key: value` line each, flushed) once the cluster
is settled and accepting connections (and `aws: …`, the endpoint of its AWS APIs, for a scenario
with a cloud), then runs until SIGINT or SIGTERM and exits 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from bot.sim.cluster import SimCluster
from bot.sim.world.scenario import ScenarioError, builtin_dir, builtin_scenarios

#: How often `sim serve` looks for a signal received (its handler only notes it).
STOP_POLL_SECONDS = 0.2


def parser() -> argparse.ArgumentParser:
    """`sim`'s arguments and subcommands (the bot's completion script completes them too)."""
    sim = argparse.ArgumentParser(prog="upgrade-bot sim", description="The simulated Kubernetes cluster.")
    # Not required here: `main` says so after an unknown flag is named, as the bot's `main` does.
    sub = sim.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve a scenario on 127.0.0.1 until interrupted")
    serve.add_argument(
        "--scenario", default="small", help="a built-in scenario name or a YAML file (default: small)"
    )
    serve.add_argument("--port", type=int, default=0, help="port to listen on (0 = pick a free one)")
    serve.add_argument("--kubeconfig", type=Path, help="where to write the kubeconfig (default: a temp file)")
    serve.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per real second (default 1)"
    )
    serve.add_argument("--seed", type=int, default=0, help="random seed, for repeatable runs (default 0)")
    sub.add_parser("scenarios", help="list the built-in scenarios")
    scenario = sub.add_parser(
        "scenario",
        help="write a scenario file: a built-in (--builtin NAME), or a twin of a cluster from one of "
        "the bot's snapshots (--from-snapshot LABEL, through `upgrade-bot sim scenario`)",
    )
    scenario.add_argument("--builtin", metavar="NAME", required=True)
    # Answered by the bot's front door (`bot/frontdoor/cli/sim_fidelity.py`): listed here for --help.
    sub.add_parser(
        "fidelity",
        help="serve the twin of one of the bot's snapshots, and print how it differs from its cluster "
        "(its snapshot and the check's findings; through `upgrade-bot sim fidelity SNAPSHOT`)",
    )
    for command in sub.choices.values():
        # `main` says an unknown argument with the usage of the subcommand it was given to.
        command.set_defaults(parsed_by=command)
    return sim


def main(argv: list[str]) -> int:
    sim = parser()
    try:
        # argparse hands a subcommand's unknown arguments up to `sim`'s parser, whose usage is not
        # the one to show (`sim serve --bogus`).
        args, unknown = sim.parse_known_args(argv)
        if unknown:
            getattr(args, "parsed_by", sim).error(f"unrecognized arguments: {' '.join(unknown)}")
        if args.command is None:
            sim.error("the following arguments are required: command")
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "scenario":
        # `upgrade-bot sim scenario` is answered by the bot's front door (it reads the bot's
        # snapshots); here, without the bot, only the built-ins.
        path = builtin_dir() / f"{args.builtin}.yaml"
        if not args.builtin.replace("-", "").isalnum() or not path.is_file():
            known = ", ".join(n for n, _ in builtin_scenarios())
            print(f"upgrade-bot sim: no built-in scenario {args.builtin!r} (known: {known})", file=sys.stderr)
            return 2
        sys.stdout.write(path.read_text(encoding="utf-8"))
        return 0
    if args.command == "fidelity":
        print(
            "upgrade-bot sim: `fidelity` reads the bot's snapshots: run `upgrade-bot sim fidelity`",
            file=sys.stderr,
        )
        return 2
    if args.command == "scenarios":
        for name, description in builtin_scenarios():
            print(f"{name:<16} {description}")
        return 0
    if args.speed < 0:
        print("upgrade-bot sim: --speed must be >= 0", file=sys.stderr)
        return 2
    try:
        cluster = SimCluster(args.scenario, port=args.port, speed=args.speed, seed=args.seed)
    except ScenarioError as exc:
        print(f"upgrade-bot sim: {exc}", file=sys.stderr)
        return 2
    # Signals received, appended by the handler: no lock, since the handler runs on this thread
    # between two bytecodes, and `Event.set()` there waited forever for the lock `Event.wait`
    # held when it was interrupted.
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            cluster.start()
        except OSError as exc:
            print(f"upgrade-bot sim: cannot listen on port {args.port}: {exc}", file=sys.stderr)
            return 1
        path = args.kubeconfig or Path(tempfile.mkdtemp(prefix="upgrade-bot-sim-")) / "kubeconfig"
        cluster.write_kubeconfig(path)
        print(f"url: {cluster.url}", flush=True)
        print(f"kubeconfig: {path}", flush=True)
        if cluster.aws_url is not None:
            print(f"aws: {cluster.aws_url}", flush=True)
        if cluster.provider_url("aks") is not None:
            print(f"azure: {cluster.provider_url('aks')}", flush=True)
        if cluster.provider_url("gke") is not None:
            print(f"gke: {cluster.provider_url('gke')}", flush=True)
        while not stopping:
            time.sleep(STOP_POLL_SECONDS)
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
