"""The cost of one evidence poll: 500 alerts from Alertmanager and 20 analyses from Prometheus,
read over HTTP from the simulator's facades by the bot's adapters and judged as the jobs judge them.

Prints, for N polls (default 20): wall time and CPU time of this process per poll (the adapters'
HTTP and JSON decoding, `judge_alerts` over 500 alerts against a 250-alert baseline, and 20
`measure`/`advance` steps with a condition each), the best and the median. The sim's server runs
in this process too, so the CPU figure includes serving the answers: an upper bound for the bot.

Not measured here (not built yet): acks to Slack while a poll runs in the bot's worker pool.

Usage: .venv/bin/python benchmarks/bench_evidence.py [--polls 20] [--alerts 500] [--analyses 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.adapters.alertmanager import Alertmanager
from bot.adapters.prometheus import Prometheus
from bot.core.evidence.conditions import Condition
from bot.core.evidence.judge import AlertBaseline, AnalysisSpec, AnalysisState, advance, judge_alerts, measure
from bot.core.evidence.matchers import parse_matcher
from bot.records import SignalSource
from bot.sim.cluster import SimCluster


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--analyses", type=int, default=20)
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
        for _ in range(args.polls):
            w0, c0 = time.perf_counter(), time.process_time()
            alerts = am.alerts(scope)
            judge_alerts(alerts, baseline=baseline, step_started=now, now=now + timedelta(minutes=1),
                         settle=timedelta(minutes=10), timeout=timedelta(minutes=30))  # fmt: skip
            for i, spec in enumerate(specs):
                states[i] = advance(
                    spec, states[i], measure(spec, prom.query(spec.query), baseline=1.0, at=now)
                )
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        print(f"evidence poll: {args.alerts} alerts, {args.analyses} analyses, {args.polls} polls")
        print(
            f"  wall per poll: best {min(walls) * 1000:.1f} ms, median {statistics.median(walls) * 1000:.1f} ms"
        )
        print(
            f"  CPU per poll:  best {min(cpus) * 1000:.1f} ms, median {statistics.median(cpus) * 1000:.1f} ms"
        )
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
