"""The run report of a large run: 150 nodes in five node groups (issue 31: under 5 s, legible).

Writes a completed run of the eks-nodegroups plan into a fresh SQLite store (tests/support/
report_runs.py: steps, approvals, audit rows, a drain job per node group with each node's
times), then times `build_report` and each format, the first picture including matplotlib's
import. Prints the times, and the files' paths to look at.

Usage: .venv/bin/python benchmarks/bench_report.py [--nodes 150] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.adapters.store import Store
from bot.core.runs.report import build_report, render
from tests.support.report_runs import GROUPS, stored_run

#: The issue's bound for a 150-node run, every format.
LIMIT = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=150)
    parser.add_argument("--out", type=Path, help="keep the report's files here (default: a temp dir)")
    args = parser.parse_args()
    # Uneven groups, as real clusters are: the shared group holds most of the nodes.
    share = [0.04, 0.08, 0.6, 0.18, 0.1]
    counts = {g: max(1, round(args.nodes * s)) for g, s in zip(GROUPS, share, strict=True)}
    counts["ng-shared"] += args.nodes - sum(counts.values())
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        run_id = stored_run(store, nodes=counts)
        total = time.perf_counter()
        t = time.perf_counter()
        report = build_report(store, run_id)
        print(
            f"build_report ({len(report.nodes)} nodes, {len(report.steps)} steps): {time.perf_counter() - t:.2f}s"
        )
        for fmt in ("png", "html", "md", "json"):
            t = time.perf_counter()
            body = render(report, fmt)
            path = out / f"run-{run_id}.{fmt}"
            path.write_bytes(body)
            print(f"{fmt:>4}: {time.perf_counter() - t:.2f}s, {len(body):,} bytes ({path})")
        elapsed = time.perf_counter() - total
        print(f"total: {elapsed:.2f}s (limit {LIMIT:g}s)")
        store.close()
    return 0 if elapsed < LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
