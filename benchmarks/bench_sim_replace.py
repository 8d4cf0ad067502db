"""How fast the simulated cluster plays out a node-group replacement: simulated seconds per wall second.

Builds the sim in THIS process (no HTTP, no watchers: the controllers' own cost) on a frozen clock,
from the `large` generator at `--nodes`/`--pods` in `--groups` node groups (as bench_watch does),
asks for the replacement of `--group` (`--max-unavailable` nodes drained at a time), then advances
the clock `--step` simulated seconds at a time (`control.advance`: every timer at its own time, the
controllers settled after each) until the operation ends or `--max-wall` real seconds are spent.
Prints each step's wall time and the store changes it made, then the totals: simulated seconds per
wall second, changes per wall second, over the steps that did work.

Usage: .venv/bin/python benchmarks/bench_sim_replace.py [--nodes 500] [--pods 15000] [--groups 5]
       [--group ng-01] [--max-unavailable 20] [--step 10] [--max-wall 600]
(Run it under `flock /tmp/bench.lock` on the shared machine.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bot.sim.cluster import Sim  # noqa: E402
from bot.sim.world.scenario import load_scenario  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=15_000)
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--group", default="ng-01")
    parser.add_argument("--max-unavailable", type=int, default=20)
    parser.add_argument("--step", type=float, default=10.0, help="simulated seconds per step")
    parser.add_argument("--max-wall", type=float, default=600.0, help="stop after this many real seconds")
    args = parser.parse_args()

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    scenario = Path(tempfile.mkdtemp(prefix="bench-sim-replace-")) / "scenario.yaml"
    scenario.write_text(
        "name: large-bench\ndescription: the `large` generator, for bench_sim_replace\n"
        'cluster:\n  version: "1.29.4"\n  platform: eks\n  lease_renew_seconds: 0\n  warmup: 0s\n'
        f"generate:\n  node_groups: {args.groups}\n  nodes: {args.nodes}\n  pods: {args.pods}\n"
        f"  namespaces: {max(1, args.pods * 300 // 150_000)}\n"
        f"  deployments: {max(1, args.pods * 3500 // 150_000)}\n  daemonsets: [kube-proxy, aws-node]\n"
        "  pod_bytes: 5000\n  pdb_every: 4\n"
    )
    t = time.monotonic()
    sim = Sim(load_scenario(scenario), seed=1)
    print(f"built {args.nodes} nodes / {args.pods} pods in {time.monotonic() - t:.1f}s", flush=True)
    op = sim.control.replace_node_group(
        args.group, "1.30.2", max_unavailable=args.max_unavailable, drain_timeout="48h"
    )
    rv0 = sim.store.rv
    busy_wall = busy_sim = 0.0
    started = time.monotonic()
    sim_seconds = 0.0
    state = phase = ""
    while time.monotonic() - started < args.max_wall:
        t, rv = time.monotonic(), sim.store.rv
        sim.control.advance(args.step)
        wall = time.monotonic() - t
        sim_seconds += args.step
        changes = sim.store.rv - rv
        if changes:
            busy_wall += wall
            busy_sim += args.step
        got = sim.control.operation(op["id"])
        state, phase = got["state"], got.get("phase", "")
        print(
            f"  +{sim_seconds:5.0f}s sim: {wall:6.1f}s wall, {changes:6d} changes; {state} {phase}",
            flush=True,
        )
        if state != "InProgress":
            break
    total = time.monotonic() - started
    changes = sim.store.rv - rv0
    print(
        f"replacement {state} {phase} after {sim_seconds:.0f} simulated s in {total:.1f}s wall"
        f"{'' if state != 'InProgress' else ' (stopped by --max-wall)'}; {changes:,} store changes"
    )
    if busy_wall:
        print(
            f"  over the steps with work: {busy_sim / busy_wall:.2f} simulated s per wall s, "
            f"{changes / busy_wall:,.0f} changes per wall s"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
