"""Snapshot and diff at Kubernetes' scale envelope, against kubectl on the same simulated server.

Serves the sim's `large` scenario (5,000 nodes, 150,000 pods) and prints, in one run:
  - the wire: every list the snapshot makes, fetched in pages of 500 with the official client and
    not parsed (as bench_sim_list.py's transport-only figure), pods alone and all lists;
  - kubectl get nodes -o json + kubectl get pods -A -o json wall time (the reference);
  - `upgrade-bot snapshot` wall time, its ratio to the wire (target ≤ 3) and to kubectl, and its
    peak RSS (target ≤ 300 MB); and the snapshot alone, without the interpreter's start-up and
    imports (timed inside a fresh process once it has imported the bot), with its ratio too. The
    machine may be shared, so the command runs twice and the wire is measured again after it: the
    ratios use the better of each pair (every run is printed);
  - the kube adapter's decoding rates, in this process over HTTP: pods per second listed, and
    watch events per second (a watch with `sendInitialEvents` streams every pod as ADDED);
  - the stored snapshot's size (target ≤ 30 MB);
  - diff of two 150k-pod snapshots, in-process (target ≤ 0.1 × snapshot time), and end to end;
  - 20 signed `/upgrade help` acks sent while a 150k snapshot runs inside the bot's HTTP front
    door: median and slowest (target: slowest ≤ 0.1 s).

Usage: .venv/bin/python benchmarks/bench_snapshot.py [--scenario large] [--skip-kubectl]
       [--skip-slack] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.kube import Cluster  # noqa: E402
from bot.adapters.store import Store  # noqa: E402
from bot.core.snapshots import schema  # noqa: E402
from bot.core.snapshots.diff import diff  # noqa: E402
from bot.core.snapshots.service import resolve  # noqa: E402
from tests.support.signing import post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import Call, SlackStub  # noqa: E402

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"
PAGE = 500
#: Every list `upgrade-bot snapshot` makes, in its order.
SNAPSHOT_LISTS = (
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/daemonsets",
    "/apis/apps/v1/statefulsets",
    "/apis/policy/v1/poddisruptionbudgets",
    "/api/v1/pods",
    "/api/v1/events",
)
ACKS = 20
#: The acks are spread over this share of the command-line snapshot's time (measured in the same
#: run, less its start-up), so they sample the lists, the projection and the encoding; inside the
#: running bot the snapshot skips the start-up and is quicker, so the share leaves room for all 20.
ACK_SPREAD = 0.6


def start_sim(scenario: str, workdir: Path) -> tuple[subprocess.Popen[str], str, Path]:
    kubeconfig = workdir / "sim.kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "sim",
            "serve",
            "--scenario",
            scenario,
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
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sim exited with {proc.wait()}")
        if line.startswith("url:"):
            url = line.split(":", 1)[1].strip()
        if line.startswith("kubeconfig:"):
            kubeconfig = Path(line.split(":", 1)[1].strip())
            break
    return proc, url, kubeconfig


def timed_rss(cmd: list[str], sink: Path | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB of the child process, and its exit status."""
    elapsed, _, rss, code = timed_cpu(cmd, sink)
    return elapsed, rss, code


def timed_cpu(cmd: list[str], sink: Path | None = None) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds (user + system, with the list helpers it reaped), peak RSS in MB
    and exit status of the command."""
    started = time.monotonic()
    with open(sink or os.devnull, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read()
        proc.stderr.close()
    elapsed = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code not in (0, 3):  # 3: the command worked and found something (a check's Required finding)
        raise SystemExit(f"{cmd[:4]} failed ({code}): {err.decode()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code


def transport_only(kubeconfig: Path, path: str) -> tuple[float, int]:
    """Seconds and bytes to fetch every page of `path` with the official client, not parsed.

    As bench_sim_list.py: raw pages (`_preload_content=False`); only the list metadata ahead of
    the items is parsed, for the continue token. This is the wire: the sim serving and the
    client's transport, which no decoder can beat.
    """
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    with k8s_client.ApiClient(configuration) as api:
        token, size = "", 0
        started = time.monotonic()
        while True:
            query: list[tuple[str, object]] = [("limit", PAGE)] + ([("continue", token)] if token else [])
            resp = api.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(10, 120),
            )
            data = resp.data
            resp.release_conn()
            size += len(data)
            cut = data.find(b',"items":')
            head = json.loads(data[:cut] + b"}") if cut > 0 else json.loads(data)
            token = head["metadata"].get("continue", "")
            del data
            if not token:
                return time.monotonic() - started, size


def adapter_rates(config: Path) -> tuple[float, int, float, int]:
    """Pods per second through the adapter's typed list, and watch events per second decoded.

    The watch asks for `sendInitialEvents` (from the list's version, as Kubernetes requires), so
    the server streams every pod as an ADDED event: the adapter's watch loop decodes as many
    events as the list had pods, over the same HTTP, into the same `schema.Pod`.
    """
    from bot.settings import load_settings

    settings = load_settings(config)
    cluster = Cluster.connect(settings.clusters["sim"])
    try:
        started = time.monotonic()
        pods, rv = 0, ""
        for page in cluster.list_pages("/api/v1/pods", item_type=schema.Pod):
            pods += len(page.items)
            rv = page.resource_version
        list_s = time.monotonic() - started
        query = {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
        stream = cluster.watch(
            "/api/v1/pods", query, resource_version=rv, timeout_seconds=600, item_type=schema.Pod
        )
        events = 0
        started = time.monotonic()
        try:
            for event in stream:
                if event.type == "ADDED":
                    events += 1
                    if events == pods:
                        break
        finally:
            stream.close()
        watch_s = time.monotonic() - started
    finally:
        cluster.close()
    return pods / list_s, pods, events / watch_s, events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--skip-kubectl", action="store_true", help="skip the kubectl reference")
    parser.add_argument("--skip-slack", action="store_true", help="skip the ack-during-snapshot measurement")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (database, results.json)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    print(f"serving the sim's `{args.scenario}` scenario …", flush=True)
    started = time.monotonic()
    sim, url, kubeconfig = start_sim(args.scenario, work)
    print(f"  sim ready at {url} in {time.monotonic() - started:.1f}s", flush=True)
    config = work / "upgrade-bot.yaml"
    config.write_text(
        f"data_dir: {work / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
        f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
    )
    bot = [sys.executable, "-m", "bot"]
    results: dict[str, float] = {}
    try:
        wire = {path: transport_only(kubeconfig, path) for path in SNAPSHOT_LISTS}
        results["transport_pods_s"] = wire["/api/v1/pods"][0]
        results["transport_s"] = sum(seconds for seconds, _ in wire.values())
        print(
            f"transport only (official client, raw pages of {PAGE}, not parsed): pods "
            f"{results['transport_pods_s']:.1f}s ({wire['/api/v1/pods'][1] / 1e6:.0f} MB); every list the "
            f"snapshot makes {results['transport_s']:.1f}s "
            f"({sum(size for _, size in wire.values()) / 1e6:.0f} MB)",
            flush=True,
        )
        if not args.skip_kubectl:
            kc = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--request-timeout=0"]
            t_nodes, rss_nodes, _ = timed_rss([*kc, "get", "nodes", "-o", "json"])
            t_pods, rss_pods, _ = timed_rss([*kc, "get", "pods", "-A", "-o", "json"])
            results["kubectl_s"] = t_nodes + t_pods
            print(
                f"kubectl get nodes -o json: {t_nodes:.1f}s (peak {rss_nodes:.0f} MB); get pods -A -o json: "
                f"{t_pods:.1f}s (peak {rss_pods:.0f} MB); total {results['kubectl_s']:.1f}s",
                flush=True,
            )

        list_rate, pods, watch_rate, events = adapter_rates(config)
        results["list_pods_per_s"], results["watch_events_per_s"] = list_rate, watch_rate
        print(
            f"kube adapter, typed decode (schema.Pod): list {list_rate:,.0f} pods/s ({pods} pods); "
            f"watch {watch_rate:,.0f} events/s ({events} events)",
            flush=True,
        )

        t_snap, rss_snap, _ = timed_rss([*bot, "snapshot", "pre", "--config", str(config)])
        print(f"upgrade-bot snapshot pre: {t_snap:.1f}s, peak RSS {rss_snap:.0f} MB", flush=True)
        t_snap2, rss_snap2, _ = timed_rss([*bot, "snapshot", "post", "--config", str(config)])
        print(f"upgrade-bot snapshot post: {t_snap2:.1f}s, peak RSS {rss_snap2:.0f} MB", flush=True)
        # The machine is shared: each side of the ratio is the better of two runs, the wire's
        # measured again right after the snapshots, so both saw the same load.
        results["snapshot_s"] = min(t_snap, t_snap2)
        results["snapshot_rss_mb"] = max(rss_snap, rss_snap2)
        again = sum(transport_only(kubeconfig, path)[0] for path in SNAPSHOT_LISTS)
        results["transport_s"] = min(results["transport_s"], again)
        print(
            f"transport only, again: every list {again:.1f}s; the ratios below use the better of two "
            f"(wire {results['transport_s']:.1f}s, snapshot {results['snapshot_s']:.1f}s)",
            flush=True,
        )
        inner = snapshot_without_startup(config)
        results["snapshot_core_s"], results["startup_s"] = inner["snapshot_s"], inner["startup_s"]
        print(
            f"the snapshot alone (in a process that has imported the bot): {inner['snapshot_s']:.1f}s; "
            f"that process's start-up and imports: {inner['startup_s']:.2f}s",
            flush=True,
        )

        store = Store.open(f"sqlite:///{work / 'data' / 'upgrade-bot.db'}")
        sizes = [m.size for m in store.snapshots()]
        results["stored_mb"] = max(sizes) / 1e6
        before = resolve(store, "pre", cluster="sim").snap
        after = resolve(store, "post", cluster="sim").snap
        store.close()
        pods = len(before["pods"])
        t0 = time.monotonic()
        report = diff(before, after)
        results["diff_s"] = time.monotonic() - t0
        t_diff_cli, _, _ = timed_rss(
            [*bot, "diff", "pre", "post", "--format", "json", "--config", str(config)]
        )
        print(f"stored snapshot: {results['stored_mb']:.1f} MB for {pods} pods", flush=True)
        print(
            f"diff (in process): {results['diff_s']:.2f}s, {len(report.regressions)} regressions; "
            f"upgrade-bot diff end to end: {t_diff_cli:.1f}s",
            flush=True,
        )

        if not args.skip_slack:
            acks = ack_during_snapshot(config, work, results["snapshot_s"])
            results["acks"] = len(acks)
            results["ack_median_s"] = statistics.median(acks)
            results["ack_slowest_s"] = max(acks)

        print()
        print("RESULTS")
        print(
            f"  snapshot / transport only   = {results['snapshot_s'] / results['transport_s']:.2f}   "
            f"({results['snapshot_s']:.1f}s / {results['transport_s']:.1f}s; target ≤ 3)"
        )
        print(
            f"  snapshot alone / transport  = {results['snapshot_core_s'] / results['transport_s']:.2f}   "
            f"({results['snapshot_core_s']:.1f}s / {results['transport_s']:.1f}s, without "
            f"{results['startup_s']:.2f}s of start-up)"
        )
        if "kubectl_s" in results:
            print(
                f"  snapshot / kubectl          = {results['snapshot_s'] / results['kubectl_s']:.3f}   "
                f"({results['snapshot_s']:.1f}s / {results['kubectl_s']:.1f}s)"
            )
        print(f"  snapshot peak RSS           = {results['snapshot_rss_mb']:.0f} MB   (target ≤ 300 MB)")
        print(f"  list through the adapter    = {results['list_pods_per_s']:,.0f} pods/s")
        print(f"  watch through the adapter   = {results['watch_events_per_s']:,.0f} events/s")
        print(
            f"  diff / snapshot             = {results['diff_s'] / results['snapshot_s']:.3f}   (target ≤ 0.10)"
        )
        print(f"  stored snapshot             = {results['stored_mb']:.1f} MB   (target ≤ 30 MB)")
        if "ack_slowest_s" in results:
            print(
                f"  acks while snapshot runs    = median {results['ack_median_s']:.3f} s, slowest "
                f"{results['ack_slowest_s']:.3f} s of {results['acks']:.0f}   (target: slowest ≤ 0.1 s)"
            )
        (work / "results.json").write_text(json.dumps(results, indent=2))
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sim.kill()
        if args.keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


#: Run in a fresh interpreter by `snapshot_without_startup`: import, then time one snapshot.
INNER = """
import json, sys, time
started = time.monotonic()
from datetime import UTC, datetime
from pathlib import Path
from bot.adapters.kube import Cluster
from bot.adapters.store import Store
from bot.core.snapshots.service import take_and_store
from bot.settings import load_settings
imported = time.monotonic()
settings = load_settings(Path(sys.argv[1]))
store = Store.open(settings.database_url)
cluster = Cluster.connect(settings.clusters["sim"])
begun = time.monotonic()
take_and_store(store, cluster, label="alone", taken_by="bench", now=datetime.now(UTC))
done = time.monotonic()
cluster.close()
store.close()
print(json.dumps({"snapshot_s": done - begun, "startup_s": imported - started}))
"""


def snapshot_without_startup(config: Path) -> dict[str, float]:
    """The snapshot as the running bot takes it: connected, store open, modules imported."""
    out = subprocess.run(
        [sys.executable, "-c", INNER, str(config)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def ack_during_snapshot(
    config: Path, work: Path, snapshot_s: float, *, command: str = "snapshot during", what: str = "snapshot"
) -> list[float]:
    """Start the HTTP front door, ask it for a snapshot (or another long `command`, which `what`
    names), and time the acks of 20 `help` commands.

    They are sent one after another, evenly spread over `ACK_SPREAD` of the time the command-line
    snapshot took (`snapshot_s`, less its interpreter start-up); only acks that completed before
    the snapshot's post arrived count (a command answered after the snapshot proves nothing), and
    fewer than 20 of them is said. An ephemeral answer to the long command itself (a refusal or
    an error) ends the measurement with that answer instead of waiting for a post that never comes.
    """
    secret = "bench-signing-secret-0123456789"
    with SlackStub() as stub:
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench-token",
            "SLACK_SIGNING_SECRET": secret,
            "SLACK_API_URL": stub.api_url,
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot",
                "run",
                "--http",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--config",
                str(config),
                "--log-level",
                "WARNING",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            match = re.search(r"listening on (\S+)", proc.stdout.readline())
            assert match, "the bot did not start"
            url = f"{match.group(1)}/slack/events"
            body = slash_command_body(command, response_url=stub.response_url("snap"), trigger_id="b-1")
            started = time.monotonic()
            first = post(url, body, signed_headers(body, secret))
            time.sleep(0.2)  # past the snapshot's first requests, into its lists
            period = max(0.05, (snapshot_s - 1.0) * ACK_SPREAD / ACKS)
            acks: list[float] = []
            offsets: list[float] = []
            sent = 0

            def answered() -> list[Call]:
                return [c for c in stub.calls_to("response_url") if c.path == "/response/snap"]

            def finished() -> bool:
                return bool(stub.calls_to("chat.postMessage") or answered())

            while sent < ACKS and not finished():
                due = time.monotonic() + period
                body2 = slash_command_body(
                    "help", response_url=stub.response_url(f"help-{sent}"), trigger_id=f"b-h{sent}"
                )
                second = post(url, body2, signed_headers(body2, secret))
                sent += 1
                if not finished():
                    acks.append(second.seconds)
                    offsets.append(time.monotonic() - started - second.seconds)
                time.sleep(max(0.0, due - time.monotonic()))
            deadline = time.monotonic() + 600
            while not finished() and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise SystemExit(f"the bot exited ({proc.returncode}) while it answered the {what}")
                time.sleep(0.2)
            stub.wait_for(finished, timeout=1)
            total = time.monotonic() - started
            if answered() and not stub.calls_to("chat.postMessage"):
                text = answered()[0].params.get("text")
                raise SystemExit(f"the {what} was answered with {text!r}, not posted")
            if not acks:
                raise SystemExit(f"the {what} finished before a second command could be sent")
            print(
                f"slash command acks during a {what}: {what} ack {first.seconds:.3f}s; {len(acks)} `help` "
                f"acks while it ran (of {ACKS} wanted), median {statistics.median(acks):.3f}s, slowest "
                f"{max(acks):.3f}s; the {what}'s post arrived after {total:.1f}s",
                flush=True,
            )
            print(
                f"  each ack (sent at s into the {what}: seconds): "
                + ", ".join(f"{at:.2f}: {ack:.3f}" for at, ack in zip(offsets, acks, strict=True)),
                flush=True,
            )
            return acks
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    raise SystemExit(main())
