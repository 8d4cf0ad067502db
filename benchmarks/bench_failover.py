"""Failover time of the leader's lease: real `upgrade-bot run --http` replicas on a real PostgreSQL.

For each round, three replicas start on a fresh database; the leader is killed (`kill -9`) or
stopped (SIGTERM), and the time from the signal to another replica holding the lease (read from
the `leadership` row every 50 ms) is measured. Prints each figure and the median of each kind.

After `kill -9` the figure is bounded by the lease (the dead leader's lease must run out, then a
follower's next round takes it): about lease + renew/2. After SIGTERM the leader releases the
lease, so the next round of a follower takes it: about renew/2.

Usage: .venv/bin/python benchmarks/bench_failover.py [--rounds 5] [--lease 15] [--renew 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import drop_every_table, running_postgres  # noqa: E402
from tests.support.replicas import Replicas, leader_yaml  # noqa: E402
from tests.support.secrets import BOT_TOKEN, ROSTER_YAML, SIGNING_SECRET  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402


def one_round(url: str, work: Path, signum: int, lease: float, renew: float) -> float:
    drop_every_table(url)
    work.mkdir(parents=True)
    config = work / "upgrade-bot.yaml"
    config.write_text(
        f"data_dir: {work / 'data'}\n{ROSTER_YAML}database_url: {url}\n"
        "channels: {announcements: C0ANNOUNCE, operations: C0OPS}\n" + leader_yaml(lease, renew),
        encoding="utf-8",
    )
    with SlackStub() as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
        env.update(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=stub.api_url,
            PYTHONUNBUFFERED="1",
        )
        group = Replicas(config=config, env=env, stub=stub)
        try:
            group.start(3)
            leader = group.wait_leader()
            sent = group.signal(leader, signum)
            _, took = group.failover(leader, sent, timeout=lease * 3 + 10)
            return took
        finally:
            group.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=float, default=15.0, help="leader.lease_seconds (default 15)")
    parser.add_argument("--renew", type=float, default=5.0, help="leader.renew_seconds (default 5)")
    args = parser.parse_args()
    with running_postgres() as url, tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        print(f"lease {args.lease:g}s, renew every {args.renew:g}s, 3 replicas, {args.rounds} rounds each")
        for name, signum in (("kill -9", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
            figures = []
            for i in range(args.rounds):
                took = one_round(url, Path(tmp) / f"{signum}-{i}", signum, args.lease, args.renew)
                figures.append(took)
                print(f"  {name:8} round {i + 1}: another replica leads after {took:.2f}s", flush=True)
            print(
                f"{name:8} failover: median {statistics.median(figures):.2f}s, "
                f"min {min(figures):.2f}s, max {max(figures):.2f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
