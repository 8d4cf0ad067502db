"""Soak: a replica paused past its lease at each point of a send, ten rounds each (issue 38).

Each round starts two real `upgrade-bot run --http` replicas on a fresh PostgreSQL database and
the Slack stub, pauses the leader (SIGSTOP) before it claims the run's first thread line, between
the claim and the call, or during the call, lets the other replica take over, wakes the paused one
and counts every keyed message in Slack (`tests.support.paused_sends`). Prints each round and, per
point, the rounds with a duplicate post and the duplicates in all. Acceptance: 0 everywhere.

Usage: .venv/bin/python benchmarks/soak_replica_sends.py [--rounds 10] [--points during-call,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.paused_sends import POINTS, Outcome, paused_send, write_files  # noqa: E402
from tests.support.postgres import drop_every_table, running_postgres  # noqa: E402
from tests.support.replicas import Replicas  # noqa: E402
from tests.support.secrets import BOT_TOKEN, SIGNING_SECRET  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402


def one_round(url: str, work: Path, point: str) -> Outcome:
    drop_every_table(url)
    work.mkdir(parents=True)
    config = write_files(work / "upgrade-bot.yaml", work, url)
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
            return paused_send(group, point)
        finally:
            group.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--points", default=",".join(POINTS), help=f"comma-separated, of {', '.join(POINTS)}")
    args = parser.parse_args()
    points = [p for p in args.points.split(",") if p]
    started = time.monotonic()
    totals: dict[str, tuple[int, int, int]] = {}
    with running_postgres() as url, tempfile.TemporaryDirectory(prefix="soak-sends-") as tmp:
        for point in points:
            bad_rounds = copies = errors = 0
            for i in range(args.rounds):
                try:
                    out = one_round(url, Path(tmp) / f"{point}-{i}", point)
                except Exception as exc:  # a round that could not be run is counted, not hidden
                    errors += 1
                    print(f"  {point:30} round {i + 1}: ERROR {type(exc).__name__}: {exc}", flush=True)
                    continue
                extra = sum(n - 1 for n in out.duplicates.values()) + max(0, out.watched - 1)
                bad_rounds += int(bool(extra) or out.watched != 1)
                copies += extra
                print(
                    f"  {point:30} round {i + 1}: paused {out.paused:5.1f}s, line posted {out.watched}x, "
                    f"duplicates {out.duplicates or 0}",
                    flush=True,
                )
            totals[point] = (bad_rounds, copies, errors)
    print(f"{args.rounds} rounds per point, {time.monotonic() - started:.0f}s in all")
    for point, (bad_rounds, copies, errors) in totals.items():
        print(
            f"{point:30} rounds with a duplicate or a lost line: {bad_rounds}/{args.rounds}, "
            f"duplicate posts: {copies}, rounds not run: {errors}"
        )


if __name__ == "__main__":
    main()
