"""The cost of one evidence poll: 500 alerts from Alertmanager and 20 analyses from Prometheus,
read over HTTP from the simulator's facades by the bot's adapters and judged as the jobs judge them.

Prints, for N polls (default 20): wall time and CPU time of this process per poll (the adapters'
HTTP and JSON decoding, `judge_alerts` over 500 alerts against a 250-alert baseline, and 20
`measure`/`advance` steps with a condition each), the best and the median. The sim's server runs
in this process too, so the CPU figure includes serving the answers: an upper bound for the bot.

Acks during a poll: the bot's own front door (`assemble` + Bolt behind waitress on loopback,
tests/support/front.py, against the loopback Slack stub) serves really signed `/upgrade help`
commands, one every 50 ms, while the polls run back to back on another thread of this process —
as the bot's job driver runs them beside its front door, sharing the interpreter. Prints the acks'
count, median, 95th percentile and worst (the target: each ≤ 0.1 s), and the same for acks with
nothing polling for as long (what the machine gives anyway: a loaded machine shows here).

Usage: .venv/bin/python benchmarks/bench_evidence.py [--polls 20] [--alerts 500] [--analyses 20]
       [--skip-acks]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.conditions import Condition
from bot.core.evidence.judge import AlertBaseline, AnalysisSpec, AnalysisState, advance, judge_alerts, measure
from bot.core.evidence.matchers import parse_matcher
from bot.frontdoor.serve import SWITCH_INTERVAL
from bot.records import SignalSource
from bot.settings import load_settings
from bot.sim.cluster import SimCluster
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

ACK_PERIOD = 0.05


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--analyses", type=int, default=20)
    parser.add_argument("--skip-acks", action="store_true", help="skip the acks during the polls")
    args = parser.parse_args()
    sim = SimCluster("small", speed=0.0, seed=1).start()
    try:
        assert sim.sim is not None
        ev = sim.sim.evidence
        now = datetime.now(UTC)
        for i in range(args.alerts):
            labels = {
                "alertname": f"Alert{i % 40}",
                "cluster": "prod",
                "instance": f"10.0.{i // 250}.{i % 250}",
            }
            ev.fire(
                labels,
                (
                    now - timedelta(hours=1) if i < args.alerts // 2 else now + timedelta(seconds=1)
                ).timestamp(),
            )
        queries = [
            f'sum(rate(apiserver_request_total{{code=~"4..",n="{i}"}}[5m]))' for i in range(args.analyses)
        ]
        for q in queries:
            ev.set_query(q, 1.0)
        am = Alertmanager(SignalSource(url=f"{sim.url}/alertmanager"))
        prom = Prometheus(SignalSource(url=f"{sim.url}/prometheus"))
        scope = [parse_matcher('cluster="prod"')]
        baseline = AlertBaseline.of(am.alerts(scope)[: args.alerts // 2], now)
        specs = [
            AnalysisSpec(query=q, success=Condition("result < 1.2 * baseline + 5"), count=10**6)
            for q in queries
        ]
        states = [AnalysisState() for _ in specs]
        walls, cpus = [], []

        def poll_all() -> None:
            for _ in range(args.polls):
                w0, c0 = time.perf_counter(), time.thread_time()
                alerts = am.alerts(scope)
                judge_alerts(alerts, baseline=baseline, step_started=now, now=now + timedelta(minutes=1),
                             settle=timedelta(minutes=10), timeout=timedelta(minutes=30))  # fmt: skip
                for i, spec in enumerate(specs):
                    states[i] = advance(
                        spec, states[i], measure(spec, prom.query(spec.query), baseline=1.0, at=now)
                    )
                walls.append(time.perf_counter() - w0)
                cpus.append(time.thread_time() - c0)

        acks: list[float] = []
        idle: list[float] = []
        if args.skip_acks:
            poll_all()
        else:
            acks = acks_during(poll_all)
            # The same acks with nothing polling, for as long: what this machine gives anyway.
            spent = sum(walls)
            idle = acks_during(lambda: time.sleep(spent))
        print(f"evidence poll: {args.alerts} alerts, {args.analyses} analyses, {args.polls} polls")
        print(
            f"  wall per poll: best {min(walls) * 1000:.1f} ms, median {statistics.median(walls) * 1000:.1f} ms"
        )
        print(
            f"  CPU per poll:  best {min(cpus) * 1000:.1f} ms, median {statistics.median(cpus) * 1000:.1f} ms"
            " (the polling thread; the sim's server threads serve the answers)"
        )
        for what, figures in (("acks during the polls", acks), ("acks with no polling", idle)):
            if not figures:
                continue
            ordered = sorted(figures)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            print(
                f"  {what}: {len(figures)}, median {statistics.median(figures) * 1000:.1f} ms, "
                f"p95 {p95 * 1000:.1f} ms, worst {max(figures) * 1000:.1f} ms "
                f"({'within' if max(figures) <= 0.1 else 'OVER'} the 0.1 s target)"
            )
    finally:
        sim.stop()


def acks_during(work: Callable[[], None]) -> list[float]:
    """Run `work` on a thread while the bot's front door acks `/upgrade help` every ACK_PERIOD;
    the ack times (s) of the commands sent while `work` ran."""
    stub = SlackStub().start()
    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as tmp:
        config = Path(tmp) / "upgrade-bot.yaml"
        config.write_text(f"data_dir: {Path(tmp) / 'data'}\n", encoding="utf-8")
        front = start_front(load_settings(config, slack_env(stub.api_url)), stub)
        interval = sys.getswitchinterval()
        try:
            front.command("help")  # warm: the first request builds what later ones reuse
            # As `serve` does once it has started (bot/frontdoor/serve.py): what start-up built
            # lives as long as the process, so the collector's full passes leave it alone; and
            # a busy thread hands the interpreter over sooner.
            gc.freeze()
            sys.setswitchinterval(SWITCH_INTERVAL)
            worker = threading.Thread(target=work, name="evidence-polls")
            acks: list[float] = []
            worker.start()
            while worker.is_alive():
                due = time.monotonic() + ACK_PERIOD
                acks.append(front.command("help").seconds)
                time.sleep(max(0.0, due - time.monotonic()))
            worker.join()
            return acks
        finally:
            gc.unfreeze()
            sys.setswitchinterval(interval)
            front.stop()
            stub.stop()


if __name__ == "__main__":
    main()
