"""How fast the watch core folds events: `WatchState.apply` over a synthetic 150k-pod replacement.

No network and no sim: this measures the pure core that the watch driver calls for every event, so
its share of the end-to-end lag (issue 13: p95 ≤ 2 s from an event's arrival to the card) is known.
Builds a cluster of `--nodes` nodes (default 5,000) and `--pods` pods (default 150,000), lists it
into a `WatchState` (`sync`), then replays a node-group replacement as watch events: for each old
node of the group a new node joins (NotReady, then Ready), the old node is cordoned, each of its
pods goes Terminating and is deleted, and its replacement is added Pending, scheduled
(ContainerCreating) and Running; some replacements crash-loop. Events are JSON lines decoded with
the same msgspec struct the kube adapter uses (decode time is printed apart from apply time).

Prints: events, decode and apply rates (events/s), apply latency p50/p95/max per event, `summary()`
time in the middle of the replacement and at the end, the card render time, and the process RSS
before the list, after it, at the peak and at the end.

With the shipped known-issue rules loaded, as the bot runs it (`--no-rules` without them).

Usage: .venv/bin/python benchmarks/bench_watch_fold.py [--nodes 5000] [--pods 150000] [--group-share 0.2]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.core.kube.wire import WNode, WPod  # noqa: E402
from bot.core.rendering import Renderer  # noqa: E402
from bot.core.rules import load_rules  # noqa: E402
from bot.core.watches.card import card_context  # noqa: E402
from bot.core.watches.model import WatchState  # noqa: E402
from bot.core.watches.verdict import verdict  # noqa: E402
from bot.resources import BUILTIN_RULES, BUILTIN_TEMPLATES  # noqa: E402
from tests.support.watch_objects import at, crashing, node, pod, target_spec  # noqa: E402


def rss_mb() -> float:
    """Current resident set size (Linux /proc), in MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 1e6


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--group-share", type=float, default=0.2, help="share of nodes in the replaced group")
    parser.add_argument("--crash-every", type=int, default=500, help="one replacement pod in N crash-loops")
    parser.add_argument(
        "--no-rules", action="store_true", help="without the known-issue rules (the bot always loads them)"
    )
    args = parser.parse_args()

    groups = 5
    per_node = max(args.pods // args.nodes, 1)
    spec = target_spec(version="v1.30.2", groups=("ng-0",), settle=timedelta(minutes=5))
    encode = msgspec.json.encode
    pod_decoder = msgspec.json.Decoder(WPod)
    node_decoder = msgspec.json.Decoder(WNode)

    print(f"building a cluster of {args.nodes} nodes and {args.nodes * per_node} pods …", flush=True)
    rss_start = rss_mb()
    nodes_json = [encode(node(f"node-{i}", f"ng-{i % groups}")) for i in range(args.nodes)]
    pods_json = []
    for i in range(args.nodes):
        for j in range(per_node):
            pods_json.append(
                encode(
                    pod(
                        f"p-{i}-{j}",
                        f"ns-{j % 50}",
                        deployment=f"svc-{(i * per_node + j) % 3000}",
                        node_name=f"node-{i}",
                    )
                )
            )

    state = WatchState(spec, rules=() if args.no_rules else load_rules([BUILTIN_RULES]))
    t = time.perf_counter()
    nodes = [node_decoder.decode(b) for b in nodes_json]
    pods = [pod_decoder.decode(b) for b in pods_json]
    decode_list = time.perf_counter() - t
    t = time.perf_counter()
    state.sync("node", nodes, at(0))
    state.sync("pod", pods, at(0))
    sync_time = time.perf_counter() - t
    del nodes, pods, pods_json
    rss_after_list = rss_mb()
    print(
        f"list: {len(nodes_json)} nodes + {args.nodes * per_node} pods decoded in {decode_list:.2f} s, "
        f"synced in {sync_time:.2f} s ({args.nodes * per_node / sync_time:,.0f} pods/s)"
    )

    # ----- the replacement stream, as JSON lines made on the fly (so RSS shows the state, not a buffer)
    old = [i for i in range(args.nodes) if i % groups == 0][: int(args.nodes * args.group_share)]
    crash_count = 0

    def stream() -> Iterator[tuple[str, str, bytes]]:
        nonlocal crash_count
        for n, i in enumerate(old):
            new_name = f"node-new-{i}"
            yield "node", "ADDED", encode(node(new_name, "ng-0", kubelet="v1.30.2", ready=False))
            yield "node", "MODIFIED", encode(node(new_name, "ng-0", kubelet="v1.30.2"))
            yield "node", "MODIFIED", encode(node(f"node-{i}", "ng-0", cordoned=True))
            for j in range(per_node):
                name, ns = f"p-{i}-{j}", f"ns-{j % 50}"
                workload = f"svc-{(i * per_node + j) % 3000}"
                gone = at(n / 10)
                here = f"node-{i}"
                yield (
                    "pod",
                    "MODIFIED",
                    encode(pod(name, ns, deployment=workload, node_name=here, deleted=gone)),
                )
                yield (
                    "pod",
                    "DELETED",
                    encode(pod(name, ns, deployment=workload, node_name=here, deleted=gone)),
                )
                fresh = f"q-{i}-{j}"
                yield (
                    "pod",
                    "ADDED",
                    encode(
                        pod(
                            fresh,
                            ns,
                            deployment=workload,
                            phase="Pending",
                            ready=False,
                            unschedulable=True,
                            created=gone,
                        )
                    ),
                )
                yield (
                    "pod",
                    "MODIFIED",
                    encode(
                        pod(
                            fresh,
                            ns,
                            deployment=workload,
                            phase="Pending",
                            ready=False,
                            waiting="ContainerCreating",
                            node_name=new_name,
                            created=gone,
                        )
                    ),
                )
                if (n * per_node + j) % args.crash_every == 0:
                    crash_count += 1
                    yield (
                        "pod",
                        "MODIFIED",
                        encode(crashing(fresh, ns, deployment=workload, node_name=new_name, created=gone)),
                    )
                else:
                    yield (
                        "pod",
                        "MODIFIED",
                        encode(pod(fresh, ns, deployment=workload, node_name=new_name, created=gone)),
                    )
            yield "node", "DELETED", encode(node(f"node-{i}", "ng-0", cordoned=True))

    decoders = {"pod": pod_decoder, "node": node_decoder}
    latencies: list[float] = []
    decode_time = apply_time = 0.0
    summary_middle = 0.0
    expected = len(old) * (4 + 5 * per_node)
    middle = expected // 2
    peak_rss = rss_mb()
    pod_events = 0
    clock = time.perf_counter
    second = 0.0
    print(f"replaying a replacement of {len(old)} nodes ({expected} events) …", flush=True)
    for k, (kind, kind_type, line) in enumerate(stream()):
        pod_events += kind == "pod"
        t0 = clock()
        obj = decoders[kind].decode(line)
        t1 = clock()
        now = at(0, second)
        second += 0.01
        state.apply(kind, kind_type, obj, now)
        t2 = clock()
        decode_time += t1 - t0
        apply_time += t2 - t1
        latencies.append(t2 - t1)
        if k == middle:
            t3 = clock()
            mid = state.summary(now)
            summary_middle = clock() - t3
        if k % 10_000 == 0:
            peak_rss = max(peak_rss, rss_mb())
    events = len(latencies)
    print(
        f"stream: {events} events ({pod_events} pod, {events - pod_events} node); "
        f"{crash_count} replacement pods crash-loop"
    )
    end = at(0, second + 1)
    t = clock()
    final = state.summary(end)
    summary_end = clock() - t
    t = clock()
    text = (
        Renderer([BUILTIN_TEMPLATES])
        .render("watch_card", card_context(final, spec, verdict(final, spec, end), end))
        .text
    )
    render_time = clock() - t
    rss_end = rss_mb()

    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[int(len(latencies) * 0.95)]
    print()
    print(
        f"decode:  {events / decode_time:>12,.0f} events/s ({decode_time:.2f} s, msgspec into the watch structs)"
    )
    print(f"apply:   {events / apply_time:>12,.0f} events/s ({apply_time:.2f} s for {events} events)")
    print(f"decode + apply: {events / (decode_time + apply_time):,.0f} events/s")
    print(
        f"apply latency per event: p50 {p50 * 1e6:.1f} µs, p95 {p95 * 1e6:.1f} µs, max {latencies[-1] * 1e3:.2f} ms"
    )
    print(
        f"summary(): middle of the replacement {summary_middle * 1e3:.1f} ms "
        f"({mid.unhealthy_pods} unhealthy pods, {len(mid.nodes)} nodes), end {summary_end * 1e3:.1f} ms "
        f"({final.unhealthy_pods} unhealthy, {len(final.nodes)} nodes)"
    )
    print(
        f"summary JSON: {len(final.to_json()) / 1e3:.0f} KB; card render {render_time * 1e3:.1f} ms, {len(text)} characters"
    )
    print(
        f"RSS: start {rss_start:.0f} MB, after the list {rss_after_list:.0f} MB, "
        f"mid-stream {peak_rss:.0f} MB, end {rss_end:.0f} MB (process peak {peak_mb():.0f} MB, "
        "the list's decoded pages included)"
    )
    groups_final = {g.name: g for g in final.groups}
    g0 = groups_final["ng-0"]
    print(
        f"ng-0 at the end: {g0.on_target_ready}/{g0.total} on v1.30.2, {g0.old} old; verdict: "
        f"{verdict(final, spec, end).state}"
    )


if __name__ == "__main__":
    main()
