"""A real watch through a node-group replacement on the sim, end to end (issue 13, "Performance").

Serves the sim's `large` cluster (5,000 nodes, 150,000 pods, generated as the built-in `large`
scenario; here from a scenario file with `--groups` node groups, default 5, so that the replaced
group `--group` holds 20 % of the nodes) in a subprocess on loopback, and in THIS process the
bot's own watch: `assemble` on a settings file pointing at the sim, with SLACK_BOT_TOKEN
and SLACK_API_URL pointing at the loopback Slack stub (`tests/support/slack_stub.py`), so the
card goes through the bot's real path — `WatchService.publish` → `Deliveries` → the coalescing
poster (≤ 1 edit per card per 2 s) → the workspace `SlackBudget` → `slack_sdk.WebClient` → HTTP.
The watch is started with `WatchService.start` and driven by the real `WatchDriver` (the runner's
scan would start the driver at once; the benchmark builds the driver itself after claiming the
row, only so that it can swap in the timestamping queue below before the driver starts).

Once the watch has listed (its first publish), the sim is asked to replace `--group` at
`--speed` (`POST /sim/nodegroups/NAME/replace`, `--max-unavailable` nodes drained at a time),
and the benchmark waits until the operation finished, the stream went quiet and the watch
published the last event; then the watch is ended (`request_end`, as `/upgrade unwatch` does) and
its final publish awaited.

Lag (every event, no sampling): the driver's queue is replaced by a `queue.Queue` subclass whose
`_put` (run under the queue's own lock, so in the exact order the driver will take the items)
appends `time.monotonic()` to an array — the event's arrival: the moment its `Stream` thread,
having decoded it, hands it to the driver. The driver folds items in that order and counts them
(`driver.applied`); its `on_publish(applied)` hook, called right after `WatchService.publish`
returned (state stored, card edit handed to the coalescer), is recorded with its time. The lag of
item k is the time of the first publish whose `applied` > k, minus its arrival. Only items that
arrived after the replacement was requested count (the initial lists are not "events"). A
second figure follows each item to Slack: the coalescer's `update_message` is wrapped to record
when a publish hands it a changed card; the item reached Slack with the first `chat.update` the
stub received after that hand-off (the coalescer sends the newest body it holds, so that edit
carries the publish's state or a newer one; a request already on its way at the hand-off could
carry the older body: the figure is approximate within one send); a publish that kept the card
for the publish due at the card's edit slot (`Published.card_kept`, the driver's paced publishes)
reaches Slack with the first `chat.update` after the next hand-off; one that handed nothing and
kept nothing left the card as it was (its text unchanged): at the publish itself. The
arrays cost 8 bytes per event in this process's RSS, which is the bot's RSS here (plus the Slack
stub's recorded calls).

Slack budget, from the stub's record: chat.update and chat.postMessage counts, the most edits of
one card in any 2 s window (target 1), the most chat.update in any 60 s window (≤ 50, 53 with
slack), the most posts in any 1 s window per channel (target ~1), and whether the budget was
respected (all three within `SlackBudget`'s limits). The last card edit is left to go at its
slot before the coalescer is stopped (its `stop` would send it at once).

Memory: the watch state's own footprint after the list (`WatchState.footprint`: bytes per pod and
per node), and the peak RSS through the list and the replacement (target ≤ 300 MB).

RSS of this process (the bot): VmRSS sampled every second; start (before the list), after the
list (the replacement's start), peak during the replacement, end; and `ru_maxrss`.

kubectl reference (unless `--skip-kubectl`; the venv's kubectl, as bench_snapshot uses — absent,
the benchmark says so and exits 2): `kubectl get pods -A -w -o name` started with the watch,
its lines counted; once it has printed the whole list, the lines printed from the replacement's
start are its events. Events per second = events after the start / (last event − start), for
kubectl and for the bot's pod stream (pod items put on the driver's queue), and their ratio.

Acks (unless `--skip-acks`): once the replacement is streaming, as bench_snapshot's
`ack_during_snapshot` does (copied, so that the benchmark holds the process and stops it), it
starts `upgrade-bot run --http` (its own Slack stub and database, the same sim), asks it for a
snapshot of the whole cluster (150k pods on `large`) and sends 20 signed `/upgrade help` spread over ~10 s; only acks answered
while the snapshot ran count; p50 and slowest are printed (target: slowest ≤ 0.1 s).

Every wait has a timeout, the whole run is bounded by `--timeout` (default 900 s), and the sim,
kubectl, the ack bot, the stub and the driver are stopped on exit, also on failure. The machine's
load average is printed at the start and the end.

Usage: .venv/bin/python benchmarks/bench_watch.py [--nodes 5000] [--pods 150000] [--groups 5]
       [--group ng-01] [--speed 20] [--max-unavailable 100] [--skip-kubectl] [--skip-acks]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import os
import queue
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from array import array
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bot.adapters.kube import Cluster  # noqa: E402
from bot.adapters.slack_budget import BudgetConfig  # noqa: E402
from bot.core.clusters import pick_cluster  # noqa: E402
from bot.core.watches.model import WatchState  # noqa: E402
from bot.frontdoor.assemble import assemble  # noqa: E402
from bot.frontdoor.watching import WatchDriver, WatchSource  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from tests.support.signing import post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import Call, SlackStub  # noqa: E402

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"
CHANNEL = "C0BENCHWATCH"
TARGET_VERSION = "1.30.2"
ACKS = 20
#: Seconds of `--timeout` kept to end the watch, stop everything and print the figures.
RESERVE = 90.0
#: Seconds between two `help` commands (20 of them: ~10 s of the snapshot's run).
ACK_PERIOD = 0.5


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def vm_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def lag_parts(
    starts: list[float], handoffs: list[float], sends: list[tuple[float, float]], received: list[float]
) -> str:
    """p50/p95 of the parts of a card edit's lag: the publish that hands the card over, from its
    start to the hand-off (it folds in what arrived meanwhile before rendering the card, so this is
    no longer the card's state's age); the hand-off to the flusher's send; the send to the stub's
    receipt; the send's whole round trip; and the card's period, receipt to receipt (the 2 s slot
    plus what the slot is counted from). An event waits up to one period for the edit that carries
    it: its lag is about 0.95 x the period + the state's age at the hand-off + the next two at p95."""

    def fig(values: list[float]) -> str:
        return f"{statistics.median(values):.3f}/{pct(values, 0.95):.3f}s" if values else "-"

    took = [h - starts[bisect.bisect_right(starts, h) - 1] for h in handoffs if starts and starts[0] <= h]
    began = [b for b, _ in sends]
    waited = [began[i] - h for h in handoffs if (i := bisect.bisect_left(began, h)) < len(began)]
    transit = [received[i] - b for b in began if (i := bisect.bisect_left(received, b)) < len(received)]
    period = [b - a for a, b in itertools.pairwise(received)]
    return (
        f"publish start → hand-off {fig(took)}, hand-off → send {fig(waited)}, send → stub "
        f"{fig(transit)}, round trip {fig([e - b for b, e in sends])}, period {fig(period)} (p50/p95)"
    )


def most_in_window(stub: SlackStub, method: str, window: float, param: str, value: str) -> int:
    """The most calls of `method` whose parameter `param` is `value` within any `window` seconds."""

    def where(call: Call) -> bool:
        return str(call.params.get(param)) == value

    return stub.most_in_window(method, window, where=where)


def close_posts(stub: SlackStub) -> list[str]:
    """Each post made less than 1 s after the previous post in its channel: the gap, whether each
    of the two is a thread reply, and the start of both texts (what a burst of posts was made of)."""
    out = []
    last: dict[str, Call] = {}
    for call in sorted(stub.calls_to("chat.postMessage"), key=lambda c: c.at):
        channel = str(call.params.get("channel"))
        prev = last.get(channel)
        last[channel] = call
        if prev is not None and call.at - prev.at < 1.0:

            def brief(c: Call) -> str:
                kind = "reply" if c.params.get("thread_ts") else "top"
                return f"{kind} {str(c.params.get('text', ''))[:60]!r}"

            out.append(f"+{call.at - prev.at:.3f}s: {brief(prev)} → {brief(call)}")
    return out


class OutOfTime(Exception):
    """The stream's share of `--timeout` is spent: the figures so far are printed, marked partial."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float, *, reserve: float = 0.0) -> float:
        left = self.end - reserve - time.monotonic()
        if left <= 0:
            if reserve:
                raise OutOfTime()
            raise SystemExit("bench_watch: the run's --timeout is spent; stopping")
        return min(cap, left)


class StampedQueue(queue.Queue[tuple[str, str, Any]]):
    """The driver's queue, stamping every item's arrival (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals = array("d")
        self.kinds = array("b")  # 1 for a pod event, 2 for a node event, 0 for anything else
        self.pods_listed = 0
        self.last_pod = 0.0

    def _put(self, item: tuple[str, str, Any]) -> None:
        now = time.monotonic()
        kind, kind_of_event, obj = item
        self.arrivals.append(now)
        code = 0
        if kind_of_event == "SYNC":
            if kind == "pod":
                self.pods_listed = len(obj)
        elif kind == "pod":
            code = 1
            self.last_pod = now
        elif kind == "node":
            code = 2
        self.kinds.append(code)
        super()._put(item)


class RssSampler:
    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), vm_rss_mb()))
            self.stop.wait(1.0)

    def peak(self, since: float) -> float:
        return max((mb for t, mb in self.samples if t >= since), default=0.0)


class LineCounter:
    """kubectl's stdout: lines counted, the time of the last one."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines = 0
        self.last = 0.0
        self.thread = threading.Thread(target=self._run, name="kubectl-lines", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            self.lines += 1
            self.last = time.monotonic()


def sim_call(url: str, path: str, body: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method="POST" if body is not None else "GET")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def start_sim(
    scenario: Path, workdir: Path, speed: float, deadline: Deadline
) -> tuple[subprocess.Popen[str], str, Path]:
    kubeconfig = workdir / "sim.kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "sim",
            "serve",
            "--scenario",
            str(scenario),
            "--speed",
            str(speed),
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = ""
    box: dict[str, str] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("url:"):
                box["url"] = line.split(":", 1)[1].strip()
            if line.startswith("kubeconfig:"):
                box["kubeconfig"] = line.split(":", 1)[1].strip()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=deadline.left(600))
    if "kubeconfig" not in box:
        proc.kill()
        proc.wait(timeout=10)
        raise SystemExit("bench_watch: the sim did not start in time")
    url = box["url"]
    return proc, url, Path(box["kubeconfig"])


def wait_until(predicate: Any, timeout: float, what: str, poll: float = 0.2) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise SystemExit(f"bench_watch: timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


class AckBot:
    """`upgrade-bot run --http` against its own Slack stub (bench_snapshot's `ack_during_snapshot`,
    with its process kept here so that the benchmark stops it on any exit)."""

    secret = "bench-signing-secret-0123456789"

    def __init__(self, config: Path) -> None:
        self.config = config
        self.stub = SlackStub()
        self.proc: subprocess.Popen[str] | None = None
        self.acks: list[float] = []
        self.offsets: list[float] = []
        self.first = 0.0
        self.snapshot_s = 0.0
        self.error = ""

    def run(self, timeout: float) -> None:
        try:
            self._run(timeout)
        except BaseException as exc:  # reported by the main thread, not raised from this one
            self.error = repr(exc)

    def _run(self, timeout: float) -> None:
        stub = self.stub.start()
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench-token",
            "SLACK_SIGNING_SECRET": self.secret,
            "SLACK_API_URL": stub.api_url,
        }
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "bot", "run", "--http", "--host", "127.0.0.1", "--port", "0"),
                *("--config", str(self.config), "--log-level", "WARNING"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        match = re.search(r"listening on (\S+)", self.proc.stdout.readline())
        if not match:
            raise RuntimeError("the ack bot did not start")
        url = f"{match.group(1)}/slack/events"
        body = slash_command_body("snapshot during", response_url=stub.response_url("snap"), trigger_id="w-1")
        started = time.monotonic()
        self.first = post(url, body, signed_headers(body, self.secret)).seconds
        time.sleep(0.2)  # past the snapshot's first requests, into its lists
        sent = 0
        while sent < ACKS and not stub.calls_to("chat.postMessage"):
            due = time.monotonic() + ACK_PERIOD
            body2 = slash_command_body(
                "help", response_url=stub.response_url(f"h{sent}"), trigger_id=f"w-h{sent}"
            )
            answer = post(url, body2, signed_headers(body2, self.secret))
            sent += 1
            if not stub.calls_to("chat.postMessage"):  # only acks made while the snapshot ran
                self.acks.append(answer.seconds)
                self.offsets.append(time.monotonic() - started - answer.seconds)
            time.sleep(max(0.0, due - time.monotonic()))
        stub.wait_for_calls("chat.postMessage", 1, timeout=timeout)
        self.snapshot_s = time.monotonic() - started

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(Exception):
            self.stub.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--groups", type=int, default=5, help="node groups in the generated cluster")
    parser.add_argument("--group", default="ng-01", help="the node group to replace")
    parser.add_argument("--speed", type=float, default=20.0, help="sim seconds per real second")
    parser.add_argument("--max-unavailable", type=int, default=100, help="old nodes drained at a time")
    parser.add_argument("--skip-kubectl", action="store_true", help="skip the kubectl reference")
    parser.add_argument("--skip-acks", action="store_true", help="skip the acks during a snapshot")
    parser.add_argument("--timeout", type=float, default=900.0, help="bound on the whole run (s)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args()
    if not args.skip_kubectl and not KUBECTL.exists():
        print(
            f"bench_watch: kubectl not found at {KUBECTL} (scripts/setup installs it); "
            "pass --skip-kubectl to run without the reference",
            file=sys.stderr,
        )
        return 2

    deadline = Deadline(args.timeout)
    print(f"load average at start: {loadavg()} ({os.cpu_count()} CPUs)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    scenario = work / "scenario.yaml"
    scenario.write_text(
        "name: large-bench\n"
        "description: the `large` cluster with --groups node groups, for bench_watch\n"
        'cluster:\n  version: "1.29.4"\n  platform: eks\n  lease_renew_seconds: 0\n  warmup: 0s\n'
        # History for watches is kept in SIMULATED time: 5 real minutes at --speed, as on a real
        # cluster (the default 5 simulated minutes are 15 real seconds at speed 20: each 30 s
        # watch stream of the bot then resumes from a compacted version, gets 410, lists again).
        f"  compaction_window: {int(300 * max(args.speed, 1.0))}s\n"
        f"generate:\n  node_groups: {args.groups}\n  nodes: {args.nodes}\n  pods: {args.pods}\n"
        f"  namespaces: {max(1, args.pods * 300 // 150_000)}\n"
        f"  deployments: {max(1, args.pods * 3500 // 150_000)}\n  daemonsets: [kube-proxy, aws-node]\n"
        "  pod_bytes: 5000\n  pdb_every: 4\n"
    )
    stub = SlackStub().start()
    rss = RssSampler()
    rss.thread.start()
    sim: subprocess.Popen[str] | None = None
    kubectl: subprocess.Popen[bytes] | None = None
    driver: WatchDriver | None = None
    services = None
    ack_thread: threading.Thread | None = None
    ack_bot: AckBot | None = None
    ack_at = 0.0
    try:
        print(f"serving {args.nodes} nodes / {args.pods} pods in {args.groups} node groups …", flush=True)
        t = time.monotonic()
        sim, url, kubeconfig = start_sim(scenario, work, args.speed, deadline)
        print(f"  sim ready at {url} in {time.monotonic() - t:.1f}s", flush=True)
        status = sim_call(url, "/sim/status")
        group_nodes = len(status["nodeGroups"][args.group]["nodes"])
        print(
            f"  objects: {status['objects'].get('nodes', 0)} nodes, {status['objects'].get('pods', 0)} pods; "
            f"{args.group} holds {group_nodes} nodes",
            flush=True,
        )
        config = work / "upgrade-bot.yaml"
        config.write_text(
            f"data_dir: {work / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
            f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
        )
        settings = load_settings(
            config, env={"SLACK_BOT_TOKEN": "xoxb-bench-token", "SLACK_API_URL": stub.api_url}
        )
        rss_start = vm_rss_mb()
        t_start = time.monotonic()
        services = assemble(settings)
        watches = services.watches

        if not args.skip_kubectl:
            kubectl = subprocess.Popen(
                [
                    str(KUBECTL),
                    "--kubeconfig",
                    str(kubeconfig),
                    "--cache-dir",
                    str(work / "kube-cache"),
                    "get",
                    "pods",
                    "-A",
                    "-w",
                    "-o",
                    "name",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            lines = LineCounter(kubectl)

        def connect(name: str) -> WatchSource:
            return Cluster.connect(pick_cluster(settings.clusters, name))

        row = watches.start(
            cluster="sim", channel=CHANNEL, started_by="U0PRIMARY", duration=timedelta(hours=1)
        )
        if not watches.claim(row):
            raise SystemExit("bench_watch: could not claim the watch just started")
        driver = WatchDriver(
            watches, watches.store.watch(row.id) or row, connect, telemetry=services.telemetry
        )
        events = StampedQueue()
        driver.events = events
        publishes: list[tuple[float, int]] = []
        driver.on_publish = lambda applied: publishes.append((time.monotonic(), applied))
        # When a publish hands a changed card to the coalescer (an unchanged card is not handed).
        handoffs: list[float] = []
        edits = services.edits
        assert edits is not None
        hand = edits.update_message

        def handed(channel: str, ts: str, text: str, *, blocks: Any = None) -> None:
            handoffs.append(time.monotonic())
            hand(channel, ts, text, blocks=blocks)

        setattr(edits, "update_message", handed)  # noqa: B010 - an instance wrapper, for timing only
        # The driver's WatchState, as it hands it to publish: its footprint is measured after the list.
        states: list[WatchState] = []
        kept: list[tuple[float, bool]] = []  # when a publish returned, and whether it kept the card
        publish = watches.publish

        starts: list[float] = []  # when each publish began (its state is the events applied by then)

        def publishing(row: Any, state: WatchState, **kw: Any) -> Any:
            if not states:
                states.append(state)
            starts.append(time.monotonic())
            result = publish(row, state, **kw)
            kept.append((time.monotonic(), result.card_kept))
            return result

        setattr(watches, "publish", publishing)  # noqa: B010 - an instance wrapper, to find the state
        # When the coalescer's flusher sends each card edit, and when Slack's answer is back.
        sends: list[tuple[float, float]] = []
        send = edits.inner.update_message

        def sending(channel: str, ts: str, text: str, *, blocks: Any = None) -> None:
            began = time.monotonic()
            try:
                send(channel, ts, text, blocks=blocks)
            finally:
                sends.append((began, time.monotonic()))

        setattr(edits.inner, "update_message", sending)  # noqa: B010 - an instance wrapper, for timing only
        driver.start()
        wait_until(lambda: publishes or not driver.alive, deadline.left(600), "the watch's first publish")
        if not publishes:
            raise SystemExit("bench_watch: the watch driver stopped before it listed")
        t_listed = time.monotonic()
        print(
            f"watch listed in {t_listed - t_start:.1f}s ({events.pods_listed} pods), first publish; "
            f"RSS {vm_rss_mb():.0f} MB",
            flush=True,
        )
        if kubectl is not None:
            wait_until(
                lambda: lines.lines >= events.pods_listed or kubectl.poll() is not None,
                deadline.left(600),
                "kubectl's list",
            )
            if kubectl.poll() is not None:
                raise SystemExit(f"bench_watch: kubectl exited with {kubectl.returncode} during its list")
            print(f"kubectl -w listed {lines.lines} pods after {time.monotonic() - t_start:.1f}s", flush=True)
        # Let both settle (the version poll, late list pages), then start the replacement.
        time.sleep(2.0)
        base_items = len(events.arrivals)
        base_publishes = len(publishes)
        base_lines = lines.lines if kubectl is not None else 0
        rss_listed = vm_rss_mb()
        held = states[0].footprint()
        print(
            f"watch state after the list: {held.pods:,} pods ({held.unhealthy:,} with a record) in "
            f"{held.pod_bytes / 1e6:.2f} MB = {held.per_pod:.2f} bytes per pod; {held.nodes:,} nodes in "
            f"{held.node_bytes / 1e6:.2f} MB = {held.per_node:.0f} bytes per node; the bot's RSS grew "
            f"{(rss_listed - rss_start) * 2**20 / max(held.pods, 1):,.0f} bytes per pod listed",
            flush=True,
        )
        t0 = time.monotonic()
        op = sim_call(
            url,
            f"/sim/nodegroups/{args.group}/replace",
            {
                "version": TARGET_VERSION,
                "max_unavailable": args.max_unavailable,
                # The drain timeout is simulated time (15 min by default): a CPU-bound sim at high
                # speed would fail the update before its evictions were even processed.
                "drain_timeout": "48h",
            },
        )
        print(
            f"replacing {args.group} ({group_nodes} nodes) at speed {args.speed:g}: operation {op['id']}",
            flush=True,
        )

        if not args.skip_acks:
            ack_config = work / "ack-bot.yaml"
            ack_config.write_text(
                f"data_dir: {work / 'ack-data'}\nroster:\n  primary: [U0PRIMARY]\n"
                f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
            )

            ack_bot = AckBot(ack_config)
            # Into the stream: once the drain has begun (2,000 items in, or after 60 s at most).
            with contextlib.suppress(SystemExit):
                wait_until(lambda: len(events.arrivals) - base_items >= 2000, deadline.left(60), "the stream")
            ack_at = time.monotonic() - t0
            ack_thread = threading.Thread(
                target=ack_bot.run, args=(deadline.left(180),), name="acks", daemon=True
            )
            ack_thread.start()

        # Quiet: nothing new for 5 s, everything folded and published.
        def quiet() -> bool:
            n = len(events.arrivals)
            return (
                time.monotonic() - events.arrivals[-1] > 5.0 and driver.applied >= n and publishes[-1][1] >= n
            )

        got: dict[str, Any] = {"state": "unknown"}
        t_op = 0.0
        partial = False
        try:
            while True:
                wait = deadline.left(30, reserve=RESERVE)
                try:
                    got = sim_call(url, f"/sim/operations/{op['id']}?wait=5", timeout=wait)
                except OSError as exc:  # a busy sim answers late: ask again, within the run's bound
                    print(
                        f"  +{time.monotonic() - t0:.0f}s: the sim did not answer ({exc!r}; again); "
                        f"{len(events.arrivals) - base_items:,} items, applied "
                        f"{driver.applied - base_items:,}",
                        flush=True,
                    )
                    continue
                print(
                    f"  +{time.monotonic() - t0:.0f}s: operation {got.get('state')} "
                    f"{got.get('phase', '')}; {len(events.arrivals) - base_items:,} items, "
                    f"applied {driver.applied - base_items:,}, published {publishes[-1][1] - base_items:,}",
                    flush=True,
                )
                if got.get("state") != "InProgress":
                    break
            t_op = time.monotonic()
            if got.get("error"):
                print(f"  the operation failed: {got['error']}", flush=True)
            print(
                f"operation {got['state']} after {t_op - t0:.1f}s; "
                f"{len(events.arrivals) - base_items} items so far",
                flush=True,
            )
            while not quiet():
                deadline.left(1, reserve=RESERVE)
                time.sleep(0.5)
        except OutOfTime:
            partial = True
            print(
                f"PARTIAL: --timeout {args.timeout:.0f}s leaves {RESERVE:.0f}s to wind down: the stream is cut "
                f"at +{time.monotonic() - t0:.0f}s (operation {got.get('state')} {got.get('phase', '')}); "
                "the figures below cover what arrived until now",
                flush=True,
            )
        t_quiet = time.monotonic()
        rss_end_stream = vm_rss_mb()
        watches.request_end(row.id, by="U0PRIMARY")
        driver.thread.join(timeout=30)
        ended = watches.store.watch(row.id)
        print(
            f"stream {'cut' if partial else 'quiet'} at +{t_quiet - t0:.1f}s; watch ended: {ended.end_reason if ended else '?'}; "
            f"publishes {len(publishes)}",
            flush=True,
        )
        if kubectl is not None:
            target_lines = base_lines + int(events.kinds[base_items:].tolist().count(1))
            with contextlib.suppress(SystemExit):
                wait_until(lambda: lines.lines >= target_lines, 5 if partial else 30, "kubectl's events")
            kubectl.terminate()
            kubectl.wait(timeout=10)
        if ack_thread is not None:
            ack_thread.join(timeout=5 if partial else 60)
        assert services.edits is not None
        # The last card edit goes at its slot, as in the bot; `stop` then flushes nothing (it would
        # send a pending edit at once, inside the 2 s of the previous one).
        with contextlib.suppress(SystemExit):
            wait_until(lambda: edits.pending == 0, 10, "the last card edit")
        services.edits.stop()
        rss_end = vm_rss_mb()
        t_end = time.monotonic()

        # ----- figures
        arrivals = events.arrivals
        kinds = events.kinds
        n_items = len(arrivals)
        stream_kinds = Counter(kinds[base_items:].tolist())
        pod_events, node_events = stream_kinds[1], stream_kinds[2]
        updates = stub.calls_to("chat.update")
        update_times = sorted(c.at for c in updates)
        # The time each publish's state reached Slack: the first chat.update the stub received
        # after the publish handed its (changed) card to the coalescer; for a publish that kept
        # the card for the one due at its edit slot (`card_kept`), after the next hand-off; a
        # publish that handed nothing and kept nothing left the card as it was (already showing
        # that text): its own time.
        kept_times = [t for t, _ in kept]
        in_slack: list[float] = []
        for i, (tp, _applied) in enumerate(publishes):
            tprev = publishes[i - 1][0] if i else 0.0
            h = bisect.bisect_right(handoffs, tp) - 1
            k = bisect.bisect_right(kept_times, tp) - 1
            if h >= 0 and handoffs[h] > tprev:
                u = bisect.bisect_left(update_times, handoffs[h])
                in_slack.append(update_times[u] if u < len(update_times) else float("nan"))
            elif k >= 0 and kept[k][1]:
                h = bisect.bisect_left(handoffs, tp)
                u = bisect.bisect_left(update_times, handoffs[h]) if h < len(handoffs) else len(update_times)
                in_slack.append(update_times[u] if u < len(update_times) else float("nan"))
            else:
                in_slack.append(tp)
        lags: list[float] = []
        lags_slack: list[float] = []
        uncovered = 0
        p = base_publishes
        for k in range(base_items, n_items):
            while p < len(publishes) and publishes[p][1] <= k:
                p += 1
            if p == len(publishes):
                uncovered += 1
                continue
            lags.append(publishes[p][0] - arrivals[k])
            lags_slack.append(in_slack[p] - arrivals[k])
        never_sent = sum(1 for x in lags_slack if x != x)
        lags_slack = [x for x in lags_slack if x == x]

        cards = {str(c.params.get("ts")) for c in updates}
        per_card_2s = max((most_in_window(stub, "chat.update", 2.0, "ts", ts) for ts in cards), default=0)
        per_minute = stub.most_in_window("chat.update", 60.0)
        channels = {str(c.params.get("channel")) for c in stub.calls_to("chat.postMessage")}
        posts_per_s = max(
            (most_in_window(stub, "chat.postMessage", 1.0, "channel", ch) for ch in channels), default=0
        )
        counts = stub.counts()

        print()
        print("RESULTS" + (" (PARTIAL: the stream was cut by --timeout)" if partial else ""))
        print(
            f"  stream: {pod_events + node_events:,} pod and node events ({pod_events:,} pod, {node_events:,} node) "
            f"+ {n_items - base_items - pod_events - node_events:,} other items, replacement requested → "
            f"{'cut' if partial else 'quiet'} {t_quiet - t0:.1f}s (operation {got['state']}"
            f"{f' at {t_op - t0:.1f}s' if t_op else ', not finished'}); target ≥ 100,000: "
            f"{'met' if pod_events + node_events >= 100_000 else 'NOT met'}"
        )
        if lags:
            print(
                f"  lag arrival → publish       = p50 {statistics.median(lags):.2f}s, p95 {pct(lags, 0.95):.2f}s, "
                f"max {max(lags):.2f}s over {len(lags):,} items   (target p95 ≤ 2 s)"
            )
            print(
                f"  lag arrival → chat.update   = p50 {statistics.median(lags_slack):.2f}s, "
                f"p95 {pct(lags_slack, 0.95):.2f}s, max {max(lags_slack):.2f}s (the card in Slack: the "
                f"edit carrying the covering publish; {len(handoffs)} card hand-offs to the coalescer; "
                f"{never_sent} items whose edit was never sent)   (target p95 ≤ 2.0 s)"
            )
            print(f"  where the Slack-edit lag goes: {lag_parts(starts, handoffs, sends, update_times)}")
        print(f"  items never covered by a publish: {uncovered}")
        print(
            f"  publishes during the stream = {len(publishes) - base_publishes}; "
            f"driver applied {driver.applied:,} items in all; stream restarts "
            f"{sum(st.restarts for st in driver.streams)}, lists {sum(st.syncs for st in driver.streams)}"
        )
        print(
            f"  Slack: chat.update {counts.get('chat.update', 0)}, chat.postMessage "
            f"{counts.get('chat.postMessage', 0)} (all calls: {dict(sorted(counts.items()))})"
        )
        print(f"  chat.update per card, most in any 2 s  = {per_card_2s}   (target ≤ 1)")
        print(f"  chat.update, most in any 60 s         = {per_minute}   (target ≤ ~50, 53 with slack)")
        print(f"  chat.postMessage per channel, most in any 1 s = {posts_per_s}   (target ~1)")
        budget = BudgetConfig()
        respected = (
            per_card_2s <= 1
            and per_minute <= budget.updates_per_minute + budget.burst
            and posts_per_s <= budget.posts_per_second + budget.burst
        )
        print(
            f"  Slack budget {'respected' if respected else 'NOT respected'} (≤ 1 edit per card per 2 s, "
            f"≤ {budget.updates_per_minute:g} + {budget.burst} edits a minute, ≤ {budget.posts_per_second:g} + "
            f"{budget.burst} posts a second per channel)"
        )
        close = close_posts(stub)
        if close:
            print(f"    posts < 1 s after the previous one in their channel: {len(close)}; the first 5:")
            for line in close[:5]:
                print(f"      {line}")
        print(
            f"  RSS (this process = the bot + the stub): start {rss_start:.0f} MB, after the list "
            f"{rss_listed:.0f} MB, peak during the stream {rss.peak(t0):.0f} MB, stream end "
            f"{rss_end_stream:.0f} MB, end {rss_end:.0f} MB; ru_maxrss "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (the list included)"
        )
        peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rss.peak(0.0))
        print(
            f"  peak RSS through the list and the replacement = {peak:.0f} MB   (target ≤ 300 MB: "
            f"{'met' if peak <= 300 else 'NOT met'}); the state: {held.per_pod:.2f} bytes per pod, "
            f"{held.per_node:.0f} bytes per node"
        )
        bot_span = events.last_pod - t0
        bot_rate = pod_events / bot_span if bot_span > 0 else 0.0
        print(f"  bot pod stream              = {bot_rate:,.0f} events/s ({pod_events:,} in {bot_span:.1f}s)")
        if kubectl is not None:
            k_events = lines.lines - base_lines
            k_span = lines.last - t0
            k_rate = k_events / k_span if k_span > 0 else 0.0
            print(f"  kubectl get pods -A -w      = {k_rate:,.0f} events/s ({k_events:,} in {k_span:.1f}s)")
            print(f"  bot / kubectl               = {bot_rate / k_rate if k_rate else float('nan'):.2f}")
        else:
            print("  kubectl reference skipped (--skip-kubectl)")
        if args.skip_acks:
            print("  acks skipped (--skip-acks)")
        elif ack_bot is not None and ack_bot.acks:
            acks_s = ack_bot.acks
            print(
                f"  acks during stream+snapshot = p50 {statistics.median(acks_s):.3f}s, slowest "
                f"{max(acks_s):.3f}s of {len(acks_s)} wanted {ACKS} (sent from +{ack_at:.1f}s into the "
                f"replacement; the snapshot's ack {ack_bot.first:.3f}s, its post after "
                f"{ack_bot.snapshot_s:.1f}s{'' if ack_bot.snapshot_s else ' (not seen)'}; target slowest ≤ 0.1 s)"
            )
            print(
                "    each ack (sent at s into the snapshot: seconds): "
                + ", ".join(
                    f"{at:.2f}: {ack:.3f}" for at, ack in zip(ack_bot.offsets, ack_bot.acks, strict=True)
                )
            )
            if ack_bot.error:
                print(f"    the ack bot then failed: {ack_bot.error}")
        else:
            print(f"  acks: FAILED ({ack_bot.error if ack_bot else ''} no ack while the snapshot ran)")
        print(f"  total {t_end - t_start:.0f}s from the bot's start; load average at end: {loadavg()}")
        return 0
    finally:
        rss.stop.set()
        if driver is not None:
            driver.stop.set()
            driver.thread.join(timeout=10) if driver.thread.ident else None
        if kubectl is not None and kubectl.poll() is None:
            kubectl.terminate()
            try:
                kubectl.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kubectl.kill()
        if services is not None:
            with contextlib.suppress(Exception):
                services.close()
        if sim is not None:
            sim.send_signal(signal.SIGINT)
            try:
                sim.wait(timeout=30)
            except subprocess.TimeoutExpired:
                sim.kill()
        if ack_bot is not None:
            ack_bot.stop()
        stub.stop()
        if args.keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
